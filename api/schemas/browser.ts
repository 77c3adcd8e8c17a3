import Joi from 'joi';

/** POST /v1/browser/profiles (service.md, Browser endpoints). */
export const profileCreateSchema = Joi.object({
  end_user_id: Joi.string().min(1).max(200).required(),
  name: Joi.string().min(1).max(200).pattern(/^[^\u0000-\u001f\u007f]*$/).required(),
});

/** POST /v1/browser/leases. */
export const leaseCreateSchema = Joi.object({
  environment_id: Joi.string().min(1).max(200).required(),
  profile_id: Joi.string().min(1).max(200).allow(null),
  mode: Joi.string().valid('read', 'write', 'clean').allow(null),
});

/** POST /v1/browser/leases/{id}/release (optional body). */
export const leaseReleaseSchema = Joi.object({
  save: Joi.boolean().strict().allow(null),
});
