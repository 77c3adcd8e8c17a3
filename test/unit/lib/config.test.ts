import { expect } from 'chai';
import { ConfigError, defaultBaseUrl, loadConfig } from '../../../config/config.js';

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

  it('the default store follows DATA_DIR (issue 25, item 8): DATA_DIR alone moves all state', () => {
    expect(loadConfig({ DATA_DIR: '/srv/gw' }).databaseUrl).to.equal('sqlite:/srv/gw/gateway.sqlite');
    expect(loadConfig({ DATA_DIR: '/srv/gw/' }).database).to.deep.include({ client: 'sqlite', filename: '/srv/gw/gateway.sqlite' });
    expect(loadConfig({ DATA_DIR: 'state' }).databaseUrl).to.equal('sqlite:state/gateway.sqlite');
    // Unset, it is the store it always was.
    expect(loadConfig({}).databaseUrl).to.equal('sqlite:./data/gateway.sqlite');
    // DATABASE_URL still wins.
    expect(loadConfig({ DATA_DIR: '/srv/gw', DATABASE_URL: 'sqlite:/var/lib/gw.sqlite' }).databaseUrl).to.equal('sqlite:/var/lib/gw.sqlite');
  });

  it('links printed by the CLI use BASE_URL, else the API address, a wildcard bind as loopback', () => {
    expect(defaultBaseUrl(loadConfig({ API_PORT: '9999' }))).to.equal('http://127.0.0.1:9999');
    expect(defaultBaseUrl(loadConfig({ API_PORT: '9999', HOST: '0.0.0.0' }))).to.equal('http://127.0.0.1:9999');
    expect(defaultBaseUrl(loadConfig({ API_PORT: '9999', HOST: '::' }))).to.equal('http://[::1]:9999');
    expect(defaultBaseUrl(loadConfig({ HOST: '10.1.2.3' }))).to.equal('http://10.1.2.3:8080');
    expect(defaultBaseUrl(loadConfig({ API_PORT: '9999', BASE_URL: 'https://gw.example.com/' }))).to.equal('https://gw.example.com');
    expect(defaultBaseUrl(loadConfig({ API_PORT: '0' }), 41234)).to.equal('http://127.0.0.1:41234');
  });

  it('health port and shutdown grace (issue 25): unset and 30 s by default, validated', () => {
    expect(loadConfig({}).healthPort).to.equal(null);
    expect(loadConfig({}).shutdownGraceMs).to.equal(30_000);
    expect(loadConfig({ GATEWAY_HEALTH_PORT: '9102', GATEWAY_SHUTDOWN_GRACE_SECS: '5' })).to.deep.include({ healthPort: 9102, shutdownGraceMs: 5000 });
    expect(() => loadConfig({ GATEWAY_HEALTH_PORT: '70000' })).to.throw(ConfigError, /GATEWAY_HEALTH_PORT/);
    expect(() => loadConfig({ GATEWAY_SHUTDOWN_GRACE_SECS: '-1' })).to.throw(ConfigError, /GATEWAY_SHUTDOWN_GRACE_SECS/);
  });

  it('request buffer: 64 MiB per environment and 512 MiB in all by default; the total may not be less than one share', () => {
    expect(loadConfig({}).requestBuffer).to.deep.equal({ perEnvironmentBytes: 64 * 1024 * 1024, totalBytes: 512 * 1024 * 1024 });
    expect(loadConfig({ GATEWAY_REQUEST_BUFFER_MIB: '2', GATEWAY_REQUEST_BUFFER_TOTAL_MIB: '3' }).requestBuffer).to.deep.equal({ perEnvironmentBytes: 2 * 1024 * 1024, totalBytes: 3 * 1024 * 1024 });
    expect(() => loadConfig({ GATEWAY_REQUEST_BUFFER_MIB: '0' })).to.throw(ConfigError, /GATEWAY_REQUEST_BUFFER_MIB/);
    expect(() => loadConfig({ GATEWAY_REQUEST_BUFFER_MIB: '100', GATEWAY_REQUEST_BUFFER_TOTAL_MIB: '50' })).to.throw(ConfigError, /GATEWAY_REQUEST_BUFFER_TOTAL_MIB/);
  });

  it('host heartbeat and offline bound: 5 s and 30 s by default; the bound must exceed the heartbeat', () => {
    expect(loadConfig({})).to.deep.include({ hostHeartbeatMs: 5000, hostOfflineMs: 30_000 });
    expect(loadConfig({ GATEWAY_HOST_HEARTBEAT_SECS: '1', GATEWAY_HOST_OFFLINE_SECS: '4' })).to.deep.include({ hostHeartbeatMs: 1000, hostOfflineMs: 4000 });
    expect(() => loadConfig({ GATEWAY_HOST_HEARTBEAT_SECS: '0' })).to.throw(ConfigError, /GATEWAY_HOST_HEARTBEAT_SECS/);
    expect(() => loadConfig({ GATEWAY_HOST_OFFLINE_SECS: '5' })).to.throw(ConfigError, /GATEWAY_HOST_OFFLINE_SECS/);
    expect(() => loadConfig({ GATEWAY_HOST_HEARTBEAT_SECS: '10', GATEWAY_HOST_OFFLINE_SECS: '10' })).to.throw(ConfigError, /GATEWAY_HOST_OFFLINE_SECS/);
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
