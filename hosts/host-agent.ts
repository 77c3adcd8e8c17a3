import { createHash } from 'node:crypto';
import type { Db } from '../store/db.js';
import { toJson, withTx } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { RuntimeState } from '../environments/runtime.service.js';
import type { EnvironmentRow } from '../environments/environments.store.js';
import { hostsStore, isDraining, type HostRow } from './hosts.store.js';
import { alive } from './peer.js';
import { DriverError, type ExecRequest, type ExecResult, type HostDriver, type Surface, type VmSpec } from './driver.js';

/**
 * The host agent (issue 12, item 1): registers this host with its capacity and
 * capabilities, heartbeats, places waiting environments on itself when it has room (one
 * transaction per placement, holding the host's row), and reconciles each of its
 * environments from `state` to `desired_state` through its HostDriver, reporting the state
 * reached and an event. It wakes at once when this process changes an environment
 * (notify), and polls the store for changes other processes made.
 *
 * Several hosts share one store: each places on itself only, under its own row's lock,
 * so no host is overbooked and no environment lands twice (the claim is a conditional
 * update on host_id IS NULL).
 */
export interface HostAgentDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  driver: HostDriver;
  runtime: RuntimeState;
  hostId: string;
  name: string;
  capacity: { cpus: number; memoryMib: number };
  /** Where this host serves exec and files for other processes (read at registration). */
  endpoint?: () => string | null;
  /** What the VM's /run/service and its processes' variables hold, built from the store. */
  surfaceFor(environmentId: string): Promise<Surface | null>;
  /** How often the store is polled for other processes' changes. */
  pollMs?: number;
  heartbeatMs?: number;
  /** How often running VMs' surfaces are compared with the store (config refresh: within ~10 s). */
  surfaceMs?: number;
  /** How often running VMs' CPU use is sampled for activity. */
  cpuSampleMs?: number;
  /** Agent keep-awakes held by a process in a VM: released when that process ends. */
  keepAwakes?: {
    held(environmentIds: string[]): Promise<Array<{ id: string; environment_id: string; pid: number | null; pid_start: string | null }>>;
    release(environmentId: string, reason: string, ids: string[]): Promise<number>;
  };
}

/**
 * A VM "uses CPU" (service.md, Activity) when it used at least this share of one CPU over
 * a sampling interval (default 5 s): 2 % is 100 ms of CPU in 5 s. An agent that sleeps,
 * or waits on the network, stays under it (its relay and shells use ~0); one that builds,
 * tests or thinks locally is far over it.
 */
export const CPU_ACTIVE_SHARE = 0.02;
/** The shortest span a CPU reading is judged over. */
const CPU_SAMPLE_MIN_MS = 2000;

/** Environments reconciled at the same time by one host. */
const RECONCILE_LANES = 6;

function specOf(row: EnvironmentRow): VmSpec {
  return { id: row.id, cpus: Number(row.cpus), memoryMib: Number(row.memory_mib), diskGib: Number(row.disk_gib) };
}

function surfaceHash(s: Surface): string {
  const h = createHash('sha256');
  h.update(JSON.stringify([s.env, Object.keys(s.files).sort(), s.connections, s.caPem]));
  for (const k of Object.keys(s.files).sort()) h.update(s.files[k]!);
  return h.digest('hex');
}

/**
 * One placement: inside one transaction, lock the host's row, sum what its environments
 * hold, and claim the environment only if it fits (and nobody else placed it meanwhile).
 * Two placements on one host serialize on the row lock, so the host is never overbooked.
 */
export async function placeOn(db: Db, runtime: RuntimeState, hostId: string, env: Pick<EnvironmentRow, 'id' | 'cpus' | 'base_memory_mib'>): Promise<boolean> {
  return withTx(db, async (trx) => {
    const host = await hostsStore.getForUpdate(trx, hostId);
    // A draining host takes nothing new (read under the row lock, like its capacity).
    if (!host || host.status !== 'online' || isDraining(host)) return false;
    const held = await runtime.heldOn(trx, hostId);
    if (held.cpus + Number(env.cpus) > Number(host.cpus) || held.memoryMib + Number(env.base_memory_mib) > Number(host.memory_mib)) return false;
    return (await runtime.claim(trx, env.id, hostId)) !== null;
  });
}

export function createHostAgent(deps: HostAgentDeps) {
  const { db, clock, log, driver, runtime, hostId } = deps;
  const pollMs = deps.pollMs ?? 500;
  const heartbeatMs = deps.heartbeatMs ?? 5000;
  const surfaceMs = deps.surfaceMs ?? 2000;
  /** One operation per environment at a time. */
  const busy = new Map<string, Promise<void>>();
  const applied = new Map<string, string>();
  /** When each VM was started (a VM that dies at once has failed, not stopped). */
  const startedAt = new Map<string, number>();
  /** The resources each VM was last given (cpus/memory_mib/disk_gib; a change while it exists is a resize). */
  const given = new Map<string, string>();
  const resourcesKey = (row: EnvironmentRow): string => `${Number(row.cpus)}/${Number(row.memory_mib)}/${Number(row.disk_gib)}`;
  const stateListeners = new Set<() => void>();
  let timer: NodeJS.Timeout | null = null;
  let again = false;
  let closed = false;
  let lastHeartbeat = 0;
  let lastSurface = 0;
  let lastCpuSample = 0;
  const cpuSampleMs = deps.cpuSampleMs ?? 5000;
  /** Last CPU reading per VM: [cpu µs, wall ms]. */
  const cpuSeen = new Map<string, [number, number]>();

  function emitState(): void {
    for (const l of stateListeners) l();
  }

  async function register(): Promise<void> {
    const now = clock.nowMs();
    const existing = await hostsStore.get(db, hostId);
    const row: HostRow = {
      id: hostId,
      name: deps.name,
      driver: driver.name,
      cpus: deps.capacity.cpus,
      memory_mib: deps.capacity.memoryMib,
      capabilities: toJson(driver.capabilities()),
      status: 'online',
      started_at: now,
      last_heartbeat_at: now,
      created_at: existing?.created_at ?? now,
      endpoint: deps.endpoint?.() ?? null,
    };
    await hostsStore.upsert(db, row);
    lastHeartbeat = performance.now();
  }

  async function heartbeat(): Promise<void> {
    await hostsStore.heartbeat(db, hostId, clock.nowMs());
    lastHeartbeat = performance.now();
  }

  /**
   * After a restart of this host: the process sandbox's VMs died with the previous process
   * (and memory cannot be kept across it: no CRIU on this kernel), so what was running or
   * suspended is now stopped, with an event that says why; leftover cgroups are killed.
   */
  async function recover(): Promise<void> {
    for (const id of driver.leftovers()) {
      await driver.stop(id).catch((err) => log.warn({ err, environment_id: id }, 'leftover sandbox could not be stopped'));
    }
    for (const row of await runtime.onHost(hostId)) {
      if (driver.status(row.id) !== 'absent') continue;
      if (row.state === 'running' || row.state === 'suspended') {
        await runtime.report(row.id, 'stopped', 'stopped', {
          reason: 'host_restarted',
          message: row.state === 'suspended'
            ? 'the host restarted; a process sandbox cannot keep memory across a host restart, so the suspended environment is stopped (its data disk is kept)'
            : 'the host restarted; the environment\'s processes ended with it (its data disk is kept)',
        });
      }
    }
  }

  /** Places waiting environments on this host while it has room. */
  async function place(): Promise<void> {
    for (const env of await runtime.waitingForHost(20)) {
      if (await placeOn(db, runtime, hostId, env)) log.info({ environment_id: env.id, host_id: hostId }, 'environment placed');
    }
  }

  function serialized(id: string, fn: () => Promise<void>): Promise<void> {
    const prev = busy.get(id) ?? Promise.resolve();
    const next = prev.then(fn, fn).finally(() => {
      if (busy.get(id) === next) busy.delete(id);
    });
    busy.set(id, next);
    return next;
  }

  async function surfaceOrEmpty(id: string): Promise<Surface> {
    return (await deps.surfaceFor(id)) ?? { env: {}, files: {}, connections: {}, caPem: '' };
  }

  async function startVm(row: EnvironmentRow, from: string): Promise<void> {
    const surface = await surfaceOrEmpty(row.id);
    try {
      await driver.start(specOf(row), surface);
      given.set(row.id, resourcesKey(row));
      applied.set(row.id, surfaceHash(surface));
      startedAt.set(row.id, performance.now());
      // A first CPU reading, so the next sample can tell a busy VM from an idle one.
      const { cpuUsec } = await driver.stats(row.id);
      if (cpuUsec != null) cpuSeen.set(row.id, [cpuUsec, performance.now()]);
      await runtime.report(row.id, 'running', 'running', { from });
    } catch (err) {
      const reason = err instanceof DriverError ? err.message : 'the VM could not be started';
      log.warn({ err, environment_id: row.id }, 'environment failed to start');
      await runtime.report(row.id, 'failed', 'failed', { reason });
    }
  }

  async function reconcileOne(id: string): Promise<void> {
    const row = await runtime.byId(id);
    if (!row || row.host_id !== hostId || row.state === 'destroyed') return;
    const vm = driver.status(id);
    switch (row.desired_state) {
      case 'running':
        if (row.state === 'failed') return; // stays failed until destroyed (its reason is in the events)
        if (vm === 'absent') await startVm(row, row.state);
        else if (vm === 'suspended') {
          await driver.resume(id);
          const { cpuUsec } = await driver.stats(id);
          if (cpuUsec != null) cpuSeen.set(id, [cpuUsec, performance.now()]);
          await runtime.report(id, 'running', 'resumed', {});
        } else if (row.state !== 'running') await runtime.report(id, 'running', 'running', { from: row.state });
        return;
      case 'suspended':
        if (vm === 'running') {
          await driver.suspend(id);
          await runtime.report(id, 'suspended', 'suspended', {});
        } else if (vm === 'absent' && (row.state === 'running' || row.state === 'suspended')) {
          await runtime.report(id, 'stopped', 'stopped', { reason: 'vm_gone' });
        } else if (vm === 'suspended' && row.state !== 'suspended') await runtime.report(id, 'suspended', null);
        return;
      case 'stopped':
        if (vm !== 'absent') {
          await driver.stop(id);
          startedAt.delete(id);
          await runtime.report(id, 'stopped', 'stopped', {});
        } else if (row.state === 'running' || row.state === 'suspended' || row.state === 'pending') await runtime.report(id, 'stopped', 'stopped', {});
        return;
      case 'destroyed':
        await driver.destroy(id);
        applied.delete(id);
        given.delete(id);
        startedAt.delete(id);
        await runtime.report(id, 'destroyed', 'destroyed', {});
        return;
    }
  }

  /** An agent's keep-awake lasts while the process that asked for it lives. */
  let lastHoldCheck = 0;
  async function checkHolds(rows: EnvironmentRow[]): Promise<void> {
    lastHoldCheck = performance.now();
    if (!deps.keepAwakes) return;
    const held = await deps.keepAwakes.held(rows.map((r) => r.id));
    const ended = new Map<string, string[]>();
    for (const h of held) {
      if (h.pid != null && h.pid_start != null && alive({ pid: h.pid, start: h.pid_start })) continue;
      ended.set(h.environment_id, [...(ended.get(h.environment_id) ?? []), h.id]);
    }
    for (const [env, ids] of ended) await deps.keepAwakes.release(env, 'process_exited', ids);
  }

  /** VMs that used CPU since the last reading count as active (CPU_ACTIVE_SHARE). */
  async function sampleActivity(rows?: EnvironmentRow[]): Promise<string[]> {
    lastCpuSample = performance.now();
    const list = rows ?? (await runtime.onHost(hostId));
    const active: string[] = [];
    for (const row of list) {
      if (driver.status(row.id) !== 'running') {
        cpuSeen.delete(row.id);
        continue;
      }
      const { cpuUsec } = await driver.stats(row.id);
      if (cpuUsec == null) continue;
      const now = performance.now();
      const prev = cpuSeen.get(row.id);
      // Under 2 s is too short to judge (a start's last milliseconds would look busy):
      // the reading waits for a longer span.
      if (prev && now - prev[1] < CPU_SAMPLE_MIN_MS) continue;
      cpuSeen.set(row.id, [cpuUsec, now]);
      if (prev && (cpuUsec - prev[0]) / ((now - prev[1]) * 1000) >= CPU_ACTIVE_SHARE) active.push(row.id);
    }
    await runtime.cpuActive(active);
    return active;
  }

  /** Resources changed while the VM exists (PATCH .../resources): the driver applies them now, where it can (process: cgroup limits at once, the disk grown online or at its next start). */
  async function applyResources(rows: EnvironmentRow[]): Promise<void> {
    if (!driver.resize) return;
    for (const row of rows) {
      const had = given.get(row.id);
      if (had === undefined || had === resourcesKey(row) || driver.status(row.id) === 'absent') continue;
      // Tried once per change: a refusal is in the log, not retried every tick.
      given.set(row.id, resourcesKey(row));
      await serialized(row.id, () => driver.resize!(specOf(row))).catch((err) => log.warn({ err, environment_id: row.id }, 'the resources could not be applied'));
    }
  }

  /** The surface whose refresh last failed, by environment (its warning is logged once). */
  const surfaceFailed = new Map<string, string | null>();
  async function refreshSurfaces(rows: EnvironmentRow[]): Promise<void> {
    for (const row of rows) {
      if (driver.status(row.id) === 'absent' || row.desired_state === 'destroyed') continue;
      // One environment's failure is its own: it stopped the refresh of every environment
      // after it on the host, each tick (a fourth review).
      let h: string | null = null;
      try {
        const s = await deps.surfaceFor(row.id);
        if (!s) continue;
        h = surfaceHash(s);
        if (applied.get(row.id) === h) continue;
        const hash = h;
        await serialized(row.id, async () => {
          await driver.applySurface(row.id, s);
          applied.set(row.id, hash);
        });
      } catch (err) {
        // Said once per surface, not every tick.
        if (surfaceFailed.get(row.id) !== h) log.warn({ err, environment_id: row.id }, 'the environment\'s /run/service could not be refreshed');
        surfaceFailed.set(row.id, h);
      }
    }
  }

  /** One pass (placement, reconcile, activity, surfaces); a call during a pass gets that pass, extended by one more. */
  let current: Promise<void> | null = null;
  function tick(): Promise<void> {
    if (current) {
      again = true;
      return current;
    }
    current = (async () => {
      try {
        do {
          again = false;
          if (performance.now() - lastHeartbeat >= heartbeatMs) await heartbeat();
          await place();
          const rows = await runtime.onHost(hostId);
          // A few at a time: 200 environments created by one batch must not start 200
          // sandboxes at once on a 2-core host (each start would time out).
          const work = rows.filter((r) => needsWork(r));
          const lanes = Array.from({ length: Math.min(RECONCILE_LANES, work.length) }, async () => {
            for (let r = work.shift(); r; r = work.shift()) {
              const row = r;
              await serialized(row.id, () => reconcileOne(row.id)).catch((err) => {
                log.error({ err, environment_id: row.id }, 'reconcile failed');
              });
            }
          });
          await Promise.all(lanes);
          await applyResources(rows);
          if (performance.now() - lastCpuSample >= cpuSampleMs) await sampleActivity(rows);
          if (performance.now() - lastHoldCheck >= 1000) await checkHolds(rows);
          if (performance.now() - lastSurface >= surfaceMs) {
            lastSurface = performance.now();
            await refreshSurfaces(rows);
          }
          emitState();
        } while (again && !closed);
      } catch (err) {
        log.error({ err }, 'host agent tick failed');
      } finally {
        current = null;
      }
    })();
    return current;
  }

  function needsWork(r: EnvironmentRow): boolean {
    const vm = driver.status(r.id);
    switch (r.desired_state) {
      case 'running': return r.state !== 'failed' && (vm !== 'running' || r.state !== 'running');
      case 'suspended': return vm === 'running' || (vm === 'absent' && (r.state === 'running' || r.state === 'suspended')) || (vm === 'suspended' && r.state !== 'suspended');
      case 'stopped': return vm !== 'absent' || r.state === 'running' || r.state === 'suspended' || r.state === 'pending';
      case 'destroyed': return true;
    }
    return false;
  }

  function schedule(): void {
    if (closed) return;
    timer = setTimeout(async () => {
      await tick();
      schedule();
    }, pollMs);
    timer.unref?.();
  }

  driver.onExit((id, info) => {
    const started = startedAt.get(id);
    startedAt.delete(id);
    applied.delete(id);
    void serialized(id, async () => {
      // Dead within 2 s of its start: the VM cannot run (else a restart would loop).
      if (started !== undefined && performance.now() - started < 2000) {
        await runtime.report(id, 'failed', 'failed', { reason: `the VM exited right after it started (code ${info.code ?? info.signal})` });
      } else {
        await runtime.report(id, 'stopped', 'stopped', { reason: 'vm_exited', exit_code: info.code, signal: info.signal });
      }
    }).then(() => notify());
  });

  /** Something changed in this process: act now instead of at the next poll. */
  function notify(): void {
    if (closed) return;
    setImmediate(() => void tick());
  }

  async function start(): Promise<void> {
    await register();
    await recover();
    await tick();
    schedule();
  }

  /** What close() waits on (a stop that hangs says where: the service's stopStep()). */
  let closeStep: string | null = null;

  async function close(): Promise<void> {
    closed = true;
    if (timer) clearTimeout(timer);
    closeStep = 'the pass under way';
    if (current) await current;
    closeStep = `operations on ${[...busy.keys()].join(', ') || 'nothing'}`;
    await Promise.allSettled([...busy.values()]);
    closeStep = 'the driver';
    await driver.close();
    closeStep = 'marking the host offline';
    await hostsStore.markOffline(db, hostId).catch(() => {});
    closeStep = null;
  }

  /** Waits for the next state change this agent makes (or the timeout). */
  function nextChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done(): void {
        clearTimeout(t);
        stateListeners.delete(done);
        resolve();
      }
      stateListeners.add(done);
    });
  }

  function exec(id: string, req: ExecRequest): Promise<ExecResult> {
    return driver.exec(id, req);
  }

  function isRunning(id: string): boolean {
    return driver.status(id) === 'running';
  }

  return {
    hostId,
    driver,
    start,
    close,
    closeStep: () => closeStep,
    notify,
    heartbeat,
    nextChange,
    exec,
    isRunning,
    readFile: (id: string, path: string, max: number) => driver.readFile(id, path, max),
    writeFile: (id: string, path: string, data: Buffer) => driver.writeFile(id, path, data),
    /** For tests and the benchmark: one pass now. */
    tick,
    /** Milliseconds since this host last registered or heartbeated in the store (Infinity before it did, or once closed): readiness. */
    heartbeatAgeMs: () => (lastHeartbeat === 0 || closed ? Infinity : performance.now() - lastHeartbeat),
    heartbeatMs,
    /** Reads CPU use now (the test clock's advance does, before the ladder runs). */
    sampleActivity: () => sampleActivity(),
    /** Ends keep-awakes whose process is gone, now. */
    checkHolds: async () => checkHolds(await runtime.onHost(hostId)),
  };
}

export type HostAgent = ReturnType<typeof createHostAgent>;
