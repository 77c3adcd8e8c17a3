/**
 * Value rules of the create-environment request and of configuration (service.md,
 * Limits). Each returns an error message, or null when the value is fine. The API's joi
 * schemas call them (a broken rule is 400 `invalid_request`), and the service keeps them
 * as invariants.
 */
import { injectRule } from '../lib/credential-slots.js';

export const LIMITS = {
  envVars: 100,
  envBytes: 32 * 1024,
  files: 20,
  fileBytes: 256 * 1024,
  secretsPerScope: 100,
  secretValueBytes: 64 * 1024,
  hostPatterns: 500,
  endUserId: 200,
  idleMax: 7_776_000,
  idleMin: 60,
  pendingWakeups: 100,
  wakeupPastMs: 60_000,
  wakeupAheadMs: 366 * 24 * 3600 * 1000,
} as const;

export const RESOURCE_DEFAULTS = { cpus: 2, memory_mib: 4096, base_memory_mib: 1024, disk_gib: 10 } as const;
export const IDLE_DEFAULTS = { suspend_after_secs: 21_600, stop_after_secs: 604_800 } as const;
export const AGENT_SETTINGS_DEFAULTS = {
  scheduling: true,
  max_schedules: 20,
  min_interval_secs: 900,
  keep_awake_max_secs: 7200,
  keep_awake_daily_secs: 21_600,
} as const;
export type AgentSettings = { -readonly [K in keyof typeof AGENT_SETTINGS_DEFAULTS]: (typeof AGENT_SETTINGS_DEFAULTS)[K] extends boolean ? boolean : number };

/** Names the platform sets inside the VM: the developer cannot override them. */
const RESERVED_EXACT = new Set(['HOME', 'USER', 'LOGNAME']);
const RESERVED_ANY_CASE = new Set([
  'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'NO_PROXY', 'FTP_PROXY',
  'SSL_CERT_FILE', 'SSL_CERT_DIR', 'NODE_EXTRA_CA_CERTS', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE',
  'GIT_SSL_CAINFO', 'AWS_CA_BUNDLE', 'PIP_CERT',
]);

export function reservedName(name: string): boolean {
  return RESERVED_EXACT.has(name) || name.startsWith('SERVICE_') || RESERVED_ANY_CASE.has(name.toUpperCase());
}

export function envRule(env: Record<string, string>): string | null {
  const names = Object.keys(env);
  if (names.length > LIMITS.envVars) return `at most ${LIMITS.envVars} environment variables`;
  let bytes = 0;
  for (const name of names) {
    const value = env[name]!;
    if (!/^[A-Za-z0-9_]+$/.test(name)) return `environment variable name "${name}" may hold only letters, digits and underscores`;
    if (reservedName(name)) return `environment variable name "${name}" is reserved`;
    if (/['\u0000-\u001f\u007f]/.test(value)) return `environment variable "${name}" contains a single quote or a control character`;
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  }
  if (bytes > LIMITS.envBytes) return `environment variables are ${bytes} bytes in total; at most ${LIMITS.envBytes}`;
  return null;
}

export interface FileInput {
  content: string;
  encoding?: 'utf8' | 'base64';
}
export interface StoredFile {
  content: string;
  encoding: 'utf8' | 'base64';
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function normalizeFiles(files: Record<string, string | FileInput>): Record<string, StoredFile> {
  const out: Record<string, StoredFile> = {};
  for (const [name, v] of Object.entries(files)) {
    out[name] = typeof v === 'string' ? { content: v, encoding: 'utf8' } : { content: v.content, encoding: v.encoding ?? 'utf8' };
  }
  return out;
}

export function decodedSize(f: StoredFile): number {
  return f.encoding === 'base64' ? Buffer.from(f.content, 'base64').length : Buffer.byteLength(f.content);
}

export function filesRule(files: Record<string, string | FileInput>): string | null {
  const normalized = normalizeFiles(files);
  const names = Object.keys(normalized);
  if (names.length > LIMITS.files) return `at most ${LIMITS.files} config files`;
  let bytes = 0;
  for (const name of names) {
    if (!/^[A-Za-z0-9._-]{1,255}$/.test(name) || name === '.' || name === '..') {
      return `file name "${name}" may hold only letters, digits, ".", "_" and "-" (no directories)`;
    }
    const f = normalized[name]!;
    if (f.encoding === 'base64' && !BASE64.test(f.content)) return `file "${name}" is not valid base64`;
    bytes += decodedSize(f);
  }
  if (bytes > LIMITS.fileBytes) return `config files are ${bytes} bytes in total (decoded); at most ${LIMITS.fileBytes}`;
  return null;
}

/**
 * `*`, `*.example.com` (subdomains only) or a host name / IP literal. A secret's
 * allowed_hosts may name a port (`api.example.com:8443`); without one a secret goes to
 * port 443 only (issue 9, hole 7). Egress patterns take no port: they allow every port.
 */
const HOST_PATTERN = /^(\*|(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*)(:(\d{1,5}))?$/;

export function hostPatternsRule(patterns: string[], what: string, opts: { ports?: boolean } = {}): string | null {
  if (patterns.length > LIMITS.hostPatterns) return `${what}: at most ${LIMITS.hostPatterns} host patterns`;
  for (const p of patterns) {
    const m = p.length <= 259 ? HOST_PATTERN.exec(p.toLowerCase()) : null;
    const port = m?.[8] === undefined ? null : Number(m[8]);
    if (!m || m[1]!.length > 253 || (port !== null && (!opts.ports || !(port >= 1 && port <= 65535)))) {
      return `${what}: "${p}" is not a host pattern (host, *.domain or *${opts.ports ? ', optionally :port' : ''})`;
    }
  }
  return null;
}

export const SECRET_NAME = /^[A-Z][A-Z0-9_]{0,63}$/;

export interface SecretInput {
  value: string;
  allowed_hosts: string[];
  infrastructure?: boolean;
  /** Places beyond the Authorization header where the value may be swapped in (lib/credential-slots.ts). */
  inject?: string[] | null;
  /** May be sent to endpoints that mint new credentials (policy-engine/classify/minting.ts). */
  allow_minting?: boolean;
}

export function secretRule(name: string, s: SecretInput): string | null {
  if (!SECRET_NAME.test(name)) return `secret name "${name}" must match [A-Z][A-Z0-9_]{0,63}`;
  if (reservedName(name)) return `secret name "${name}" is reserved`;
  if (s.value.length === 0) return `secret "${name}" has an empty value`;
  if (Buffer.byteLength(s.value) > LIMITS.secretValueBytes) return `secret "${name}" is larger than ${LIMITS.secretValueBytes} bytes`;
  if (s.allowed_hosts.length === 0) return `secret "${name}" needs at least one allowed host`;
  const inject = s.inject ? injectRule(s.inject) : null;
  if (inject) return `secret "${name}" ${inject}`;
  return hostPatternsRule(s.allowed_hosts, `secret "${name}" allowed_hosts`, { ports: true });
}

export function secretsRule(secrets: Record<string, SecretInput>): string | null {
  const names = Object.keys(secrets);
  if (names.length > LIMITS.secretsPerScope) return `at most ${LIMITS.secretsPerScope} secrets`;
  for (const n of names) {
    const e = secretRule(n, secrets[n]!);
    if (e) return e;
  }
  return null;
}

export function idleRule(name: string, v: number): string | null {
  if (v === 0 || (v >= LIMITS.idleMin && v <= LIMITS.idleMax)) return null;
  return `${name} must be 0 (step off) or ${LIMITS.idleMin} to ${LIMITS.idleMax}`;
}

export const TEMPLATE_REF = /^([a-z0-9][a-z0-9._-]{0,99}):([A-Za-z0-9][A-Za-z0-9._-]{0,99})$/;
