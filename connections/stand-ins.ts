import { createHmac } from 'node:crypto';
import type { Db } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import type { Keyring } from '../lib/crypto.js';
import { connectionSlots, type Slot } from '../lib/credential-slots.js';
import { tokenContext } from './callback.js';
import type { Connector, Provider } from './providers.js';

/**
 * Stand-in tokens (service.md: "The VM only receives stand-in tokens"): one per
 * environment, connection and connector, `svcst_` + 32 characters of an HMAC (key derived
 * from the master key), so nothing is stored and the same environment always sees the same
 * token for one connection. A connection replaced by a new authorization gets new stand-ins;
 * the old ones still map to the old (revoked) connection, which the gateway answers 401
 * `connection_revoked`.
 */
export function standInToken(key: Buffer, environmentId: string, connectionId: string, connector: string): string {
  return `svcst_${createHmac('sha256', key).update(`${environmentId}:${connectionId}:${connector}`).digest('base64url').slice(0, 32)}`;
}

/**
 * Where a connector's real token may go (issue 11, item 6): its API on 443, nowhere else.
 * Gmail: the Gmail paths (API, upload, batch) of gmail.googleapis.com and www.googleapis.com;
 * Calendar: www.googleapis.com's Calendar paths (API and batch); Slack: slack.com's Web API
 * (`/api/...`). Google's per-API batch endpoints (`/batch/gmail/v1`, `/batch/calendar/v3`)
 * serve only that API's calls, so a batch for the connector's API carries only its calls.
 */
export function connectorAllows(connector: Connector, host: string, port: number, path: string): boolean {
  if (port !== 443 || !plainPath(path)) return false;
  switch (connector) {
    case 'gmail':
      // Gmail's paths on its own host too: Google's front end may route another API's path
      // there (`/calendar/v3/...`, a global `/batch`), carrying the token to it (a fourth review).
      return (host === 'gmail.googleapis.com' || host === 'www.googleapis.com') && /^\/(upload\/|batch\/)?gmail\//.test(path);
    case 'calendar':
      return host === 'www.googleapis.com' && /^\/(batch\/)?calendar\//.test(path);
    case 'slack':
      return host === 'slack.com' && path.startsWith('/api/');
  }
}

/**
 * A path every server reads the same way: no dot segment (`..`, `.`, `..;`, `.. `), raw or
 * percent-encoded (once or twice: `%2e%2e`, `%252e%252e`, `v3%2F..`), and no backslash.
 * The prefix checks above read the raw path; `/calendar/../gmail/v1/...` passed them and
 * went out with the real token to a server that resolves it to Gmail (issue 23, item 8).
 * Google's and Slack's APIs never need such a path, so it is refused, not normalised.
 */
function plainPath(path: string): boolean {
  let decoded = path;
  for (let i = 0; i < 3; i++) {
    const next = decoded.replace(/%([0-7][0-9A-Fa-f])/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
    if (next === decoded) break;
    decoded = next;
  }
  if (decoded.includes('\\')) return false;
  return decoded.split('/').every((seg) => !/^\.+$/.test(seg.split(';')[0]!.replace(/\s+/g, '')));
}

/** The API hosts of each connector: also on the effective egress allowlist of an environment whose end user connected it. */
export const CONNECTOR_HOSTS: Readonly<Record<Connector, readonly string[]>> = {
  gmail: ['gmail.googleapis.com', 'www.googleapis.com'],
  calendar: ['www.googleapis.com'],
  slack: ['slack.com'],
};

/** What the gateway needs of one stand-in: the same shape as proxy/credentials.ts's Credential, built here. */
export interface StandInCredential {
  token: string;
  connector: Connector;
  kind: 'connection';
  infrastructure: false;
  allowMinting: false;
  slots: readonly Slot[];
  hostAllowed(host: string, port: number): boolean;
  pathAllowed(host: string, path: string): boolean;
  /** Set for a revoked or failed connection: the gateway answers 401 with this code. */
  unusable: 'connection_revoked' | 'connection_error' | null;
  value(): Promise<string>;
}

interface Row {
  id: string;
  provider: Provider;
  connectors: string;
  status: 'active' | 'error' | 'revoked';
  access_token_enc: string | null;
}

/** Revoked connections of an end user whose stand-ins are still answered 401 (the newest ones). */
const REVOKED_REMEMBERED = 50;

/**
 * The stand-ins of an environment: its end user's connections of its developer. The
 * gateway asks on every request, so the lookup is cached per environment for 1 s of
 * monotonic time (the test clock ages it too) and dropped in this process at once when a
 * connection changes (`invalidate`); another process sees a change within that second.
 */
export function createStandIns(deps: { db: Db; clock: Clock; keyring: Keyring; ttlMs?: number; accessToken?: (connectionId: string) => Promise<string> }) {
  const { db, clock, keyring } = deps;
  const key = keyring.deriveSubkey('stand-in-tokens');
  const ttl = deps.ttlMs ?? 1000;
  const cache = new Map<string, { at: number; gen: number; creds: StandInCredential[] }>();
  let generation = 0;

  async function rows(environmentId: string): Promise<Row[]> {
    const env = (await db('environments').where({ id: environmentId }).first('developer_id', 'end_user_id')) as { developer_id: string; end_user_id: string } | undefined;
    if (!env) return [];
    const base = () => db<Row>('connections').where('developer_id', env.developer_id).andWhere('end_user_id', env.end_user_id);
    const live = await base().whereIn('status', ['active', 'error']).select('id', 'provider', 'connectors', 'status', 'access_token_enc');
    const gone = await base().where({ status: 'revoked' }).orderBy('revoked_at', 'desc').limit(REVOKED_REMEMBERED).select('id', 'provider', 'connectors', 'status', 'access_token_enc');
    return [...live, ...gone];
  }

  function build(environmentId: string, r: Row): StandInCredential[] {
    return (JSON.parse(r.connectors) as Connector[]).map((connector) => ({
      token: standInToken(key, environmentId, r.id, connector),
      connector, kind: 'connection' as const, infrastructure: false as const, allowMinting: false as const,
      slots: connectionSlots(connector),
      hostAllowed: (host: string, port: number) => port === 443 && CONNECTOR_HOSTS[connector].includes(host),
      pathAllowed: (host: string, path: string) => connectorAllows(connector, host, 443, path),
      unusable: r.status === 'revoked' ? 'connection_revoked' as const : r.status === 'error' ? 'connection_error' as const : null,
      value: async () => {
        if (deps.accessToken) return deps.accessToken(r.id);
        if (!r.access_token_enc) throw new Error('the connection has no access token');
        return keyring.decryptString(r.access_token_enc, tokenContext(r.id, 'access'));
      },
    }));
  }

  /** Every stand-in of the environment (revoked ones included, marked unusable). */
  async function forEnvironment(environmentId: string): Promise<StandInCredential[]> {
    const now = clock.monotonicMs?.() ?? performance.now();
    const hit = cache.get(environmentId);
    if (hit && hit.gen === generation && now - hit.at < ttl) return hit.creds;
    const gen = generation;
    const creds = (await rows(environmentId)).flatMap((r) => build(environmentId, r));
    if (gen === generation) {
      cache.set(environmentId, { at: now, gen, creds });
      if (cache.size > 10_000) cache.delete(cache.keys().next().value as string);
    }
    return creds;
  }

  /** GET /v1/environments/{id}/stand-in-tokens: the usable ones (decisions.md). */
  async function listed(environmentId: string): Promise<Array<{ connector: string; connection_id: string; token: string }>> {
    const out: Array<{ connector: string; connection_id: string; token: string }> = [];
    for (const r of await rows(environmentId)) {
      if (r.status === 'revoked') continue;
      for (const connector of JSON.parse(r.connectors) as string[]) out.push({ connector, connection_id: r.id, token: standInToken(key, environmentId, r.id, connector) });
    }
    return out;
  }

  /**
   * The hosts of the environment's connectors, for the effective egress allowlist
   * (environments/egress.cache.ts extraHosts): a connection is usable without the developer
   * adding its API to egress_allow. Revoked and failed connections' hosts stay on it, so
   * their stand-ins get the contract's 401 connection_revoked / connection_error instead of
   * an egress refusal (the hosts are the providers' APIs, useless without a token).
   */
  async function hostsFor(environmentId: string): Promise<string[]> {
    const out = new Set<string>();
    for (const r of await rows(environmentId)) {
      // Port 443 only: a stand-in is swapped only there (hostAllowed), and a bare host name
      // on the allowlist opens every port of it (a fourth review).
      for (const c of JSON.parse(r.connectors) as Connector[]) for (const h of CONNECTOR_HOSTS[c] ?? []) out.add(`${h}:443`);
    }
    return [...out];
  }

  return {
    forEnvironment,
    listed,
    hostsFor,
    /** A connection changed (created, replaced, revoked, failed): every cached lookup is stale. */
    invalidate: () => {
      generation++;
    },
  };
}

export type StandIns = ReturnType<typeof createStandIns>;
