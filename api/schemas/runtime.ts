import Joi from 'joi';

/** POST /v1/environments/{id}/exec (decisions.md). */
export const execSchema = Joi.object({
  command: Joi.array().items(Joi.string().max(128 * 1024).pattern(/^[^\u0000]*$/)).min(1).max(4096).required(),
  cwd: Joi.string().min(1).max(4096).pattern(/^[^\u0000]*$/),
  env: Joi.object().pattern(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, Joi.string().max(128 * 1024).pattern(/^[^\u0000]*$/).allow('')),
  stdin: Joi.string().max(16 * 1024 * 1024).allow(''),
  timeout_secs: Joi.number().integer().min(1).max(600),
});

/** PUT /v1/environments/{id}/files. */
export const writeFileSchema = Joi.object({
  path: Joi.string().min(1).max(4096).required(),
  content: Joi.string().allow('').max(48 * 1024 * 1024).required(),
  encoding: Joi.string().valid('utf8', 'base64').default('utf8'),
});
