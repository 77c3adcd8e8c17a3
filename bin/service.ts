import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync } from 'node:fs';
import type { Config } from '../config/config.js';
import { ServiceClock } from '../lib/clock.js';
import { Keyring } from '../lib/crypto.js';
import type { Logger } from '../lib/log.js';
import { createDb, type Db } from '../store/db.js';
import { migrateLatest } from '../store/migrate.js';
import { createAccountsService, DEFAULT_DEVELOPER_ID } from '../accounts/accounts.service.js';
import { createTemplatesService } from '../environments/templates.service.js';
import { createEnvironmentsService } from '../environments/environments.service.js';
import { createWakeupsService } from '../environments/wakeups.service.js';
import { createSchedulesService } from '../environments/schedules.service.js';
import { createApp } from '../api/app.js';
import { environmentsRouter } from '../api/routes/environments.js';
import { templatesRouter } from '../api/routes/templates.js';
import { testClockRouter } from '../api/routes/test-clock.js';
import { createJobRunner } from '../jobs/runner.js';
import { loadMasterKey } from './master-key.js';

export interface RunningService {
  apiUrl: string;
  baseUrl: string;
  proxyUrl: string | null;
  db: Db;
  clock: ServiceClock;
  close(): Promise<void>;
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** The composition root: builds every part from the config and starts it in this process. */
export async function startService(config: Readonly<Config>, log: Logger): Promise<RunningService> {
  mkdirSync(config.dataDir, { recursive: true });
  const keyring = new Keyring([loadMasterKey(config.masterKey, config.dataDir, log)]);
  const clock = new ServiceClock();
  const db = await createDb(config.database);
  const applied = await migrateLatest(db);
  if (applied.length) log.info({ migrations: applied }, 'migrations applied');

  const accounts = createAccountsService({ db, clock });
  await accounts.ensureDeveloper();
  if (config.bootstrapApiKey) await accounts.ensureApiKey(DEFAULT_DEVELOPER_ID, config.bootstrapApiKey);

  const templates = createTemplatesService({ db, clock });
  const environments = createEnvironmentsService({
    db, clock, keyring, templates, log,
    defaultAgentVersion: async (developerId) => (await accounts.getDeveloper(developerId))?.defaultAgentVersion ?? null,
  });
  const wakeups = createWakeupsService({ db, clock });
  const schedules = createSchedulesService({ db, clock });

  // Sweep jobs read their work from domain tables, so nothing is lost between a commit and
  // a job being queued. With the test clock they poll every second, so runDue() after an
  // advance does not wait for a slow poll.
  const jobs = createJobRunner({ db, clock, log, processEveryMs: config.testClock ? 1000 : 5000 });
  jobs.define('fire-wakeups', async () => {
    await wakeups.fireDue();
  }, { retry: false });
  await jobs.start();
  await jobs.every('fire-wakeups', 5000, {});

  const runDue = async (): Promise<void> => {
    const out = await jobs.runDue({ timeoutMs: 20_000 });
    if (out.timedOut) log.warn({ ran: out.ran }, 'test clock: due jobs still running after 20 s');
  };

  const routers = [environmentsRouter({ environments, wakeups, schedules }), templatesRouter({ templates })];
  if (config.testClock) routers.push(testClockRouter({ clock, runDue }));
  const app = createApp({ log, accounts, routers });

  const apiServer = createServer(app);
  const apiPort = await listen(apiServer, config.host, config.apiPort);
  const apiUrl = `http://${urlHost(config.host)}:${apiPort}`;
  const baseUrl = config.baseUrl ?? apiUrl;

  return {
    apiUrl,
    baseUrl,
    proxyUrl: null,
    db,
    clock,
    async close() {
      await new Promise<void>((resolve) => {
        apiServer.close(() => resolve());
        apiServer.closeAllConnections();
      });
      await jobs.stop();
      await db.destroy();
    },
  };
}
