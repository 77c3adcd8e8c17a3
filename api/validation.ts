import type Joi from 'joi';
import { ServiceError } from '../lib/errors.js';

/**
 * decisions.md splits body errors in two: 422 `invalid_body` for the body's shape (a
 * missing field, a wrong type, a value outside an enum, an unknown field) and 400
 * `invalid_request` for values of the right shape that break a rule (ranges, lengths,
 * formats, cross-field rules). joi reports both kinds; these are the shape kinds.
 */
const SHAPE_TYPES = new Set([
  'any.required',
  'any.only',
  'object.unknown',
  'object.base',
  'array.base',
  'string.base',
  'number.base',
  'boolean.base',
  'date.base',
  'alternatives.types',
  'array.includesRequiredUnknowns',
  'number.unsafe',
  'number.infinity',
]);

export function isShapeError(detail: Joi.ValidationErrorItem): boolean {
  return SHAPE_TYPES.has(detail.type) || Boolean(detail.context?.shape);
}

/**
 * The detail's message, without the value given: Joi's pattern messages quote it ("bot_token
 * with value xoxb-... fails to match"), and a secret pasted with a stray space came back in the
 * 400's body (a fourth review: no secret in an error).
 */
function describe(detail: Joi.ValidationErrorItem): string {
  const v = detail.context?.value;
  let m = detail.message;
  if (typeof v === 'string' && v.length >= 3 && m.includes(v)) m = m.split(v).join('(the value given)');
  return m.replace(/"/g, '');
}

export interface ValidationOutcome<T> {
  value?: T;
  /** Set when the value is invalid: the error to answer with. */
  error?: ServiceError;
}

/** Validates without throwing, so batch items can report their own errors. */
export function check<T>(schema: Joi.Schema, input: unknown): ValidationOutcome<T> {
  const { value, error } = schema.validate(input, {
    abortEarly: false,
    convert: false,
    allowUnknown: false,
    errors: { wrap: { label: false } },
  });
  if (!error) return { value: value as T };
  const shape = error.details.filter(isShapeError);
  if (shape.length > 0) {
    return { error: new ServiceError('invalid_body', shape.map(describe).join('; ')) };
  }
  return { error: new ServiceError('invalid_request', error.details.map(describe).join('; ')) };
}

/** Validates a JSON body, throwing the 422 or 400 of decisions.md. */
export function validateBody<T>(schema: Joi.Schema, input: unknown): T {
  if (input === undefined) throw new ServiceError('invalid_body', 'a JSON body is required');
  const out = check<T>(schema, input);
  if (out.error) throw out.error;
  return out.value as T;
}

/** Query strings are text: joi converts them, and every failure is 400 `invalid_request`. */
export function validateQuery<T>(schema: Joi.Schema, input: unknown): T {
  const { value, error } = schema.validate(input, { abortEarly: true, convert: true, allowUnknown: true, errors: { wrap: { label: false } } });
  if (error) throw new ServiceError('invalid_request', describe(error.details[0]!));
  return value as T;
}
