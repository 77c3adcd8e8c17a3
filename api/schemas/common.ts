import Joi from 'joi';

/**
 * Path and query parameters as the OpenAPI document describes them (issue 25, item 3).
 * The routes parse queries by hand (api/pagination.ts: a limit is clamped, not refused,
 * and every query problem is 400), so these joi objects are documentation only; bodies
 * are validated with the very schemas the document shows.
 */

export const pageQuery = Joi.object({
  limit: Joi.number().integer().description('Items per page, 1 to 200 (clamped); default 50. Not an integer: 400'),
  after: Joi.string().description('The `next` of the previous page; an id not in the list gives an empty page'),
});

const id = (what: string) => Joi.string().description(what);

export const environmentIdParam = { id: id('The environment id, env_<24 hex>') };
export const templateIdParam = { id: id('The template id') };
export const approvalIdParam = { id: id('The approval request id, apr_<24 hex>') };
export const grantIdParam = { id: id('The grant id') };
export const profileIdParam = { id: id('The browser profile id') };
export const leaseIdParam = { id: id('The browser lease id, bls_<24 hex>') };
export const connectionIdParam = { id: id('The connection id') };
export const rolloutIdParam = { id: id('The rollout id') };
export const memberIdParam = { id: id('The team member id') };
export const secretNameParam = { name: Joi.string().pattern(/^[A-Z][A-Z0-9_]{0,63}$/).description('The secret name') };
export const providerParam = { provider: Joi.string().valid('google', 'slack').description('The OAuth provider') };
