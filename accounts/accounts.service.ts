import type { Db } from '../store/db.js';
import { isUniqueViolation, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { iso } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { randomHex, sha256Hex } from '../lib/crypto.js';
import { accountsStore, type ApiKeyRow, type DeveloperRow } from './accounts.store.js';

/** The developer that the bootstrap key and the `keys` CLI act for on a single-tenant install. */
export const DEFAULT_DEVELOPER_ID = 'dev_000000000000000000000001';

const KEY_FORMAT = /^sk_[0-9a-f]{40}$/;

export interface Developer {
  id: string;
  name: string;
  defaultAgentVersion: string | null;
}

export interface ApiKeyInfo {
  id: string;
  developer_id: string;
  last4: string;
  label: string | null;
  created_at: string | null;
  revoked_at: string | null;
}

function keyInfo(r: ApiKeyRow): ApiKeyInfo {
  return {
    id: r.id,
    developer_id: r.developer_id,
    last4: r.last4,
    label: r.label,
    created_at: iso(r.created_at),
    revoked_at: iso(r.revoked_at),
  };
}

function developer(r: DeveloperRow): Developer {
  return { id: r.id, name: r.name, defaultAgentVersion: r.default_agent_version };
}

export function createAccountsService(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;

  async function ensureDeveloper(id = DEFAULT_DEVELOPER_ID, name = 'default'): Promise<Developer> {
    const existing = await accountsStore.getDeveloper(db, id);
    if (existing) return developer(existing);
    try {
      await accountsStore.insertDeveloper(db, { id, name, default_agent_version: null, egress_allow: null, created_at: clock.nowMs() });
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
    }
    return developer((await accountsStore.getDeveloper(db, id))!);
  }

  /** Stores only the SHA-256 of the key; the key itself is returned once, to the caller. */
  async function createApiKey(developerId: string, label: string | null = null, key = `sk_${randomHex(20)}`): Promise<{ key: string; info: ApiKeyInfo }> {
    if (!KEY_FORMAT.test(key)) throw new Error('API keys look like sk_<40 lowercase hex>');
    const row: ApiKeyRow = {
      id: newId('key'),
      developer_id: developerId,
      key_hash: sha256Hex(key),
      last4: key.slice(-4),
      label,
      created_at: clock.nowMs(),
      revoked_at: null,
    };
    await accountsStore.insertKey(db, row);
    return { key, info: keyInfo(row) };
  }

  /** Makes sure a given key (GATEWAY_BOOTSTRAP_API_KEY) exists and is usable for the developer. */
  async function ensureApiKey(developerId: string, key: string): Promise<ApiKeyInfo> {
    const found = await accountsStore.keyByHash(db, sha256Hex(key));
    if (found) return keyInfo(found);
    try {
      return (await createApiKey(developerId, 'bootstrap', key)).info;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      return keyInfo((await accountsStore.keyByHash(db, sha256Hex(key)))!);
    }
  }

  /**
   * The first start's key (issue 10): when the store holds no API key at all (not even a
   * revoked one: revoking every key and restarting must not mint a new one), creates one
   * for the default developer and returns it, once; otherwise null. Race-safe across
   * processes starting on one store: the default developer's row is locked (MySQL) or the
   * write lock taken (SQLite, retried on SQLITE_BUSY) while the table is checked.
   */
  async function firstStartKey(): Promise<string | null> {
    await ensureDeveloper();
    for (let attempt = 1; ; attempt++) {
      try {
        return await withTx(db, async (trx) => {
          await trx('developers').where({ id: DEFAULT_DEVELOPER_ID }).forUpdate().first('id');
          if (await trx('api_keys').first('id')) return null;
          const key = `sk_${randomHex(20)}`;
          await accountsStore.insertKey(trx, {
            id: newId('key'), developer_id: DEFAULT_DEVELOPER_ID, key_hash: sha256Hex(key), last4: key.slice(-4), label: 'first start',
            created_at: clock.nowMs(), revoked_at: null,
          });
          return key;
        });
      } catch (err) {
        const code = (err as { code?: string }).code ?? '';
        if (attempt >= 5 || !/^(SQLITE_BUSY|ER_LOCK_DEADLOCK|ER_LOCK_WAIT_TIMEOUT)/.test(code)) throw err;
      }
    }
  }

  /** The developer a bearer key belongs to, or null for a malformed, unknown or revoked key. */
  async function authenticate(key: string): Promise<Developer | null> {
    if (!KEY_FORMAT.test(key)) return null;
    const row = await accountsStore.keyByHash(db, sha256Hex(key));
    if (!row || row.revoked_at != null) return null;
    const dev = await accountsStore.getDeveloper(db, row.developer_id);
    return dev ? developer(dev) : null;
  }

  async function listApiKeys(developerId?: string): Promise<ApiKeyInfo[]> {
    return (await accountsStore.listKeys(db, developerId)).map(keyInfo);
  }

  /** Idempotent; false when no key has that id. */
  async function revokeApiKey(id: string): Promise<boolean> {
    const row = await accountsStore.keyById(db, id);
    if (!row) return false;
    await accountsStore.revokeKey(db, id, clock.nowMs());
    return true;
  }

  async function getDeveloper(id: string): Promise<Developer | null> {
    const row = await accountsStore.getDeveloper(db, id);
    return row ? developer(row) : null;
  }

  /** The version new environments get when they name none (service.md, Versioning). */
  async function setDefaultAgentVersion(id: string, version: string | null): Promise<void> {
    await accountsStore.updateDeveloper(db, id, { default_agent_version: version });
  }

  return { ensureDeveloper, createApiKey, ensureApiKey, firstStartKey, authenticate, listApiKeys, revokeApiKey, getDeveloper, setDefaultAgentVersion };
}

export type AccountsService = ReturnType<typeof createAccountsService>;
