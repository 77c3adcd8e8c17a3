import { pino, type Logger as PinoLogger, type DestinationStream } from 'pino';

export type Logger = PinoLogger;

/**
 * Values that must never reach a log line, whatever field they hide in: API keys,
 * webhook secrets, placeholders, stand-in tokens, bearer credentials, OAuth tokens.
 * Field-name redaction alone misses a key pasted into a message, so every string is
 * scrubbed by pattern as well.
 */
const SECRET_PATTERNS: RegExp[] = [
  /\bsk_[0-9a-f]{8,}/g,
  /\bwhsec_[A-Za-z0-9_-]{8,}/g,
  /\bsvcph_[0-9a-f]{8,}/g,
  /\bsvcst_[A-Za-z0-9_-]{8,}/g,
  /\b(?:ya29|xox[abprs])[.-][A-Za-z0-9._-]{8,}/g,
  /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi,
];

const SECRET_KEYS = /^(authorization|proxy-authorization|cookie|set-cookie|password|secret|client_secret|token|access_token|refresh_token|id_token|api_key|apikey|value|master_key|private_key|code)$/i;

/**
 * True when a string could match one of SECRET_PATTERNS: each pattern needs one of these
 * literals. One test instead of six replaces, for the common string that holds none
 * (every audit field of every proxied request goes through scrubString).
 */
const MAY_HOLD_SECRET = /sk_|whsec_|svcph_|svcst_|ya29|xox[abprs]|bearer|basic/i;

/** Each match of `patterns` in `s` cut to its prefix and `[redacted]`; `s` itself when `gate` finds nothing to look for. */
function scrubWith(s: string, gate: RegExp, patterns: readonly RegExp[]): string {
  if (!gate.test(s)) return s;
  let out = s;
  for (const re of patterns) out = out.replace(re, (m) => `${m.slice(0, Math.min(6, m.indexOf('_') + 1 || 6))}[redacted]`);
  return out;
}

export function scrubString(s: string): string {
  return scrubWith(s, MAY_HOLD_SECRET, SECRET_PATTERNS);
}

/** The service's own token formats only (API keys, webhook secrets, placeholders, stand-ins): the first four patterns. */
const OWN_PATTERNS = SECRET_PATTERNS.slice(0, 4);
const MAY_HOLD_OWN = /sk_|whsec_|svcph_|svcst_/;

/**
 * scrubString for a host name: our own token formats only. A provider's token (`ya29.`,
 * `xoxb-`) is never swapped into a host, and its pattern, which runs across dots, hid the
 * host a request went to (`ya29.exfil.attacker.example`; a fourth review).
 */
export function scrubHostString(s: string): string {
  return scrubWith(s, MAY_HOLD_OWN, OWN_PATTERNS);
}

/** Deep copy of a log object with secret-named keys removed and strings scrubbed. */
export function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubString(value);
  if (value == null || typeof value !== 'object' || depth > 8) return value;
  if (value instanceof Error) {
    return { type: value.name, message: scrubString(value.message), stack: value.stack && scrubString(value.stack), code: (value as { code?: unknown }).code };
  }
  if (Array.isArray(value)) return value.map((v) => scrub(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = SECRET_KEYS.test(k) ? '[redacted]' : scrub(v, depth + 1);
  }
  return out;
}

export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        level: (label) => ({ level: label }),
        log: (obj) => scrub(obj) as Record<string, unknown>,
      },
      hooks: {
        // The message string is scrubbed too: a key interpolated into it is still a key.
        logMethod(args, method) {
          const scrubbed = args.map((a) => (typeof a === 'string' ? scrubString(a) : a)) as typeof args;
          return method.apply(this, scrubbed);
        },
      },
    },
    destination ?? pino.destination({ sync: true }),
  );
}

/** A logger that writes nothing (unit tests). */
export const silentLogger: Logger = pino({ level: 'silent' });
