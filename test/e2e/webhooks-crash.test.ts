/**
 * At least once across crashes (service.md Delivery 2): a service process killed with
 * SIGKILL in the middle of a delivery leaves the event leased, not lost; a new process on
 * the same database takes it again once the lease has passed and delivers it with the same
 * event id. The lease is ~40 s (the 10 s attempt deadline + 30 s); the new process moves
 * its test clock past it instead of sleeping.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import { freshDatabaseUrl } from '../helpers/db.js';
import { createDb, parseDatabaseUrl, withTx, type Db } from '../../store/db.js';
import { enqueueEvent } from '../../webhooks/outbox.js';
import { verifyWebhook } from '../../webhooks/verify.js';
import { DEFAULT_DEVELOPER_ID } from '../../accounts/accounts.service.js';
import { gatewayJs, killGroup, ROOT } from '../helpers/child-service.js';


interface Child {
  child: ChildProcess;
  apiUrl: string;
  exited: Promise<number | null>;
}

/**
 * `gateway start` (compiled, as `npm start` runs it) in a process group of its own, so
 * SIGKILL goes to the whole group (the service and what it started), which is what a crash
 * of the machine or the container does.
 */
function start(env: Record<string, string>): Promise<Child> {
  const child = spawn(process.execPath, [gatewayJs(), 'start'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const lines: string[] = [];
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return new Promise((res, rej) => {
    const timer = setTimeout(() => {
      killGroup(child);
      rej(new Error(`no ready line: ${lines.join('\n')}`));
    }, 20_000);
    void exited.then((code) => {
      clearTimeout(timer);
      rej(new Error(`exited ${code} before ready: ${lines.join('\n')}`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      let rec: { msg?: string; api_url?: string } | null = null;
      try {
        rec = JSON.parse(line);
      } catch {
        return;
      }
      if (rec?.msg === 'ready') {
        clearTimeout(timer);
        res({ child, apiUrl: rec.api_url!, exited });
      }
    });
    child.stderr!.on('data', (d) => lines.push(String(d)));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(what: string, cond: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

describe('webhook delivery survives a crash (kill -9 mid-delivery)', function () {
  this.timeout(90_000);
  let dir: string;
  let dbUrl: ReturnType<typeof freshDatabaseUrl>;
  let db: Db | null = null;
  let server: Server;
  const sockets = new Set<Socket>();
  const children: Child[] = [];
  const received: Array<{ headers: IncomingHttpHeaders; raw: Buffer }> = [];
  /** While true the receiver accepts, reads the request and never answers. */
  let hang = true;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-e2e-wh-'));
    dbUrl = freshDatabaseUrl();
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, raw: Buffer.concat(chunks) });
        if (!hang) res.writeHead(200).end('ok');
      });
    });
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  });

  after(async () => {
    for (const c of children) killGroup(c.child);
    await Promise.all(children.map((c) => c.exited));
    await db?.destroy();
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
    await dbUrl.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the event is delivered by the next process, with the same Service-Event-Id and bytes', async () => {
    const key = `sk_${randomBytes(20).toString('hex')}`;
    const env = {
      DATABASE_URL: dbUrl.url,
      DATA_DIR: join(dir, 'data'),
      API_PORT: '0',
      PROXY_PORT: '0',
      GATEWAY_RUNTIME: 'none',
      GATEWAY_TEST_CLOCK: '1',
      GATEWAY_ALLOW_PRIVATE_UPSTREAMS: '1',
      GATEWAY_BOOTSTRAP_API_KEY: key,
      GATEWAY_MASTER_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'info',
    };
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;

    // 1. First process: an endpoint, and an event queued by another process (this one).
    const first = await start(env);
    children.push(first);
    const put = await fetch(`${first.apiUrl}/v1/webhook-endpoint`, { method: 'PUT', headers: auth, body: JSON.stringify({ url: hookUrl }) });
    expect(put.status).to.equal(200);
    const secret = ((await put.json()) as { secret: string }).secret;
    db = await createDb(parseDatabaseUrl(dbUrl.url)!);
    const eventId = (await withTx(db, (trx) =>
      enqueueEvent(trx, { developerId: DEFAULT_DEVELOPER_ID, type: 'approval.requested', environmentId: null, data: { crash: true }, createdAtMs: Date.now() }),
    ))!;
    expect(eventId).to.match(/^evt_[0-9a-f]{24}$/);

    // 2. Its sweep takes the event and POSTs it; the receiver never answers: mid-delivery.
    await waitUntil('the first attempt to arrive', () => received.length >= 1, 20_000);
    expect(received[0]!.headers['service-event-id']).to.equal(eventId);
    const leased = await db('webhook_events').where({ id: eventId }).first();
    expect(leased.status).to.equal('pending');
    expect(Number(leased.locked_until)).to.be.greaterThan(Date.now());
    expect(leased.lock_token).to.be.a('string');

    // 3. kill -9.
    killGroup(first.child);
    await first.exited;
    // Nothing was recorded: the attempt never finished, and the event is still there.
    expect(await db('webhook_deliveries').where({ event_id: eventId })).to.deep.equal([]);
    expect((await db('webhook_events').where({ id: eventId }).first()).status).to.equal('pending');

    // 4. A new process on the same database: the lease is still held, so nothing yet.
    hang = false;
    const second = await start(env);
    children.push(second);
    // The signal that its sweep ran: an advance of 0 s runs every due job before it answers.
    const swept = await fetch(`${second.apiUrl}/v1/test-clock/advance`, { method: 'POST', headers: auth, body: JSON.stringify({ seconds: 0 }) });
    expect(swept.status).to.equal(200);
    expect(received).to.have.length(1);

    // 5. Past the lease (test clock): its sweep takes the event again and delivers it
    // before the advance answers.
    const adv = await fetch(`${second.apiUrl}/v1/test-clock/advance`, { method: 'POST', headers: auth, body: JSON.stringify({ seconds: 60 }) });
    expect(adv.status).to.equal(200);
    expect(received).to.have.length(2);
    const again = received[1]!;
    expect(again.headers['service-event-id']).to.equal(eventId);
    expect(again.raw.equals(received[0]!.raw)).to.equal(true);
    expect(verifyWebhook(again.raw, again.headers['service-signature'] as string, [secret]).id).to.equal(eventId);

    const row = await db('webhook_events').where({ id: eventId }).first();
    expect(row.status).to.equal('delivered');
    expect(Number(row.attempts)).to.equal(1);
    const log = await fetch(`${second.apiUrl}/v1/webhook-deliveries?event_id=${eventId}`, { headers: { authorization: auth.authorization } });
    const logBody = (await log.json()) as { data: Array<{ status: string; status_code: number }> };
    expect(log.status, JSON.stringify(logBody)).to.equal(200);
    const attempts = logBody.data;
    expect(attempts.map((a) => [a.status, a.status_code])).to.deep.equal([['succeeded', 200]]);

    // A normal stop (tsx relays SIGTERM to the service), as `npm start` is stopped.
    second.child.kill('SIGTERM');
    expect(await second.exited).to.equal(0);
  });
});
