import Joi from 'joi';

/** POST /v1/browser/profiles (service.md, Browser endpoints). */
export const profileCreateSchema = Joi.object({
  end_user_id: Joi.string().min(1).max(200).required(),
  name: Joi.string().min(1).max(200).pattern(/^[^\u0000-\u001f\u007f]*$/).required(),
});
