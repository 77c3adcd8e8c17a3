import { expect } from 'chai';
import { createDb, parseDatabaseUrl, type Db } from '../../store/db.js';
import { ServiceClock } from '../../lib/clock.js';
import { createAccountsService } from '../../accounts/accounts.service.js';
import { freshDb, usingMysql, type FreshDb } from '../helpers/db.js';

/**
 * The first start's API key (issue 10, item 4): created only when the store has no key at
 * all, once, even when several processes start on one store at the same moment.
 */
describe(`first start's API key (${usingMysql() ? 'MySQL' : 'SQLite'})`, () => {
  let f: FreshDb;
  let second: Db;
  beforeEach(async () => {
    f = await freshDb();
    // A second pool on the same store: another process starting at the same time.
    second = await createDb(parseDatabaseUrl(f.url)!);
  });
  afterEach(async () => {
    await second.destroy();
    await f.cleanup();
  });

  it('eight starts at once on an empty store: exactly one key, and it works', async () => {
    const a = createAccountsService({ db: f.db, clock: new ServiceClock() });
    const b = createAccountsService({ db: second, clock: new ServiceClock() });
    const keys = (await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).firstStartKey()))).filter((k) => k !== null);
    expect(keys).to.have.length(1);
    expect(keys[0]).to.match(/^sk_[0-9a-f]{40}$/);
    expect(await a.authenticate(keys[0]!)).to.not.equal(null);
    expect(await a.listApiKeys()).to.have.length(1);
    expect(await b.firstStartKey()).to.equal(null);
  });

  it('a store whose only keys are revoked gets no new one (revoking every key and restarting is no way in)', async () => {
    const a = createAccountsService({ db: f.db, clock: new ServiceClock() });
    await a.ensureDeveloper();
    const { info } = await a.createApiKey('dev_000000000000000000000001', 'only');
    await a.revokeApiKey(info.id);
    expect(await a.firstStartKey()).to.equal(null);
  });
});
