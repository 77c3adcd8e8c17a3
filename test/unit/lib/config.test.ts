import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../../config/config.js';

describe('config', () => {
  it('has the operating contract defaults', () => {
    const c = loadConfig({});
    expect(c.databaseUrl).to.equal('sqlite:./data/gateway.sqlite');
    expect(c.database.client).to.equal('sqlite');
    expect(c.dataDir).to.equal('./data');
    expect(c.host).to.equal('127.0.0.1');
    expect(c.apiPort).to.equal(8080);
    expect(c.proxyPort).to.equal(8081);
    expect(c.baseUrl).to.equal(null);
    expect(c.allowPrivateUpstreams).to.equal(false);
    expect(c.testClock).to.equal(false);
    expect(c.runtime).to.equal('process');
    expect(c.chromiumPath).to.equal('/usr/bin/chromium');
    expect(c.logLevel).to.equal('info');
    expect(c.retention).to.deep.equal({ webhookDays: 30, jobDays: 7, auditDays: null });
    expect(Object.isFrozen(c)).to.equal(true);
    expect(Object.isFrozen(c.retention)).to.equal(true);
  });

  it('reads the retention windows; the audit log is kept forever unless one is set', () => {
    const c = loadConfig({ GATEWAY_WEBHOOK_RETENTION_DAYS: '90', GATEWAY_JOB_RETENTION_DAYS: '1', GATEWAY_AUDIT_RETENTION_DAYS: '365' });
    expect(c.retention).to.deep.equal({ webhookDays: 90, jobDays: 1, auditDays: 365 });
    expect(loadConfig({ GATEWAY_AUDIT_RETENTION_DAYS: '' }).retention.auditDays).to.equal(null);
  });

  it('parses MySQL URLs and upstream overrides', () => {
    const c = loadConfig({
      DATABASE_URL: 'mysql://root:p%40ss@127.0.0.1:3307/gw',
      GATEWAY_UPSTREAM_OVERRIDES: 'gmail.googleapis.com=127.0.0.1:9443, slack.com=[::1]:9444',
      GATEWAY_TEST_CLOCK: '1',
      API_PORT: '0',
    });
    expect(c.database).to.deep.equal({ client: 'mysql', host: '127.0.0.1', port: 3307, user: 'root', password: 'p@ss', database: 'gw' });
    expect(c.upstreamOverrides['slack.com']).to.deep.equal({ host: '::1', port: 9444 });
    expect(c.testClock).to.equal(true);
    expect(c.apiPort).to.equal(0);
  });

  const bad: Array<[string, Record<string, string>]> = [
    ['DATABASE_URL', { DATABASE_URL: 'postgres://x/y' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://host-without-db' }],
    ['GATEWAY_MASTER_KEY', { GATEWAY_MASTER_KEY: 'c2hvcnQ=' }],
    ['GATEWAY_MASTER_KEY', { GATEWAY_MASTER_KEY: 'not base64 !!' }],
    ['API_PORT', { API_PORT: '70000' }],
    ['PROXY_PORT', { PROXY_PORT: 'abc' }],
    ['GATEWAY_RUNTIME', { GATEWAY_RUNTIME: 'docker' }],
    ['BASE_URL', { BASE_URL: 'ftp://x' }],
    ['GATEWAY_BOOTSTRAP_API_KEY', { GATEWAY_BOOTSTRAP_API_KEY: 'sk_short' }],
    ['GATEWAY_UPSTREAM_OVERRIDES', { GATEWAY_UPSTREAM_OVERRIDES: 'nohostport' }],
    ['GATEWAY_WEBHOOK_RETENTION_DAYS', { GATEWAY_WEBHOOK_RETENTION_DAYS: '0' }],
    ['GATEWAY_JOB_RETENTION_DAYS', { GATEWAY_JOB_RETENTION_DAYS: '1.5' }],
    ['GATEWAY_AUDIT_RETENTION_DAYS', { GATEWAY_AUDIT_RETENTION_DAYS: 'forever' }],
  ];
  for (const [variable, env] of bad) {
    it(`names ${variable} when it is bad (${Object.values(env)[0]})`, () => {
      let err: unknown;
      try {
        loadConfig(env);
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(ConfigError);
      expect((err as ConfigError).variable).to.equal(variable);
      expect((err as ConfigError).message).to.match(new RegExp(`^${variable}:`));
    });
  }
});
