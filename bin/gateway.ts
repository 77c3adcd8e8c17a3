#!/usr/bin/env node
import { ConfigError, defaultBaseUrl, loadConfig, type Config } from '../config/config.js';
import { createLogger } from '../lib/log.js';
import { createDb } from '../store/db.js';
import { migrateLatest } from '../store/migrate.js';
import { ServiceClock } from '../lib/clock.js';
import { createAccountsService, DEFAULT_DEVELOPER_ID } from '../accounts/accounts.service.js';
import { startService } from './service.js';

const USAGE = `usage: gateway <command>
  start                 run everything in one process (API, proxy, jobs, host, browser broker)
  host                  run an environment host alone (with the proxy its VMs use and a job
                        worker) against a shared MySQL; see docs/environments.md
  migrate               apply database migrations and exit
  keys create [label]   create an API key for the default developer; prints it once
  keys list             list API keys (ids and last four characters only)
  keys revoke <id>      revoke an API key
  members create <email> [name]   add a console team member; prints a one-time sign-in link
  members link <email>            a new one-time sign-in link for a member
  hosts list            environment hosts: id, status, draining, capacity, environments held
  hosts drain <id>      place nothing new on that host (what it runs keeps running)
  hosts undrain <id>    place on it again`;

/**
 * The first start's API key, once, on stderr: never in the JSON log on stdout, which must
 * stay free of secrets (log shippers keep it). Later starts find a key and print nothing.
 */
function printFirstKey(key: string, baseUrl: string): void {
  process.stderr.write(
    `\n  First start: no API key existed, so one was created for you. It is shown only now\n` +
      `  (only its hash is stored); keep it somewhere safe:\n\n` +
      `    ${key}\n\n` +
      `  Try it:\n\n` +
      `    curl -H 'Authorization: Bearer ${key}' ${baseUrl}/v1/environments\n\n` +
      `  More keys: npm run keys -- create [label]   (set GATEWAY_BOOTSTRAP_API_KEY to choose your own)\n\n`,
  );
}

async function main(argv: string[]): Promise<number> {
  const [command = 'start', ...rest] = argv;
  let config: Readonly<Config>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  const log = createLogger(config.logLevel);

  if (command === 'start' || command === 'host') {
    const svc = await startService(config, log, { api: command === 'start' });
    if (svc.firstStartKey) printFirstKey(svc.firstStartKey, svc.baseUrl);
    if (command === 'host' && !svc.host) log.error('gateway host: no environment host could start (see above)');
    log.info({ api_url: svc.apiUrl || null, proxy_url: svc.proxyUrl, base_url: svc.baseUrl, host_id: svc.host?.hostId ?? null, health_url: svc.healthUrl }, 'ready');
    // SIGTERM/SIGINT: the graceful stop (bin/service.ts stopGracefully), exit 0. A second
    // signal, or a stop that outlives the grace by a minute, exits at once with 1.
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting without finishing the stop');
        process.exit(1);
      }
      stopping = true;
      log.info({ signal, grace_secs: config.shutdownGraceMs / 1000 }, 'shutting down');
      setTimeout(() => {
        log.error('the stop did not finish within a minute after the grace period: exiting');
        process.exit(1);
      }, config.shutdownGraceMs + 60_000).unref();
      try {
        await svc.close();
      } catch (err) {
        log.error({ err }, 'the stop failed');
        process.exit(1);
      }
      log.info('stopped');
      process.exit(0);
    };
    process.on('SIGINT', () => void stop('SIGINT'));
    process.on('SIGTERM', () => void stop('SIGTERM'));
    return -1;
  }

  const db = await createDb(config.database);
  try {
    const applied = await migrateLatest(db);
    if (command === 'migrate') {
      process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'already up to date\n');
      return 0;
    }
    if (command === 'keys') {
      const accounts = createAccountsService({ db, clock: new ServiceClock() });
      await accounts.ensureDeveloper();
      const [sub, arg] = rest;
      if (sub === 'create') {
        const { key, info } = await accounts.createApiKey(DEFAULT_DEVELOPER_ID, arg ?? null);
        process.stdout.write(`${key}\n`);
        process.stderr.write(`created ${info.id} (shown once; only its hash is stored)\n`);
        return 0;
      }
      if (sub === 'list') {
        for (const k of await accounts.listApiKeys()) {
          process.stdout.write(`${k.id}  sk_...${k.last4}  ${k.revoked_at ? `revoked ${k.revoked_at}` : 'active'}  ${k.label ?? ''}\n`);
        }
        return 0;
      }
      if (sub === 'revoke' && arg) {
        if (!(await accounts.revokeApiKey(arg))) {
          process.stderr.write(`no API key ${arg}\n`);
          return 1;
        }
        process.stdout.write(`revoked ${arg}\n`);
        return 0;
      }
    }
    if (command === 'members') {
      const { createMembersService } = await import('../accounts/members.service.js');
      const accounts = createAccountsService({ db, clock: new ServiceClock() });
      await accounts.ensureDeveloper();
      const members = createMembersService({ db, clock: new ServiceClock() });
      // BASE_URL, else the API's address as `gateway start` would serve it (wildcard binds as loopback).
      const base = defaultBaseUrl(config);
      if (!config.baseUrl && config.apiPort === 0) process.stderr.write('note: API_PORT=0 picks a port at start; set BASE_URL so links name the right one\n');
      const [sub, email, name] = rest;
      if (sub === 'create' && email) {
        const { signInToken } = await members.create(DEFAULT_DEVELOPER_ID, { email, name: name ?? email });
        process.stdout.write(`${base}/console/sign-in/${signInToken}\n`);
        process.stderr.write('one-time sign-in link, valid 24 hours\n');
        return 0;
      }
      if (sub === 'link' && email) {
        const m = (await members.list(DEFAULT_DEVELOPER_ID)).find((x) => x.email === email.toLowerCase());
        if (!m) {
          process.stderr.write(`no team member ${email}\n`);
          return 1;
        }
        process.stdout.write(`${base}/console/sign-in/${await members.signInLink(m.id)}\n`);
        return 0;
      }
    }
    if (command === 'hosts') {
      const { hostsStore, isDraining } = await import('../hosts/hosts.store.js');
      const [sub, id] = rest;
      if (sub === 'list') {
        const { createRuntimeState } = await import('../environments/runtime.service.js');
        const runtime = createRuntimeState({ db, clock: new ServiceClock() });
        for (const h of await hostsStore.list(db)) {
          const held = await runtime.heldOn(db, h.id);
          process.stdout.write(`${h.id}  ${h.status}${isDraining(h) ? ' draining' : ''}  cpus ${held.cpus}/${h.cpus}  base memory ${held.memoryMib}/${h.memory_mib} MiB\n`);
        }
        return 0;
      }
      if ((sub === 'drain' || sub === 'undrain') && id) {
        if (!(await hostsStore.setDraining(db, id, sub === 'drain'))) {
          process.stderr.write(`no host ${id}\n`);
          return 1;
        }
        process.stdout.write(sub === 'drain' ? `${id} is draining: nothing new is placed on it\n` : `${id} takes new environments again\n`);
        return 0;
      }
    }
    process.stderr.write(`${USAGE}\n`);
    return 2;
  } finally {
    await db.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err) => {
    process.stderr.write(`fatal: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  },
);
