/**
 * policy-engine: PURE policy logic (ARCHITECTURE.md "The layering rule"). Node built-ins
 * only; nothing from the project's other folders, no express, knex or joi.
 */
export * from './categories.js';
export * from './rules.js';
export * from './evaluate.js';
export * from './facts.js';
export * from './grant-limits.js';
export * from './conditions.js';
export { classify, needsBody, isGoogleHost, CONNECTION_CONNECTORS, UNPARSABLE_BATCH_CATEGORY } from './classify/index.js';
export type { Classification, ClassifyRequest } from './classify/index.js';
export { describeRequest, decodeEncodedWords, mimeHeaders, MAX_DETAIL_VALUE, MAX_DETAIL_FIELDS } from './describe.js';
export type { RequestDetails, DetailField } from './describe.js';
