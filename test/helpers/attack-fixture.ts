import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestService, type TestService } from './service.js';
import { startFakeUpstream, type FakeUpstream } from './upstream.js';
import type { Gateway } from './proxy-client.js';

/**
 * The attack suite's world (test/security/): the whole service in process, one HTTPS
 * upstream that stands in for every API host named in `hosts` (GATEWAY_UPSTREAM_OVERRIDES
 * keeps SNI and Host, so the upstream sees which host the gateway meant), and an
 * environment whose secrets and policy allow reads and writes, so a refusal in a test is
 * the defence under test, not the policy.
 */
export interface AuditRecord {
  id: string;
  method: string;
  host: string;
  path: string;
  connector: string | null;
  category: string | null;
  credential: string;
  decision: string;
  reason: string;
  status: number;
  upstream_status: number | null;
  approval_id?: string | null;
  redacted?: boolean;
}

export interface AttackWorld {
  t: TestService;
  up: FakeUpstream;
  gw: Gateway;
  envId: string;
  /** Placeholder of each secret, by name. */
  ph: Record<string, string>;
  /** Audit entries of the environment written since `mark()`, newest first, waiting for `n`. */
  audited(n?: number): Promise<AuditRecord[]>;
  /** Forget what was seen and audited so far. */
  mark(): Promise<void>;
  close(): Promise<void>;
}

export interface AttackWorldOptions {
  /** Host names the upstream answers for. */
  hosts: string[];
  secrets: Record<string, { value: string; allowed_hosts: string[]; inject?: string[]; allow_minting?: boolean; infrastructure?: boolean }>;
  egress?: string[];
  env?: Record<string, string>;
  /** Extra policy rules before the allow-read/allow-write ones. */
  rules?: unknown[];
  /** More CA certificates the service trusts for upstreams (PEM), beside the fake upstream's. */
  extraCaPem?: string;
}

export async function startAttackWorld(opts: AttackWorldOptions): Promise<AttackWorld> {
  const up = await startFakeUpstream();
  const dir = mkdtempSync(join(tmpdir(), 'gw-attack-'));
  writeFileSync(join(dir, 'upstream-ca.pem'), `${up.ca.certPem}\n${opts.extraCaPem ?? ''}`);
  const t = await startTestService({
    GATEWAY_UPSTREAM_OVERRIDES: opts.hosts.map((h) => `${h}=127.0.0.1:${up.port}`).join(','),
    GATEWAY_UPSTREAM_CA_FILE: join(dir, 'upstream-ca.pem'),
    ...opts.env,
  });
  const created = await t.api.post('/v1/environments', {
    end_user_id: `attacker-${Math.random().toString(36).slice(2)}`,
    egress_allow: opts.egress ?? opts.hosts,
    secrets: opts.secrets,
  });
  expect(created.status, created.text).to.equal(201);
  const envId: string = created.body.id;
  const gw: Gateway = (await t.api.get(`/v1/environments/${envId}/gateway`)).body;
  const list = await t.api.get(`/v1/environments/${envId}/secrets`);
  const ph: Record<string, string> = Object.fromEntries(list.body.data.map((s: { name: string; placeholder: string }) => [s.name, s.placeholder]));
  const rules = [...(opts.rules ?? []), { category: 'read', effect: 'allow' }, { category: 'write', effect: 'allow' }];
  const policy = await t.api.put(`/v1/environments/${envId}/policy`, { rules });
  expect(policy.status, policy.text).to.equal(200);

  let known = new Set<string>();
  const log = async (): Promise<AuditRecord[]> => {
    await t.svc.audit.flush();
    return (await t.api.get(`/v1/audit-log?environment_id=${envId}&limit=200`)).body.data;
  };
  return {
    t, up, gw, envId, ph,
    async audited(n = 1) {
      for (let i = 0; i < 300; i++) {
        const fresh = (await log()).filter((e) => !known.has(e.id));
        if (fresh.length >= n) return fresh;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`fewer than ${n} new audit entries`);
    },
    async mark() {
      up.seen.length = 0;
      known = new Set((await log()).map((e) => e.id));
    },
    async close() {
      await t.close();
      await up.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
