import { expect } from 'chai';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { startBrowserWorld, CHROMIUM, type BrowserWorld } from '../helpers/browser-world.js';
import { RawCdp } from '../helpers/cdp-client.js';
import { pollUntil, skipWithoutRuntime } from '../helpers/runtime.js';
import { chromiumUnavailable, skipOrFailInCI } from '../helpers/ci-gate.js';
import { SLOT_UID_BASE, SLOT_UID_RANGE } from '../../browser/browser-pool.js';
import { BROWSER_UID_BASE, BROWSER_UID_RANGE } from '../../browser/browser-sandbox.js';

/**
 * Issue 29, item 3: sandboxed browsers started ahead (GATEWAY_BROWSER_POOL_SIZE), each a
 * slot that belongs to no environment until a first lease claims it, then to that one only:
 * its own uid from the slot range, moved into the environment's cgroup at the claim, its
 * traffic the environment's, never handed to another; the pool refills; size 0 is the cold
 * path of before.
 */
const uidOf = (pid: number): number => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
const isSlotUid = (uid: number): boolean => uid >= SLOT_UID_BASE && uid < SLOT_UID_BASE + SLOT_UID_RANGE;

/** Live processes of a uid (not zombies: an exited renderer waiting for its parent holds nothing and cannot be moved). */
function procsOf(uid: number): number[] {
  const out: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const status = readFileSync(`/proc/${p}/status`, 'utf8');
      if (Number(/^Uid:\s+(\d+)/m.exec(status)![1]) === uid && !/^State:\s+Z/m.test(status)) out.push(Number(p));
    } catch { /* gone */ }
  }
  return out;
}

/** Slot uids with a live process that no environment claimed (none of its processes in an environment's cgroup). */
function idleSlotUids(): number[] {
  const uids = new Set<number>();
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const uid = uidOf(Number(p));
      if (isSlotUid(uid) && ours(Number(p)) && !/\/env_/.test(readFileSync(`/proc/${p}/cgroup`, 'utf8'))) uids.add(uid);
    } catch { /* gone */ }
  }
  return [...uids];
}

/**
 * Whether a process descends from this test process (its services' browsers do): another
 * test run on the machine (CI runs two side by side) has slots of its own, not this one's.
 */
function ours(pid: number): boolean {
  for (let p = pid, i = 0; p > 1 && i < 64; i++) {
    if (p === process.pid) return true;
    // The parent is the 4th field of /proc/<pid>/stat, after the command name in parentheses.
    const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
    p = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  }
  return false;
}

describe('browser pool: browsers started ahead for first leases (issue 29, item 3)', function () {
  this.timeout(180_000);
  let w: BrowserWorld;

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    // Slot uids and cgroups need what the process runtime needs (root, bubblewrap).
    skipWithoutRuntime(this);
    // The process runtime: an environment's destroy kills its cgroup, and the browser in it.
    w = await startBrowserWorld({ GATEWAY_BROWSER_POOL_SIZE: '1', GATEWAY_RUNTIME: 'process' });
    // The pool fills from the host's first lease on (a host that never runs a browser holds none).
    expect(w.t.svc.browserBroker.pool()).to.deep.equal({ size: 1, ready: 0 });
    const first = await w.lease((await w.env()).id);
    await w.t.api.post(`/v1/browser/leases/${first.id}/release`);
  });
  after(async () => {
    await w?.close();
  });

  /** Until the pool has its slot ready (it starts one when the host is idle, or 10 s after it fell short). */
  const filled = async (): Promise<void> => {
    const ready = await pollUntil(() => w.t.svc.browserBroker.pool()!.ready, (n) => n >= 1, 60_000, 100);
    expect(ready, 'a ready slot').to.equal(1);
  };

  it('a first lease takes the ready slot: a uid of the slot range, every process of it in the environment\'s cgroup, its traffic audited as the environment', async () => {
    await filled();
    const e = await w.env();
    const l = await w.lease(e.id);
    const uid = uidOf(w.browserPid(l.id));
    expect(isSlotUid(uid), `uid ${uid} of the slot range`).to.equal(true);
    // Every process of the uid that is still there when read (Chromium ends short-lived
    // helpers of its own: one ended between the listing and the read under load once).
    const cgroups = procsOf(uid).flatMap((p) => {
      try {
        return [[p, readFileSync(`/proc/${p}/cgroup`, 'utf8')] as const];
      } catch {
        return [];
      }
    });
    expect(cgroups.length).to.be.above(3);
    for (const [p, cg] of cgroups) {
      expect(cg, `process ${p}`).to.include(`/${e.id}`);
      expect(cg, `process ${p}`).to.not.include('browser-pool');
    }
    const agent = await RawCdp.connect(l.cdp_url);
    const page = await agent.newPage();
    await agent.navigate(page.sessionId, 'https://app.example.com/through-a-claimed-slot');
    expect(await agent.evaluate(page.sessionId, 'document.body.textContent')).to.equal('/through-a-claimed-slot');
    agent.close();
    const audit = (await w.t.api.get(`/v1/audit-log?environment_id=${e.id}`)).body.data.map((x: any) => x.path);
    expect(audit).to.include('/through-a-claimed-slot');
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });

  it('exhausted (its one slot just claimed): the next first lease starts its environment\'s own browser, the cold path', async () => {
    await filled();
    const a = await w.env();
    const la = await w.lease(a.id);
    const b = await w.env();
    const lb = await w.lease(b.id);
    expect(isSlotUid(uidOf(w.browserPid(la.id))), 'the first takes the slot').to.equal(true);
    expect(isColdUid(uidOf(w.browserPid(lb.id))), 'the second starts cold').to.equal(true);
    expect(uidOf(w.browserPid(lb.id))).to.not.equal(uidOf(w.browserPid(la.id)));
    for (const l of [la, lb]) await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });

  it('before its claim, a slot\'s proxy socket refuses every connection: it has no identity yet', async () => {
    await filled();
    const [uid] = idleSlotUids();
    expect(uid, 'an idle slot').to.be.a('number');
    const inside = procsOf(uid!).map((p) => `/proc/${p}/root/run/gw/proxy.sock`).find((s) => existsSync(s));
    expect(inside, 'the slot\'s proxy socket').to.be.a('string');
    const answer = await new Promise<string>((resolve) => {
      let got = '';
      const s = createConnection(inside!, () => s.write('CONNECT app.example.com:443 HTTP/1.1\r\nHost: app.example.com:443\r\n\r\n'));
      s.on('data', (d) => (got += d.toString()));
      s.on('close', () => resolve(got));
      s.on('error', () => {});
    });
    expect(answer, 'nothing answers before the claim').to.equal('');
  });

  it('a slot serves one environment: each first lease gets another slot (another uid and browser), a released environment\'s browser is never handed on, and the pool refills', async () => {
    await filled();
    const a = await w.env();
    const la = await w.lease(a.id);
    const uidA = uidOf(w.browserPid(la.id));
    await filled();
    const b = await w.env();
    const lb = await w.lease(b.id);
    const uidB = uidOf(w.browserPid(lb.id));
    expect(isSlotUid(uidA) && isSlotUid(uidB)).to.equal(true);
    expect(uidB, 'two environments never share a slot').to.not.equal(uidA);
    expect(w.browserPid(lb.id)).to.not.equal(w.browserPid(la.id));
    // A's lease ends and its environment goes: its browser dies with it, never back to the pool.
    await w.t.api.post(`/v1/browser/leases/${la.id}/release`);
    await w.t.api.delete(`/v1/environments/${a.id}`);
    const left = await pollUntil(() => procsOf(uidA).length, (n) => n === 0, 60_000, 100);
    expect(left, 'processes of the first slot after its environment was destroyed').to.equal(0);
    await filled();
    expect(idleSlotUids()).to.not.include(uidA);
    expect(idleSlotUids()).to.not.include(uidB);
    const c = await w.env();
    const lc = await w.lease(c.id);
    expect([uidA, uidB]).to.not.include(uidOf(w.browserPid(lc.id)));
    for (const l of [lb, lc]) await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });
});

describe('browser pool of size 0: the cold path (issue 29, item 3)', function () {
  this.timeout(120_000);
  let w: BrowserWorld;

  before(async function () {
    skipOrFailInCI(this, chromiumUnavailable(CHROMIUM));
    skipWithoutRuntime(this);
    w = await startBrowserWorld({ GATEWAY_BROWSER_POOL_SIZE: '0' });
  });
  after(async () => {
    await w?.close();
  });

  it('no slot starts; a first lease starts the environment\'s own browser, as its uid, in its cgroup', async () => {
    expect(w.t.svc.browserBroker.pool()).to.equal(null);
    const e = await w.env();
    const l = await w.lease(e.id);
    const pid = w.browserPid(l.id);
    expect(isColdUid(uidOf(pid))).to.equal(true);
    expect(readFileSync(`/proc/${pid}/cgroup`, 'utf8')).to.include(`/${e.id}`);
    expect(idleSlotUids()).to.deep.equal([]);
    await w.t.api.post(`/v1/browser/leases/${l.id}/release`);
  });
});

/** A uid of the range browsers started for their environment take (allocated per start). */
function isColdUid(uid: number): boolean {
  return uid >= BROWSER_UID_BASE && uid < BROWSER_UID_BASE + BROWSER_UID_RANGE;
}
