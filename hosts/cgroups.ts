import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The cgroups an environment's process tree lives in (issue 12, item 2 and 4).
 *
 * Two layouts exist in the wild and this machine has the second:
 * - pure cgroup v2 (`/sys/fs/cgroup` is cgroup2): memory, cpu and pids limits, freeze and
 *   kill all in one directory per environment;
 * - hybrid (cgroup v1 controllers under `/sys/fs/cgroup/<controller>`, a controller-less
 *   cgroup2 at `/sys/fs/cgroup/unified`): limits from v1 `memory`, `cpu` and `pids`,
 *   freeze (`cgroup.freeze`) and kill (`cgroup.kill`) from the v2 tree, which has those
 *   core files whatever controllers it carries.
 *
 * Each environment gets a directory `<own cgroup>/gateway-<host>/<environment id>` in every
 * tree it uses (under this process's own cgroup, so whatever limits the service itself
 * runs under still cover its environments). Each exec gets a child `x<n>` in the v2 tree,
 * so a timeout kills exactly that command's tree, background children included.
 *
 * What could not be set up is reported, never pretended (`CgroupSupport`).
 */
export interface CgroupSupport {
  /** 'v2' | 'hybrid' | 'none'. */
  layout: 'v2' | 'hybrid' | 'none';
  memory: boolean;
  cpu: boolean;
  pids: boolean;
  /** Atomic freeze of the whole tree (cgroup.freeze, or the v1 freezer). */
  freeze: boolean;
  /** Atomic kill of the whole tree (cgroup.kill). */
  kill: boolean;
  /** Why a part is missing, for the host's capabilities and the start-up warning. */
  missing: string[];
}

export interface EnvLimits {
  cpus: number;
  memoryMib: number;
  /** Processes and threads in the tree (a fork bomb stops here). */
  pidsMax: number;
}


function read(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

function write(path: string, value: string): boolean {
  try {
    writeFileSync(path, value);
    return true;
  } catch {
    return false;
  }
}

/** This process's cgroup path per hierarchy ('' for the v2 tree), from /proc/self/cgroup. */
function ownPaths(): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of (read('/proc/self/cgroup') ?? '').split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    for (const c of m[1]!.split(',')) out.set(c, m[2]!);
  }
  return out;
}

function isCgroup2(dir: string): boolean {
  return existsSync(join(dir, 'cgroup.procs')) && existsSync(join(dir, 'cgroup.controllers'));
}

/**
 * cgroup2's `favordynmods` (issue 29). Moving a process between cgroups, v1 or v2, takes a
 * global lock whose writer waits for an RCU grace period: ~8–12 ms here for a move that
 * follows no other (measured; back to back they cost nothing). Every start and every exec
 * moves a process, so each paid it. With `favordynmods` on the cgroup2 root the lock's
 * readers (fork, exit) take a slightly slower path instead and a move costs ~0.3 ms: the
 * kernel's option for hosts that move processes often, as this one does. Made so by a
 * remount of the cgroup2 tree under `mount` (`/sys/fs/cgroup` or its `unified`), keeping
 * its other options; whether it holds is read back from the mount table.
 */
export function favorDynmods(mount = '/sys/fs/cgroup'): { on: boolean; why: string | null } {
  const at = [mount, join(mount, 'unified')].find((p) => isCgroup2(p));
  if (!at) return { on: false, why: 'no cgroup2 tree is mounted' };
  const has = (): boolean => (read('/proc/self/mountinfo') ?? '').split('\n').some((l) => {
    const [pre, post] = l.split(' - ');
    return pre?.split(' ')[4] === at && post?.split(' ')[0] === 'cgroup2' && (post.split(' ')[2] ?? '').split(',').includes('favordynmods');
  });
  if (has()) return { on: true, why: null };
  const r = spawnSync('/usr/bin/mount', ['-o', 'remount,favordynmods', '--', at], { encoding: 'utf8', env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' }, timeout: 10_000 });
  if (has()) return { on: true, why: null };
  return { on: false, why: (r.stderr || r.error?.message || 'not taken').trim().slice(0, 200) };
}

export class Cgroups {
  readonly support: CgroupSupport;
  /** Base directory per tree: 'unified' (v2) and v1 controller names. */
  readonly #bases = new Map<string, string>();

  /** `mount`: where the cgroup trees are mounted (GATEWAY_CGROUP_ROOT; tests point it at an empty directory). */
  constructor(readonly tag: string, mount = '/sys/fs/cgroup') {
    const V2_ROOT = mount;
    const missing: string[] = [];
    const own = ownPaths();
    let layout: CgroupSupport['layout'] = 'none';
    let v2: string | null = null;
    if (isCgroup2(V2_ROOT)) {
      layout = 'v2';
      v2 = V2_ROOT;
    } else if (isCgroup2(join(V2_ROOT, 'unified'))) {
      layout = 'hybrid';
      v2 = join(V2_ROOT, 'unified');
    }
    let v2Controllers = new Set<string>();
    if (v2) {
      const base = join(v2, own.get('') ?? '/', `gateway-${tag}`);
      if (this.#mk(base)) {
        this.#bases.set('unified', base);
        if (layout === 'v2') {
          // Controllers reach our directory only when every ancestor from our own cgroup
          // down enables them; our own cgroup can, only if no process sits in it (the v2
          // "no internal processes" rule). Whatever could not be enabled is reported.
          const parent = join(base, '..');
          for (const c of ['memory', 'cpu', 'pids']) {
            write(join(parent, 'cgroup.subtree_control'), `+${c}`);
            write(join(base, 'cgroup.subtree_control'), `+${c}`);
          }
          v2Controllers = new Set((read(join(base, 'cgroup.subtree_control')) ?? '').trim().split(/\s+/).filter(Boolean));
        }
      } else {
        missing.push(`the cgroup2 tree at ${v2} is not writable`);
      }
    } else {
      missing.push('no cgroup2 tree is mounted');
    }
    const haveV2 = this.#bases.has('unified');
    const v1 = (c: string): boolean => {
      if (layout !== 'hybrid') return false;
      const mount = join(V2_ROOT, c);
      if (!existsSync(join(mount, 'cgroup.procs')) || existsSync(join(mount, 'cgroup.controllers'))) return false;
      const base = join(mount, own.get(c) ?? '/', `gateway-${tag}`);
      if (!this.#mk(base)) return false;
      this.#bases.set(c, base);
      return true;
    };
    const memory = v2Controllers.has('memory') || v1('memory');
    const cpu = v2Controllers.has('cpu') || v1('cpu');
    const pids = v2Controllers.has('pids') || v1('pids');
    const freeze = haveV2 && existsSync(join(this.#bases.get('unified')!, 'cgroup.freeze'));
    const kill = haveV2 && existsSync(join(this.#bases.get('unified')!, 'cgroup.kill'));
    if (!memory) missing.push('no memory controller: memory_mib is not enforced');
    if (!cpu) missing.push('no cpu controller: cpus is not enforced');
    if (!pids) missing.push('no pids controller: the process count is not limited');
    if (!freeze) missing.push('no cgroup.freeze: suspend stops processes one by one (SIGSTOP)');
    if (!kill) missing.push('no cgroup.kill: stop kills processes one by one');
    this.support = { layout: haveV2 || memory ? layout : 'none', memory, cpu, pids, freeze, kill, missing };
  }

  #mk(dir: string): boolean {
    try {
      mkdirSync(dir, { recursive: true });
      return existsSync(join(dir, 'cgroup.procs'));
    } catch {
      return false;
    }
  }

  #dirs(envId: string, exec?: string): string[] {
    const out: string[] = [];
    for (const [tree, base] of this.#bases) {
      if (tree === 'unified') out.push(join(base, envId, ...(exec ? [exec] : [])));
      else out.push(join(base, envId));
    }
    return out;
  }

  /** Creates the environment's directories with its limits. */
  create(envId: string, limits: EnvLimits): void {
    for (const dir of this.#dirs(envId)) mkdirSync(dir, { recursive: true });
    const memBytes = String(limits.memoryMib * 1024 * 1024);
    const quota = Math.round(limits.cpus * 100_000);
    const unified = this.#bases.get('unified');
    if (this.support.layout === 'v2' && unified) {
      const dir = join(unified, envId);
      if (this.support.memory) {
        write(join(dir, 'memory.max'), memBytes);
        write(join(dir, 'memory.swap.max'), '0');
      }
      if (this.support.cpu) write(join(dir, 'cpu.max'), `${quota} 100000`);
      if (this.support.pids) write(join(dir, 'pids.max'), String(limits.pidsMax));
      return;
    }
    const mem = this.#bases.get('memory');
    if (mem) {
      // Without memsw, the tree could swap past its ceiling (where swap accounting exists).
      // v1 keeps limit <= memsw at every step: raising needs memsw first, lowering the limit
      // first, so the pair is written memsw, limit, memsw (a resources update goes both ways).
      write(join(mem, envId, 'memory.memsw.limit_in_bytes'), memBytes);
      write(join(mem, envId, 'memory.limit_in_bytes'), memBytes);
      write(join(mem, envId, 'memory.memsw.limit_in_bytes'), memBytes);
    }
    const cpu = this.#bases.get('cpu');
    if (cpu) {
      write(join(cpu, envId, 'cpu.cfs_period_us'), '100000');
      write(join(cpu, envId, 'cpu.cfs_quota_us'), String(quota));
      write(join(cpu, envId, 'cpu.shares'), String(512 * limits.cpus));
    }
    const pids = this.#bases.get('pids');
    if (pids) write(join(pids, envId, 'pids.max'), String(limits.pidsMax));
  }

  /**
   * The `cgroup.procs` files a process must write its own pid to, before it execs the
   * sandbox, to be inside the environment's cgroups (and, for an exec, its own child).
   */
  procsFiles(envId: string, exec?: string): string[] {
    if (exec) {
      const unified = this.#bases.get('unified');
      if (unified) mkdirSync(join(unified, envId, exec), { recursive: true });
    }
    return this.#dirs(envId, exec).map((d) => join(d, 'cgroup.procs'));
  }

  /**
   * Where a process enters the environment's cgroups (or one exec's): the cgroup2 directory,
   * for a clone into it (CLONE_INTO_CGROUP: writing a pid into a cgroup2 `cgroup.procs`
   * waits for an RCU grace period, ~15 ms here when nothing else migrated just before), and
   * the v1 `cgroup.procs` files, where a write is cheap.
   */
  entry(envId: string, exec?: string): { unified: string | null; v1Procs: string[] } {
    const unified = this.#bases.get('unified');
    const dir = unified ? join(unified, envId, ...(exec ? [exec] : [])) : null;
    if (dir) mkdirSync(dir, { recursive: true });
    const v1Procs = [...this.#bases].filter(([tree]) => tree !== 'unified').map(([, base]) => join(base, envId, 'cgroup.procs'));
    return { unified: dir, v1Procs };
  }

  /** Pids in the environment's tree (or in one exec's), from the v2 tree, else any v1 one. */
  pids(envId: string, exec?: string): number[] {
    const dirs = this.#dirs(envId, exec);
    const unified = this.#bases.get('unified');
    const pick = unified ? dirs.filter((d) => d.startsWith(unified)) : dirs.slice(0, 1);
    const out = new Set<number>();
    const walk = (dir: string): void => {
      for (const p of (read(join(dir, 'cgroup.procs')) ?? '').split('\n')) if (p) out.add(Number(p));
      try {
        for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) walk(join(dir, e.name));
      } catch { /* gone */ }
    };
    for (const d of pick) walk(d);
    return [...out];
  }

  /** Freezes (true) or thaws (false) the whole tree; resolves once the kernel says it is done. */
  async freeze(envId: string, frozen: boolean): Promise<boolean> {
    const unified = this.#bases.get('unified');
    if (!this.support.freeze || !unified) return false;
    const dir = join(unified, envId);
    if (!write(join(dir, 'cgroup.freeze'), frozen ? '1' : '0')) return false;
    const want = `frozen ${frozen ? 1 : 0}`;
    for (let i = 0; i < 400; i++) {
      if ((read(join(dir, 'cgroup.events')) ?? '').includes(want)) return true;
      await new Promise((r) => setTimeout(r, 5));
    }
    return false;
  }

  /** Kills every process of the tree (or of one exec), and waits until none is left. */
  async kill(envId: string, exec?: string): Promise<void> {
    const unified = this.#bases.get('unified');
    if (this.support.kill && unified) write(join(unified, envId, ...(exec ? [exec] : []), 'cgroup.kill'), '1');
    for (let i = 0; i < 400; i++) {
      const left = this.pids(envId, exec);
      if (left.length === 0) return;
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch { /* already gone */ }
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /**
   * Gives `from`'s cgroups, with their processes, to `to` (which must not exist yet), tree
   * by tree: a v1 hierarchy renames the directory (its processes, their memory charges and
   * its limits go with it at once). cgroup2 refuses a rename: there each process is moved
   * (with favordynmods ~0.3 ms each, else an RCU grace period for the first), read again
   * until `from`'s is empty (a process forked meanwhile lands in `from` and moves in the
   * next round), and `from`'s directory is removed; so every part of the host (the
   * environment's browser joins its cgroups too) finds the environment under its own id.
   * Throws when a process cannot be moved.
   */
  adopt(from: string, to: string): void {
    for (const [tree, base] of this.#bases) {
      const [src, dst] = [join(base, from), join(base, to)];
      if (tree !== 'unified') {
        try {
          renameSync(src, dst);
          continue;
        } catch { /* moved one by one */ }
      }
      mkdirSync(dst, { recursive: true });
      for (let round = 0; ; round++) {
        const pids = (read(join(src, 'cgroup.procs')) ?? '').split('\n').filter(Boolean);
        if (!pids.length) break;
        if (round === 100) throw new Error('the slot\'s cgroup did not empty');
        for (const pid of pids) {
          if (!write(join(dst, 'cgroup.procs'), pid) && existsSync(`/proc/${pid}`)) throw new Error(`a process could not be moved into the environment's cgroup (${tree})`);
        }
      }
      try {
        rmdirSync(src);
      } catch { /* removed with the slot's other leftovers */ }
    }
  }

  /** Removes an exec's directory when its tree is gone (a background child keeps it). */
  removeExec(envId: string, exec: string): void {
    const unified = this.#bases.get('unified');
    if (!unified) return;
    try {
      rmdirSync(join(unified, envId, exec));
    } catch { /* still has processes: removed with the environment */ }
  }

  /** Removes the environment's directories (children first); the tree must be empty. */
  remove(envId: string): void {
    for (const dir of this.#dirs(envId)) {
      try {
        for (const e of readdirSync(dir, { withFileTypes: true })) {
          if (e.isDirectory()) {
            try {
              rmdirSync(join(dir, e.name));
            } catch { /* busy */ }
          }
        }
        rmdirSync(dir);
      } catch { /* absent or busy */ }
    }
  }

  /** Environment ids that have a directory (left over from a previous run of this host). */
  leftovers(): string[] {
    const out = new Set<string>();
    for (const base of this.#bases.values()) {
      try {
        for (const e of readdirSync(base, { withFileTypes: true })) if (e.isDirectory()) out.add(e.name);
      } catch { /* none */ }
    }
    return [...out];
  }

  /** Memory in use by the tree (bytes) and CPU time used (µs), where the kernel reports them. */
  stats(envId: string): { memoryBytes: number | null; cpuUsec: number | null } {
    let memoryBytes: number | null = null;
    let cpuUsec: number | null = null;
    const unified = this.#bases.get('unified');
    if (unified) {
      const m = /usage_usec (\d+)/.exec(read(join(unified, envId, 'cpu.stat')) ?? '');
      if (m) cpuUsec = Number(m[1]);
      const cur = read(join(unified, envId, 'memory.current'));
      if (cur) memoryBytes = Number(cur.trim());
    }
    const mem = this.#bases.get('memory');
    if (memoryBytes == null && mem) {
      const u = read(join(mem, envId, 'memory.usage_in_bytes'));
      if (u) memoryBytes = Number(u.trim());
    }
    return { memoryBytes, cpuUsec };
  }
}
