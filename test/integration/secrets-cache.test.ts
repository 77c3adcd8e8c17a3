/**
 * The proxy-facing lookups and their cache (docs/secrets-egress.md, "Lookups for the
 * gateway"): `secretsForEnvironment` and `effectiveEgress`, invalidated on every write in
 * this process, reloaded after 1 s for writes made elsewhere.
 *
 * Most tests build their own cache over the test service's database with a frozen
 * monotonic clock: a change seen without moving that clock was seen because of an
 * invalidation, never because the ttl ran out. Writes through the HTTP API of the test
 * service stand in for "another process" (its own cache is not this one).
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { Keyring } from '../../lib/crypto.js';
import { ServiceClock } from '../../lib/clock.js';
import { createGatewayCache, type GatewayCache, type ExtraHostsProvider } from '../../environments/egress.cache.js';
import { createSecretsService, type SecretsService } from '../../environments/secrets.service.js';
import { createEgressService, type EgressService } from '../../environments/egress.service.js';
import { createEnv } from './environments.fixtures.js';

describe('secrets and egress: gateway lookups and cache', function () {
  const masterKey = randomBytes(32);
  let t: TestService;

  before(async () => {
    t = await startTestService({ GATEWAY_MASTER_KEY: masterKey.toString('base64') });
  });
  after(async () => {
    await t?.close();
  });

  /** A cache and services of our own, over the same database, with a hand-moved clock. */
  function own(opts: { extraHosts?: ExtraHostsProvider; maxEntries?: number } = {}) {
    let ms = 1_000_000;
    const cache: GatewayCache = createGatewayCache({ db: t.svc.db, now: () => ms, ...opts });
    const deps = { db: t.svc.db, clock: new ServiceClock(), keyring: new Keyring([masterKey]), cache };
    const changes: Array<{ developerId: string; environmentId: string | null; name: string }> = [];
    const secrets: SecretsService = createSecretsService({ ...deps, onChanged: (c) => changes.push(c) });
    const egress: EgressService = createEgressService(deps);
    return { cache, secrets, egress, changes, tick: (d: number) => (ms += d) };
  }

  /** A fresh developer with an environment; returns the developer id too. */
  async function devWithEnv(body: Record<string, unknown> = {}) {
    const dev = await t.otherDeveloper();
    const e = await createEnv(dev, body);
    const row = await t.svc.db('environments').where({ id: e.id }).first();
    return { dev, env: e, developerId: row.developer_id as string };
  }

  describe('secretsForEnvironment', () => {
    it('indexes the environment\'s and the developer\'s secrets by placeholder; value() decrypts', async () => {
      const o = own();
      const { dev, env } = await devWithEnv({ secrets: { ENV_KEY: { value: 'env-plain', allowed_hosts: ['api.env.com'], infrastructure: true } } });
      const d = (await dev.put('/v1/secrets/DEV_KEY', { value: 'dev-plain', allowed_hosts: ['*.dev.com'] })).body;
      const list = (await dev.get(`/v1/environments/${env.id}/secrets`)).body.data;
      const s = (await o.secrets.secretsForEnvironment(env.id))!;
      expect([...s.byName.keys()]).to.deep.equal(['DEV_KEY', 'ENV_KEY']);
      expect(s.placeholders).to.deep.equal([d.placeholder, list[0].placeholder]);
      const envKey = s.byPlaceholder.get(list[0].placeholder)!;
      expect(envKey).to.include({ name: 'ENV_KEY', connector: 'secret:ENV_KEY', level: 'environment', infrastructure: true });
      expect(envKey.allowedHosts.allows('api.env.com')).to.equal(true);
      expect(envKey.allowedHosts.allows('evil.com')).to.equal(false);
      expect(envKey.value()).to.equal('env-plain');
      const devKey = s.byPlaceholder.get(d.placeholder)!;
      expect(devKey).to.include({ name: 'DEV_KEY', connector: 'secret:DEV_KEY', level: 'developer', infrastructure: false });
      expect(devKey.hostAllowed('x.dev.com', 443)).to.equal(true);
      expect(devKey.hostAllowed('dev.com', 443)).to.equal(false);
      expect(devKey.value()).to.equal('dev-plain');
    });

    it('an environment secret shadows the developer secret of the same name; deleting it brings the developer\'s back', async () => {
      const o = own();
      const { env, developerId } = await devWithEnv();
      const d = await o.secrets.put(developerId, null, 'API_KEY', { value: 'from-developer', allowed_hosts: ['d.com'] });
      const e = await o.secrets.put(developerId, env.id, 'API_KEY', { value: 'from-environment', allowed_hosts: ['e.com'] });
      let s = (await o.secrets.secretsForEnvironment(env.id))!;
      expect([...s.byPlaceholder.keys()]).to.deep.equal([e.secret.placeholder]);
      expect(s.byName.get('API_KEY')!.value()).to.equal('from-environment');
      expect(s.byName.get('API_KEY')!.level).to.equal('environment');
      const egress = (await o.egress.effectiveEgress(env.id))!;
      expect(egress.allows('e.com')).to.equal(true);
      expect(egress.allows('d.com')).to.equal(false, 'a shadowed secret adds no host');

      await o.secrets.remove(developerId, env.id, 'API_KEY');
      s = (await o.secrets.secretsForEnvironment(env.id))!;
      expect([...s.byPlaceholder.keys()]).to.deep.equal([d.secret.placeholder]);
      expect(s.byName.get('API_KEY')!.value()).to.equal('from-developer');
      expect((await o.egress.effectiveEgress(env.id))!.allows('d.com')).to.equal(true);
    });

    it('unknown environment: null; destroyed environment: no secrets and an allowlist that allows nothing', async () => {
      const o = own();
      expect(await o.secrets.secretsForEnvironment(`env_${randomBytes(12).toString('hex')}`)).to.equal(null);
      expect(await o.egress.effectiveEgress(`env_${randomBytes(12).toString('hex')}`)).to.equal(null);
      const { dev, env } = await devWithEnv({ egress_allow: ['*'], secrets: { S: { value: 'v', allowed_hosts: ['a.com'] } } });
      await dev.put('/v1/secrets/D', { value: 'v', allowed_hosts: ['d.com'] });
      await dev.delete(`/v1/environments/${env.id}`);
      const s = (await o.secrets.secretsForEnvironment(env.id))!;
      expect(s.byPlaceholder.size).to.equal(0);
      const e = (await o.egress.effectiveEgress(env.id))!;
      expect(e.patterns).to.deep.equal([]);
      expect(e.allows('a.com')).to.equal(false);
    });
  });

  describe('invalidation by this process\'s writes (clock frozen)', () => {
    it('environment secret PUT (new, replace) and DELETE are seen by the next lookup', async () => {
      const o = own();
      const { env, developerId } = await devWithEnv();
      expect((await o.secrets.secretsForEnvironment(env.id))!.placeholders).to.deep.equal([]);
      expect((await o.egress.effectiveEgress(env.id))!.allows('api.stripe.com')).to.equal(false);

      const created = await o.secrets.put(developerId, env.id, 'STRIPE', { value: 'one', allowed_hosts: ['api.stripe.com'] });
      expect(created.created).to.equal(true);
      let s = (await o.secrets.secretsForEnvironment(env.id))!;
      expect(s.byPlaceholder.get(created.secret.placeholder)!.value()).to.equal('one');
      expect((await o.egress.effectiveEgress(env.id))!.allows('api.stripe.com')).to.equal(true);

      const replaced = await o.secrets.put(developerId, env.id, 'STRIPE', { value: 'two', allowed_hosts: ['api2.stripe.com'] });
      expect(replaced.created).to.equal(false);
      expect(replaced.secret.placeholder).to.equal(created.secret.placeholder);
      s = (await o.secrets.secretsForEnvironment(env.id))!;
      const g = s.byPlaceholder.get(created.secret.placeholder)!;
      expect(g.value()).to.equal('two');
      expect(g.hostAllowed('api.stripe.com', 443)).to.equal(false);
      expect(g.hostAllowed('api2.stripe.com', 443)).to.equal(true);
      const eg = (await o.egress.effectiveEgress(env.id))!;
      expect(eg.allows('api.stripe.com')).to.equal(false);
      expect(eg.allows('api2.stripe.com')).to.equal(true);

      await o.secrets.remove(developerId, env.id, 'STRIPE');
      expect((await o.secrets.secretsForEnvironment(env.id))!.byPlaceholder.size).to.equal(0);
      expect((await o.egress.effectiveEgress(env.id))!.allows('api2.stripe.com')).to.equal(false);
    });

    it('a developer-level write reaches every environment of that developer, and no other', async () => {
      const o = own();
      const { dev, env: e1, developerId } = await devWithEnv();
      const e2 = await createEnv(dev);
      const stranger = await devWithEnv();
      for (const id of [e1.id, e2.id, stranger.env.id]) expect((await o.egress.effectiveEgress(id))!.patterns).to.deep.equal([]);
      const loads = o.cache.stats().loads;

      await o.secrets.put(developerId, null, 'SHARED', { value: 'v1', allowed_hosts: ['shared.com'] });
      await o.egress.putDeveloper(developerId, ['default.com']);
      for (const id of [e1.id, e2.id]) {
        expect((await o.egress.effectiveEgress(id))!.patterns).to.deep.equal(['default.com', 'shared.com']);
        expect((await o.secrets.secretsForEnvironment(id))!.byName.get('SHARED')!.value()).to.equal('v1');
      }
      expect((await o.egress.effectiveEgress(stranger.env.id))!.patterns).to.deep.equal([]);
      expect(o.cache.stats().loads - loads).to.equal(2, 'only the developer\'s two environments reloaded');

      await o.secrets.put(developerId, null, 'SHARED', { value: 'v2', allowed_hosts: ['shared.com'] });
      expect((await o.secrets.secretsForEnvironment(e2.id))!.byName.get('SHARED')!.value()).to.equal('v2');
      await o.secrets.remove(developerId, null, 'SHARED');
      expect((await o.secrets.secretsForEnvironment(e1.id))!.byName.has('SHARED')).to.equal(false);
    });

    it('a developer-level secret is one object in every environment\'s snapshot (not a copy each: a fourth review), and a change to any field is a new one', async () => {
      const o = own();
      const { dev, env: e1, developerId } = await devWithEnv();
      const e2 = await createEnv(dev);
      await o.secrets.put(developerId, null, 'BIG', { value: 'v'.repeat(60_000), allowed_hosts: Array.from({ length: 100 }, (_, i) => `h${i}.big.example`) });
      const secretOf = async (id: string) => (await o.cache.get(id))!.secrets.find((x) => x.name === 'BIG')!;
      const a = await secretOf(e1.id);
      expect(await secretOf(e2.id)).to.equal(a);
      // Reloaded after the ttl, unchanged: still the one object.
      o.tick(5_000);
      expect(await secretOf(e1.id)).to.equal(a);
      // Only the hosts change (in the same millisecond as far as any timestamp knows): a new object, the new hosts.
      await o.secrets.put(developerId, null, 'BIG', { value: 'v'.repeat(60_000), allowed_hosts: ['only.big.example'] });
      const b = await secretOf(e2.id);
      expect(b).to.not.equal(a);
      expect(b.allowedHosts).to.deep.equal(['only.big.example']);
      expect(await secretOf(e1.id)).to.equal(b);
    });

    it('environment egress PUT is seen by the next lookup; null falls back to the developer default', async () => {
      const o = own();
      const { env, developerId } = await devWithEnv();
      await o.egress.putDeveloper(developerId, ['default.com']);
      expect((await o.egress.effectiveEgress(env.id))!.source).to.equal('developer');
      await o.egress.putEnvironment(developerId, env.id, ['own.com']);
      let e = (await o.egress.effectiveEgress(env.id))!;
      expect(e.source).to.equal('environment');
      expect(e.allows('own.com')).to.equal(true);
      expect(e.allows('default.com')).to.equal(false);
      await o.egress.putEnvironment(developerId, env.id, null);
      e = (await o.egress.effectiveEgress(env.id))!;
      expect(e.allows('default.com')).to.equal(true);
      expect(e.allows('own.com')).to.equal(false);
    });

    it('onChanged hears every committed write (and no failed one)', async () => {
      const o = own();
      const { env, developerId } = await devWithEnv();
      await o.secrets.put(developerId, env.id, 'A', { value: 'v', allowed_hosts: ['a.com'] });
      await o.secrets.put(developerId, null, 'B', { value: 'v', allowed_hosts: ['b.com'] });
      await o.secrets.remove(developerId, env.id, 'A');
      await o.secrets.remove(developerId, env.id, 'A').catch(() => undefined);
      expect(o.changes).to.deep.equal([
        { developerId, environmentId: env.id, name: 'A' },
        { developerId, environmentId: null, name: 'B' },
        { developerId, environmentId: env.id, name: 'A' },
      ]);
    });

    it('a failed write (limit, destroyed) still leaves the cache consistent', async () => {
      const o = own();
      const { dev, env, developerId } = await devWithEnv();
      await dev.delete(`/v1/environments/${env.id}`);
      let err: any;
      try {
        await o.secrets.put(developerId, env.id, 'X', { value: 'v', allowed_hosts: ['a.com'] });
      } catch (e) {
        err = e;
      }
      expect(err?.code).to.equal('environment_destroyed');
      expect((await o.secrets.secretsForEnvironment(env.id))!.byPlaceholder.size).to.equal(0);
    });
  });

  describe('writes from elsewhere: seen after the ttl (1 s)', () => {
    it('a PUT through another process\'s API is not seen before 1 s, and is seen after', async () => {
      const o = own();
      const { dev, env } = await devWithEnv();
      expect((await o.secrets.secretsForEnvironment(env.id))!.placeholders).to.deep.equal([]);
      const rec = (await dev.put(`/v1/environments/${env.id}/secrets/REMOTE`, { value: 'remote', allowed_hosts: ['r.com'] })).body;
      await dev.put(`/v1/environments/${env.id}/egress`, { allow: ['remote-egress.com'] });
      o.tick(999);
      expect((await o.secrets.secretsForEnvironment(env.id))!.placeholders).to.deep.equal([]);
      expect((await o.egress.effectiveEgress(env.id))!.allows('remote-egress.com')).to.equal(false);
      o.tick(1);
      expect((await o.secrets.secretsForEnvironment(env.id))!.placeholders).to.deep.equal([rec.placeholder]);
      const e = (await o.egress.effectiveEgress(env.id))!;
      expect(e.allows('remote-egress.com')).to.equal(true);
      expect(e.allows('r.com')).to.equal(true);
    });

    it('an environment destroyed elsewhere loses its secrets after the ttl', async () => {
      const o = own();
      const { dev, env } = await devWithEnv({ secrets: { S: { value: 'v', allowed_hosts: ['a.com'] } } });
      expect((await o.secrets.secretsForEnvironment(env.id))!.byPlaceholder.size).to.equal(1);
      await dev.delete(`/v1/environments/${env.id}`);
      o.tick(1000);
      expect((await o.secrets.secretsForEnvironment(env.id))!.byPlaceholder.size).to.equal(0);
      expect((await o.egress.effectiveEgress(env.id))!.allows('a.com')).to.equal(false);
    });
  });

  describe('cache mechanics', () => {
    it('lookups within the ttl hit memory; lookups share one compiled matcher and index per snapshot', async () => {
      const o = own();
      const { env } = await devWithEnv({ secrets: { S: { value: 'v', allowed_hosts: ['a.com'] } } });
      const first = await o.egress.effectiveEgress(env.id);
      const firstSecrets = await o.secrets.secretsForEnvironment(env.id);
      const loads = o.cache.stats().loads;
      for (let i = 0; i < 100; i++) {
        expect(await o.egress.effectiveEgress(env.id)).to.equal(first);
        expect(await o.secrets.secretsForEnvironment(env.id)).to.equal(firstSecrets);
      }
      expect(o.cache.stats().loads).to.equal(loads);
      o.tick(1000);
      expect(await o.egress.effectiveEgress(env.id)).not.to.equal(first);
      expect(o.cache.stats().loads).to.equal(loads + 1);
    });

    it('concurrent cold lookups load once (single flight)', async () => {
      const o = own();
      const { env } = await devWithEnv();
      const out = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? o.egress.effectiveEgress(env.id) : o.secrets.secretsForEnvironment(env.id))));
      expect(out.every((x) => x !== null)).to.equal(true);
      expect(o.cache.stats().loads).to.equal(1);
    });

    it('a load in flight during a write is not kept: the next lookup sees the write', async () => {
      let release!: () => void;
      let entered!: () => void;
      const inProvider = new Promise<void>((r) => (entered = r));
      const gate = new Promise<void>((r) => (release = r));
      let block = true;
      const o = own({
        extraHosts: async () => {
          if (block) {
            block = false;
            entered();
            await gate;
          }
          return [];
        },
      });
      const { env, developerId } = await devWithEnv();
      const stale = o.secrets.secretsForEnvironment(env.id);
      await inProvider;
      await o.secrets.put(developerId, env.id, 'LATE', { value: 'v', allowed_hosts: ['late.com'] });
      release();
      await stale;
      expect((await o.secrets.secretsForEnvironment(env.id))!.byName.has('LATE')).to.equal(true);
      expect((await o.egress.effectiveEgress(env.id))!.allows('late.com')).to.equal(true);
    });

    it('extraHosts (the connections extension point) joins the effective allowlist', async () => {
      const o = own({ extraHosts: async ({ environmentId }) => [`conn-${environmentId.slice(-4)}.example.com`, 'gmail.googleapis.com'] });
      const { env } = await devWithEnv({ egress_allow: ['base.com'] });
      const e = (await o.egress.effectiveEgress(env.id))!;
      expect(e.patterns).to.deep.equal(['base.com', `conn-${env.id.slice(-4)}.example.com`, 'gmail.googleapis.com']);
      expect(e.source).to.equal('environment');
      o.cache.setExtraHosts(undefined);
      expect((await o.egress.effectiveEgress(env.id))!.patterns).to.deep.equal(['base.com']);
    });

    it('a store failure reaches the caller (the proxy fails closed) and is not cached', async () => {
      let fail = true;
      const o = own({
        extraHosts: async () => {
          if (fail) throw new Error('store down');
          return [];
        },
      });
      const { env } = await devWithEnv();
      let err: any;
      try {
        await o.egress.effectiveEgress(env.id);
      } catch (e) {
        err = e;
      }
      expect(err?.message).to.equal('store down');
      fail = false;
      expect(await o.egress.effectiveEgress(env.id)).not.to.equal(null);
    });

    it('keeps at most maxEntries environments', async () => {
      const o = own({ maxEntries: 2 });
      const envs = [await devWithEnv(), await devWithEnv(), await devWithEnv()];
      for (const { env } of envs) await o.egress.effectiveEgress(env.id);
      expect(o.cache.stats().size).to.equal(2);
      const loads = o.cache.stats().loads;
      await o.egress.effectiveEgress(envs[2]!.env.id);
      expect(o.cache.stats().loads).to.equal(loads, 'the newest stayed');
      await o.egress.effectiveEgress(envs[0]!.env.id);
      expect(o.cache.stats().loads).to.equal(loads + 1, 'the oldest was evicted');
    });
  });

  describe('the running service (bin/service.ts wiring)', () => {
    it('exposes the lookups, and an API write is seen by the very next lookup', async () => {
      const { dev, env } = await devWithEnv();
      expect((await t.svc.secrets.secretsForEnvironment(env.id))!.placeholders).to.deep.equal([]);
      const rec = (await dev.put(`/v1/environments/${env.id}/secrets/LIVE`, { value: 'live-value', allowed_hosts: ['live.com'] })).body;
      const s = (await t.svc.secrets.secretsForEnvironment(env.id))!;
      expect(s.byPlaceholder.get(rec.placeholder)!.value()).to.equal('live-value');
      expect((await t.svc.egress.effectiveEgress(env.id))!.allows('live.com')).to.equal(true);
      await dev.put('/v1/egress', { allow: ['dev-default.com'] });
      expect((await t.svc.egress.effectiveEgress(env.id))!.allows('dev-default.com')).to.equal(true);
      await dev.delete(`/v1/environments/${env.id}/secrets/LIVE`);
      expect((await t.svc.secrets.secretsForEnvironment(env.id))!.placeholders).to.deep.equal([]);
      expect((await t.svc.egress.effectiveEgress(env.id))!.allows('live.com')).to.equal(false);
    });
  });
});
