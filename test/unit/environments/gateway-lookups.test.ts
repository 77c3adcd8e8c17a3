/**
 * The pure halves of the proxy's lookups: the effective egress allowlist of a snapshot
 * (decisions.md, "Effective egress allowlist") and the placeholder index of its secrets.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { Keyring } from '../../../lib/crypto.js';
import type { GatewaySnapshot, SnapshotSecret } from '../../../environments/egress.cache.js';
import { effectiveEgressOf } from '../../../environments/egress.service.js';
import { findPlaceholders, indexSecrets, newPlaceholder, secretContext, PLACEHOLDER } from '../../../environments/secrets.service.js';

const keyring = new Keyring([randomBytes(32)]);
const DEV = 'dev_aaaaaaaaaaaaaaaaaaaaaaaa';
const ENV = 'env_bbbbbbbbbbbbbbbbbbbbbbbb';

function secret(name: string, hosts: string[], opts: Partial<SnapshotSecret> & { value?: string } = {}): SnapshotSecret {
  const level = opts.level ?? 'environment';
  const scope = level === 'developer' ? '*' : ENV;
  return {
    id: `sec_${randomBytes(12).toString('hex')}`,
    name,
    level,
    scope,
    developerId: DEV,
    placeholder: newPlaceholder(),
    allowedHosts: hosts,
    infrastructure: opts.infrastructure ?? false,
    inject: opts.inject ?? null,
    allowMinting: opts.allowMinting ?? false,
    valueEnc: keyring.encrypt(opts.value ?? `value-of-${name}`, secretContext(DEV, scope, name)),
  };
}

function snap(p: Partial<GatewaySnapshot>): GatewaySnapshot {
  return { environmentId: ENV, developerId: DEV, destroyed: false, environmentAllow: null, developerAllow: null, unknownHosts: 'deny', secrets: [], extraHosts: [], ...p };
}

describe('effective egress of a snapshot', () => {
  const cases: Array<[string, Partial<GatewaySnapshot>, string, string[]]> = [
    ['nothing set: empty, source none', {}, 'none', []],
    ['developer default only', { developerAllow: ['a.com'] }, 'developer', ['a.com']],
    ['the environment list replaces the developer default', { environmentAllow: ['b.com'], developerAllow: ['a.com'] }, 'environment', ['b.com']],
    ['an empty environment list still replaces the default', { environmentAllow: [], developerAllow: ['a.com'] }, 'environment', []],
    ['plus secret hosts', { developerAllow: ['a.com'], secrets: [secret('S', ['api.stripe.com', '*.x.com'])] }, 'developer', ['*.x.com', 'a.com', 'api.stripe.com']],
    ['plus developer-level secret hosts', { secrets: [secret('D', ['d.com'], { level: 'developer' })] }, 'none', ['d.com']],
    ['plus extra hosts (connections)', { environmentAllow: ['b.com'], extraHosts: ['gmail.googleapis.com'] }, 'environment', ['b.com', 'gmail.googleapis.com']],
    ['duplicates once', { environmentAllow: ['a.com'], secrets: [secret('S', ['a.com'])] }, 'environment', ['a.com']],
  ];
  for (const [label, p, source, patterns] of cases) {
    it(label, () => {
      const e = effectiveEgressOf(snap(p));
      expect(e.source).to.equal(source);
      expect(e.patterns).to.deep.equal(patterns);
      for (const host of patterns.filter((h) => !h.startsWith('*'))) expect(e.allows(host), host).to.equal(true);
      expect(e.allows('not-listed.example')).to.equal(false);
    });
  }

  it('a destroyed environment reaches nothing, whatever its lists say', () => {
    const e = effectiveEgressOf(snap({ destroyed: true, environmentAllow: ['*'], secrets: [secret('S', ['a.com'])] }));
    expect(e.patterns).to.deep.equal([]);
    expect(e.allows('a.com')).to.equal(false);
    expect(e.source).to.equal('environment');
  });

  it('a secret allowed on * opens egress to every host (documented)', () => {
    expect(effectiveEgressOf(snap({ secrets: [secret('S', ['*'])] })).allows('anything.example')).to.equal(true);
  });
});

describe('secrets index of a snapshot', () => {
  it('indexes by placeholder and name; connector secret:NAME; host matcher; lazy decrypt', () => {
    const a = secret('A_KEY', ['api.a.com'], { value: 'plain-a' });
    const b = secret('B_KEY', ['*.b.com'], { level: 'developer', infrastructure: true, value: 'plain-b' });
    const idx = indexSecrets(snap({ secrets: [a, b] }), keyring);
    expect(idx.placeholders).to.deep.equal([a.placeholder, b.placeholder]);
    const ga = idx.byPlaceholder.get(a.placeholder)!;
    expect(ga).to.include({ name: 'A_KEY', connector: 'secret:A_KEY', level: 'environment', infrastructure: false, token: a.placeholder, kind: 'secret' });
    expect(ga.allowedHosts.allows('api.a.com')).to.equal(true);
    expect(ga.hostAllowed('API.A.COM', 443)).to.equal(true);
    expect(ga.hostAllowed('a.com', 443)).to.equal(false);
    // A pattern without a port is port 443 only (issue 9, hole 7).
    expect(ga.hostAllowed('api.a.com', 8443)).to.equal(false);
    expect(ga.slots).to.deep.equal([{ in: 'authorization' }]);
    expect(ga.allowMinting).to.equal(false);
    expect(ga.value()).to.equal('plain-a');
    expect(ga.value()).to.equal('plain-a');
    const gb = idx.byName.get('B_KEY')!;
    expect(gb).to.include({ connector: 'secret:B_KEY', level: 'developer', infrastructure: true });
    expect(gb.hostAllowed('x.b.com', 443)).to.equal(true);
    expect(gb.hostAllowed('b.com', 443)).to.equal(false);
    expect(gb.value()).to.equal('plain-b');
  });

  it('value() throws when the ciphertext belongs to another secret (AAD), so the proxy fails closed', () => {
    const a = secret('A_KEY', ['a.com']);
    const moved = { ...a, name: 'OTHER' };
    const idx = indexSecrets(snap({ secrets: [moved] }), keyring);
    expect(() => idx.byName.get('OTHER')!.value()).to.throw();
  });

  it('a destroyed environment has no secrets', () => {
    const idx = indexSecrets(snap({ destroyed: true, secrets: [secret('A', ['a.com'])] }), keyring);
    expect(idx.byPlaceholder.size).to.equal(0);
    expect(idx.placeholders).to.deep.equal([]);
  });

  it('placeholders: svcph_ + 32 hex; findPlaceholders scans text', () => {
    const p = newPlaceholder();
    expect(p).to.match(PLACEHOLDER);
    const q = newPlaceholder();
    expect(findPlaceholders(`Bearer ${p} and ?k=${q}&x=${p}`)).to.deep.equal([p, q, p]);
    expect(findPlaceholders('nothing here')).to.deep.equal([]);
    expect(findPlaceholders('svcph_short')).to.deep.equal([]);
  });
});
