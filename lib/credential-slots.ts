/**
 * Where a credential may be swapped into a request (issue 9, hole 1): the pure part shared
 * by the environments domain (which validates a secret's `inject` list and builds the
 * proxy's index) and the proxy (proxy/credentials.ts, which places and swaps).
 */

/** A place a credential may be swapped into. Header names are lower case. */
export type Slot =
  | { in: 'authorization' }
  | { in: 'header'; name: string }
  | { in: 'query'; name: string }
  | { in: 'form'; name: string }
  | { in: 'json'; path: readonly string[] };

/** The Authorization header only: what every client that sends an API key does. */
export const DEFAULT_SLOTS: readonly Slot[] = Object.freeze([{ in: 'authorization' }]);

/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
/** A field or parameter name after its `query:` / `form:` / `json:` prefix. */
const FIELD_NAME = /^[^\s\x00-\x1f&=]{1,100}$/;
/** Headers whose value must never be a credential slot: they route, frame or are ours. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te', 'trailer', 'proxy-authorization', 'proxy-connection', 'keep-alive', 'x-service-task-id', 'x-service-session-id']);

/**
 * Why an `inject` list is not valid, or null. Entries: `header:<Name>`, `query:<name>`,
 * `form:<name>`, `json:<field>` or `json:<a.b.c>`, or a bare name, which means a header, a
 * query parameter, a form field or a top-level JSON field of that name.
 */
export function injectRule(entries: readonly string[]): string | null {
  if (entries.length > 20) return 'inject: at most 20 places';
  for (const e of entries) {
    if (typeof e !== 'string' || e.length === 0 || e.length > 120) return `inject: "${String(e)}" is not a place`;
    const colon = e.indexOf(':');
    const kind = colon < 0 ? null : e.slice(0, colon).toLowerCase();
    const name = colon < 0 ? e : e.slice(colon + 1);
    if (kind === null) {
      if (!HEADER_NAME.test(name)) return `inject: "${e}" is not a header or field name (use query:, form: or json: for other names)`;
      if (RESERVED_HEADERS.has(name.toLowerCase())) return `inject: "${e}" is a header the gateway owns`;
    } else if (kind === 'header') {
      if (!HEADER_NAME.test(name)) return `inject: "${e}" is not a header name`;
      if (RESERVED_HEADERS.has(name.toLowerCase())) return `inject: "${e}" is a header the gateway owns`;
    } else if (kind === 'query' || kind === 'form') {
      if (!FIELD_NAME.test(name)) return `inject: "${e}" is not a parameter name`;
    } else if (kind === 'json') {
      const parts = name.split('.');
      if (parts.length > 8 || !parts.every((p) => FIELD_NAME.test(p))) return `inject: "${e}" is not a JSON field (a name, or a dotted path of at most 8 names)`;
    } else {
      return `inject: "${e}" must be header:, query:, form:, json: or a bare name`;
    }
  }
  return null;
}

/** The slots of a secret: Authorization plus its validated `inject` entries. */
export function secretSlots(inject: readonly string[] | null | undefined): readonly Slot[] {
  if (!inject || inject.length === 0) return DEFAULT_SLOTS;
  const out: Slot[] = [{ in: 'authorization' }];
  for (const e of inject) {
    const colon = e.indexOf(':');
    const kind = colon < 0 ? null : e.slice(0, colon).toLowerCase();
    const name = colon < 0 ? e : e.slice(colon + 1);
    if (kind === null) {
      out.push({ in: 'header', name: name.toLowerCase() }, { in: 'query', name }, { in: 'form', name }, { in: 'json', path: [name] });
    } else if (kind === 'header') out.push({ in: 'header', name: name.toLowerCase() });
    else if (kind === 'query') out.push({ in: 'query', name });
    else if (kind === 'form') out.push({ in: 'form', name });
    else if (kind === 'json') out.push({ in: 'json', path: name.split('.') });
  }
  return Object.freeze(out);
}

/** A connection's stand-in: the Authorization header, and for Slack its `token` field too. */
export function connectionSlots(connector: string): readonly Slot[] {
  if (connector !== 'slack') return DEFAULT_SLOTS;
  return Object.freeze<Slot[]>([{ in: 'authorization' }, { in: 'form', name: 'token' }, { in: 'query', name: 'token' }, { in: 'json', path: ['token'] }]);
}

