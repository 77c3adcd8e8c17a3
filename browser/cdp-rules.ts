/**
 * What an agent may say to its lease's browser over CDP, and what it may hear (issue 23,
 * item 2 and 4): pure rules, applied by the relay (cdp-relay.ts). Allow-lists at every level,
 * never deny-lists: a method of a domain not named here is refused, and so is every new
 * domain a Chromium update brings.
 *
 * Session level (commands sent to a page, frame or worker the lease owns):
 * - whole domains an automation library needs (Playwright and Puppeteer were run through it):
 *   `Page`, `Runtime`, `DOM`, `Input`, `Network`, `Emulation`, `Fetch`, `Accessibility`, … —
 *   minus the methods below;
 * - refused in them: downloads and files (`Page.setDownloadBehavior`, `Page.handleFileChooser`,
 *   `Network.loadNetworkResource`, which loads any URL, `file:` included, outside the page),
 *   certificate overrides (`Security.*` but `enable`/`disable`);
 * - checked by the relay: `Page.navigate`'s URL; `DOM.setFileInputFiles` (only files of the
 *   environment's disk, copied in by the broker); `Input.dispatchDragEvent` with files;
 *   cookie reads (HttpOnly values stripped); `Storage` cookie calls pinned to the lease's context;
 *   `Target.setAutoAttach` (its only `Target` method, flat sessions forced: Playwright sends it
 *   on every page for frames and workers);
 * - refused whole: `Target` (but setAutoAttach), `Browser`, `IO`, `SystemInfo`, `Tracing`,
 *   `Memory`, `Storage` (but the cookie calls), `ServiceWorker`, `Extensions`, `PWA`,
 *   `HeadlessExperimental`, `Tethering`, `DeviceAccess`, `BluetoothEmulation`, `Cast`, `FileSystem`.
 */
export const SESSION_DOMAINS = new Set([
  'Page', 'Runtime', 'DOM', 'DOMSnapshot', 'DOMDebugger', 'DOMStorage', 'CSS', 'Input', 'Network', 'Emulation', 'Fetch',
  'Accessibility', 'Log', 'Console', 'Performance', 'PerformanceTimeline', 'Overlay', 'Debugger', 'Profiler', 'HeapProfiler',
  'Animation', 'LayerTree', 'Inspector', 'Audits', 'IndexedDB', 'CacheStorage', 'Media', 'WebAudio', 'EventBreakpoints',
  'Preload', 'WebAuthn', 'Schema', 'Security', 'Autofill', 'FedCm', 'DeviceOrientation',
]);

const SESSION_REFUSED = new Set([
  'Page.setDownloadBehavior', 'Page.handleFileChooser', 'Page.getCookies', 'Page.addScriptToEvaluateOnLoad',
  'Network.loadNetworkResource',
  'Security.setIgnoreCertificateErrors', 'Security.handleCertificateError', 'Security.setOverrideCertificateErrors',
  'Autofill.trigger', 'Autofill.setAddresses',
]);

/** Methods of otherwise refused domains that the relay handles itself (with checks). */
export const SESSION_CHECKED = new Set(['Target.setAutoAttach', 'Storage.getCookies', 'Storage.setCookies', 'Storage.clearCookies', 'Storage.getStorageKeyForFrame']);

export type Verdict = { ok: true } | { ok: false; why: string };

const refused = (method: string, why = 'is not available through a lease\'s CDP endpoint'): Verdict => ({ ok: false, why: `${method} ${why}` });

/** Whether a command on a session may pass (with the relay's own checks for SESSION_CHECKED ones). */
export function sessionMethod(method: string): Verdict {
  if (SESSION_CHECKED.has(method)) return { ok: true };
  const dot = method.indexOf('.');
  const domain = dot > 0 ? method.slice(0, dot) : '';
  if (!SESSION_DOMAINS.has(domain)) return refused(method);
  if (SESSION_REFUSED.has(method)) return refused(method);
  if (domain === 'Security' && method !== 'Security.enable' && method !== 'Security.disable') return refused(method);
  if (/\.setDownloadBehavior$/.test(method)) return refused(method);
  return { ok: true };
}

/**
 * Where a page may go (Page.navigate, Target.createTarget, and Chromium's URLBlocklist policy
 * as the wall behind it): the web, and blank/data/blob documents. Never `file:`, `chrome:`,
 * `chrome-extension:`, `devtools:`, `view-source:` or any other browser-internal scheme.
 */
export function urlAllowed(url: unknown): boolean {
  if (typeof url !== 'string') return false;
  const u = url.trim();
  if (u === '' || u === 'about:blank' || u === 'about:srcdoc') return true;
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(u);
  if (!m) return false;
  return ['http', 'https', 'data', 'blob'].includes(m[1]!.toLowerCase());
}

/** Header names whose values are the session, never the agent's to read. */
const SECRET_HEADERS = new Set(['cookie', 'set-cookie', 'authorization', 'proxy-authorization', 'cookie2', 'set-cookie2']);
export const REDACTED = '[redacted by the gateway]';

function redactHeaders(h: unknown): unknown {
  if (Array.isArray(h)) {
    return h.map((e) => (e && typeof e === 'object' && typeof (e as { name?: unknown }).name === 'string' && SECRET_HEADERS.has((e as { name: string }).name.toLowerCase()) ? { ...e, value: REDACTED } : e));
  }
  if (h && typeof h === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(h)) out[k] = SECRET_HEADERS.has(k.toLowerCase()) ? REDACTED : v;
    return out;
  }
  return h;
}

function redactHeadersText(t: unknown): unknown {
  if (typeof t !== 'string') return t;
  return t.replace(/^([A-Za-z0-9-]+):[^\r\n]*/gm, (line, name: string) => (SECRET_HEADERS.has(name.toLowerCase()) ? `${name}: ${REDACTED}` : line));
}

const HEADER_KEYS = new Set(['headers', 'requestHeaders', 'responseHeaders']);
const HEADER_TEXT_KEYS = new Set(['headersText', 'requestHeadersText']);
const COOKIE_LIST_KEYS = new Set(['associatedCookies', 'blockedCookies', 'exemptedCookies', 'includedCookies']);

/** Every Cookie, Set-Cookie and Authorization value in a Network/Fetch/Audits event or answer, replaced. */
export function redactSession(v: unknown, depth = 0): unknown {
  if (depth > 12 || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((e) => redactSession(e, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    if (HEADER_KEYS.has(k)) out[k] = redactHeaders(val);
    else if (HEADER_TEXT_KEYS.has(k)) out[k] = redactHeadersText(val);
    else if (COOKIE_LIST_KEYS.has(k) && Array.isArray(val)) {
      out[k] = val.map((e) => {
        if (!e || typeof e !== 'object') return e;
        const c = { ...(e as Record<string, unknown>) };
        if (c.cookie && typeof c.cookie === 'object') c.cookie = { ...(c.cookie as object), value: REDACTED };
        if (typeof c.cookieLine === 'string') c.cookieLine = REDACTED;
        return c;
      });
    } else if (k === 'rawCookieLine' || k === 'cookieLine') out[k] = REDACTED;
    else out[k] = redactSession(val, depth + 1);
  }
  return out;
}

/** Events that may carry the session: their domains. */
export function mayCarrySession(method: string | undefined): boolean {
  return typeof method === 'string' && /^(Network|Fetch|Audits|Security|Page)\./.test(method);
}

/** A cookie read's answer: HttpOnly cookies keep their name, domain and flags, never their value. */
export function stripHttpOnly(result: unknown): unknown {
  if (!result || typeof result !== 'object' || !Array.isArray((result as { cookies?: unknown }).cookies)) return result;
  return {
    ...(result as object),
    cookies: (result as { cookies: Array<Record<string, unknown>> }).cookies.map((c) => (c && c.httpOnly ? { ...c, value: '' } : c)),
  };
}

export const COOKIE_READS = new Set(['Network.getCookies', 'Network.getAllCookies', 'Storage.getCookies']);
