import { existsSync, writeFileSync } from 'node:fs';
import { cpus, freemem, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import type { Logger } from '../lib/log.js';
import { allocateUid } from '../lib/processes.js';
import type { EnvBrowser } from './env-browser.js';

/**
 * Browsers started ahead for environments' first leases (issue 29, item 3), so that a first
 * lease does not wait for a browser to start (~330 ms of bubblewrap and Chromium, ~60 ms of
 * target discovery). Following the design constraints of docs/performance.md ("The browser
 * session lifecycle"), a slot never serves two environments:
 *
 * - **uid**: each slot runs as a host uid of its own, allocated from a range apart from the
 *   environments' and their browsers' (never derived from an environment id), never one any
 *   live process has (checked in /proc) nor one another live slot holds;
 * - **one-shot**: `take` removes a slot from the pool for good; a claimed browser is its
 *   environment's, stopped like one started for it (after its keep-warm, or with the
 *   environment), never returned;
 * - **cgroup**: until its claim a slot runs in a cgroup of its own (the pool's budget: one
 *   CPU, 1 GiB); at the claim it is frozen, every process is moved into the environment's
 *   browser cgroup, and thawed: from then on what it allocates is charged to the environment.
 *   What it held before (~170 MiB) stays charged to the pool's side: cgroups do not move
 *   charges (v2 never, v1 only with the deprecated move_charge_at_immigrate), so the host
 *   accounts for it;
 * - **network identity**: its proxy socket refuses every connection until the claim binds it
 *   to the environment, once (the broker asks `environmentId`);
 * - **state**: a fresh staging directory and a profile on its own tmpfs (browser-sandbox.ts);
 *   nothing opened before the claim but Chromium's start page and the broker's spare context
 *   with its about:blank page (env-browser.ts, Spare), which loads nothing;
 * - **refill**: from the host's first browser lease on (a host, or a test, that never runs a
 *   browser holds none), one slot at a time, when the host is idle (half its CPU idle over
 *   the last second, or 10 s after the pool fell short whatever the load) and its memory
 *   allows (a slot's measured size leaves a quarter of the host's memory available).
 *
 * An empty pool (size 0, or all taken) is the cold path: the environment's browser starts
 * within its first lease, as before.
 */

/** Slot uids: a range of their own (environments: 200 000–999 999; their own browsers: 1 100 000–1 899 999). */
export const SLOT_UID_BASE = 1_900_000;
export const SLOT_UID_RANGE = 100_000;

/** A slot's cgroup limits until its claim (the pool's budget, not any environment's). */
const SLOT_LIMITS = { cpus: 1, memoryMib: 1024, pidsMax: 1024 };
/** How long a short pool waits for an idle host before it refills anyway. */
const REFILL_AT_THE_LATEST_MS = 10_000;
/** A slot's size until one was measured (an idle browser with its spare page: ~200 MiB of its own). */
const ASSUMED_SLOT_BYTES = 256 * 1024 * 1024;

/** The cgroups slots run in before their claim (hosts/cgroups.ts's Cgroups, on a tree of the pool's own). */
export interface SlotCgroups {
  readonly support: { layout: 'v2' | 'hybrid' | 'none'; freeze: boolean };
  create(name: string, limits: { cpus: number; memoryMib: number; pidsMax: number }): void;
  procsFiles(name: string): string[];
  pids(name: string): number[];
  freeze(name: string, frozen: boolean): Promise<boolean>;
  kill(name: string): Promise<void>;
  remove(name: string): void;
  stats(name: string): { memoryBytes: number | null };
}

export interface PoolSlot {
  /** Its cgroup's name in the pool's tree. */
  readonly name: string;
  readonly uid: number;
  readonly browser: EnvBrowser;
  /** The environment it serves: null until the claim, then set once. */
  environmentId: string | null;
}

export interface BrowserPoolOptions {
  size: number;
  /** Null where the host has no cgroups (nothing to move at a claim). */
  cgroups: SlotCgroups | null;
  log: Logger;
  /** Starts a browser as `uid` in these cgroup.procs files; its proxy socket serves `environment()` as that environment, or refuses while it is null. */
  launch(uid: number, cgroupProcs: string[], environment: () => string | null): Promise<EnvBrowser>;
}

/** A uid of the slot range that no live process has and no live slot holds. */
export function allocateSlotUid(held: Set<number>): number {
  return allocateUid(held, SLOT_UID_BASE, SLOT_UID_RANGE);
}

/**
 * Moves every process of a (frozen) slot cgroup into the environment's: in each v1 tree
 * first and the v2 tree last, because a process is thawed as it lands in an unfrozen v2
 * cgroup, and a child it forks then inherits every membership it has at that moment.
 */
function moveFrozen(cg: SlotCgroups, name: string, to: string[]): void {
  const freezes = (procs: string): boolean => existsSync(join(dirname(procs), 'cgroup.freeze'));
  const ordered = [...to.filter((f) => !freezes(f)), ...to.filter(freezes)];
  for (let round = 0; round < 5; round++) {
    const pids = cg.pids(name);
    if (!pids.length) return;
    for (const pid of pids) {
      for (const procs of ordered) {
        try {
          writeFileSync(procs, String(pid));
        } catch (err) {
          // A process that ended meanwhile has nothing to move.
          if (existsSync(`/proc/${pid}`)) throw err;
        }
      }
    }
  }
  if (cg.pids(name).length) throw new Error('processes are left in the slot\'s cgroup');
}

export class BrowserPool {
  readonly #ready: PoolSlot[] = [];
  /** Uids of every slot whose browser is alive (in the pool or claimed). */
  readonly #held = new Set<number>();
  /** The slot being started, if one is (one at a time). */
  #starting: Promise<void> | null = null;
  /** Whether this host runs browsers (it had a lease): the pool fills from then on. */
  #wanted = false;
  #closed = false;
  /** When the pool last fell short of its size (a take, a slot's end), for REFILL_AT_THE_LATEST_MS. */
  #shortSince = 0;
  #cpuSample = cpuTimes();
  #slotBytes = ASSUMED_SLOT_BYTES;
  readonly #timer: NodeJS.Timeout;

  constructor(private readonly opts: BrowserPoolOptions) {
    this.#timer = setInterval(() => this.#tick(), 1000);
    this.#timer.unref();
  }

  /** The host runs browsers (a lease came): the pool fills from now on. */
  want(): void {
    if (this.#wanted) return;
    this.#wanted = true;
    this.#shortSince = Date.now();
  }

  get size(): number {
    return this.opts.size;
  }

  /** Slots ready now. */
  get ready(): number {
    return this.#ready.length;
  }

  /** A ready slot, out of the pool for good (it serves one environment, ever), or null: the cold path. */
  take(): PoolSlot | null {
    for (let s = this.#ready.shift(); s; s = this.#ready.shift()) {
      this.#short();
      if (!s.browser.alive) continue;
      // What an idle slot holds, settled: the size the memory check counts with.
      const measured = this.#cgroups?.stats(s.name).memoryBytes;
      if (measured) this.#slotBytes = measured;
      return s;
    }
    return null;
  }

  /**
   * Makes a taken slot the environment's: its processes frozen, moved into the
   * environment's browser cgroup (the cgroup.procs files `procsFor` makes) and thawed, then
   * its proxy identity bound, once. Throws when any of it fails; the caller kills the slot
   * (never hands it out).
   */
  async claim(slot: PoolSlot, environmentId: string, procsFor: () => Promise<string[]>): Promise<void> {
    if (slot.environmentId !== null) throw new Error('the slot was claimed before');
    const cg = this.#cgroups;
    if (cg) {
      if (!(await cg.freeze(slot.name, true))) throw new Error('the slot could not be frozen');
      try {
        for (let attempt = 1; ; attempt++) {
          try {
            moveFrozen(cg, slot.name, await procsFor());
            break;
          } catch (err) {
            // The environment's directories went meanwhile (its own start on this host makes
            // them afresh; a cgroup with a process in it is never removed): made again, the
            // move goes on (a process already moved is moved again, a no-op).
            if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt === 3) throw err;
          }
        }
      } finally {
        await cg.freeze(slot.name, false);
      }
      cg.remove(slot.name);
    }
    slot.environmentId = environmentId;
    this.opts.log.info({ uid: slot.uid, environment_id: environmentId }, 'a browser pool slot was claimed');
  }

  #short(): void {
    if (this.#ready.length < this.opts.size && !this.#shortSince) this.#shortSince = Date.now();
  }

  /** Half the host's CPU idle since the last tick. */
  #idle(): boolean {
    const now = cpuTimes();
    const busy = now.busy - this.#cpuSample.busy;
    const all = now.all - this.#cpuSample.all;
    this.#cpuSample = now;
    return all > 0 && busy / all <= 0.5;
  }

  #tick(): void {
    const idle = this.#idle();
    if (!this.#wanted || this.#closed || this.#starting || this.#ready.length >= this.opts.size) return;
    if (!idle && Date.now() - this.#shortSince < REFILL_AT_THE_LATEST_MS) return;
    // A quarter of the host's memory stays available after one more slot.
    if (freemem() - this.#slotBytes < totalmem() / 4) return;
    this.#starting = this.#startSlot().finally(() => {
      this.#starting = null;
    });
  }

  get #cgroups(): SlotCgroups | null {
    return this.opts.cgroups?.support.layout === 'none' ? null : this.opts.cgroups;
  }

  async #startSlot(): Promise<void> {
    const cg = this.#cgroups;
    const uid = allocateSlotUid(this.#held);
    const name = `slot-${uid}`;
    this.#held.add(uid);
    let slot: PoolSlot | null = null;
    try {
      if (cg) cg.create(name, SLOT_LIMITS);
      const browser = await this.opts.launch(uid, cg ? cg.procsFiles(name) : [], () => slot?.environmentId ?? null);
      slot = { name, uid, browser, environmentId: null };
    } catch (err) {
      this.#held.delete(uid);
      if (cg) {
        await cg.kill(name);
        cg.remove(name);
      }
      this.opts.log.warn({ err }, 'a browser pool slot could not be started');
      return;
    }
    const started = slot;
    void started.browser.sandbox.exited.then(async () => {
      // Out of the pool if it was still there; its uid free once none of its processes lives.
      const at = this.#ready.indexOf(started);
      if (at >= 0) {
        this.#ready.splice(at, 1);
        this.#short();
      }
      if (cg && started.environmentId === null) {
        await cg.kill(name);
        cg.remove(name);
      }
      this.#held.delete(uid);
    });
    if (this.#closed) return void slot.browser.stop();
    this.#ready.push(slot);
    if (this.#ready.length >= this.opts.size) this.#shortSince = 0;
  }

  async shutdown(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    // A slot still starting is stopped as it comes up (#startSlot checks #closed).
    await this.#starting;
    await Promise.all(this.#ready.splice(0).map((s) => s.browser.stop()));
  }
}

/** Busy and total CPU time of the host so far (ms, all cores). */
function cpuTimes(): { busy: number; all: number } {
  let busy = 0;
  let all = 0;
  for (const c of cpus()) {
    const t = c.times;
    busy += t.user + t.nice + t.sys + t.irq;
    all += t.user + t.nice + t.sys + t.irq + t.idle;
  }
  return { busy, all };
}
