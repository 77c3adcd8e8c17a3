/**
 * The spec's method rule (service.md "Action categories"): GET, HEAD and OPTIONS read;
 * every other method writes. Used for secrets sent to APIs without a table and for paths
 * of known hosts that no table row names.
 */
import { isReadMethod, mostDangerousVerdict, wireAndOverrideMethods } from './http.js';
import type { ParsedRequest, Verdict } from './types.js';

export function methodRule(method: string, prefix: string): Verdict {
  return isReadMethod(method) ? { category: 'read', rule: `${prefix}.read` } : { category: 'write', rule: `${prefix}.write` };
}

/** Generic: the wire method and any X-HTTP-Method-Override; the more dangerous wins. */
export function classifyGeneric(p: ParsedRequest, methods: readonly string[] = wireAndOverrideMethods(p)): Verdict {
  return mostDangerousVerdict(methods.map((m) => methodRule(m, 'generic')));
}
