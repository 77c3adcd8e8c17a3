import { posix } from 'node:path';
import type { Db } from '../store/db.js';
import { fromJson } from '../store/db.js';
import type { Clock } from '../lib/clock.js';
import { ServiceError } from '../lib/errors.js';
import type { RuntimeState } from '../environments/runtime.service.js';
import type { EnvironmentRow } from '../environments/environments.store.js';
import { hostsStore, isDraining } from './hosts.store.js';
import { DATA_DISK, DriverError, type ExecResult } from './driver.js';
import type { HostHandle } from './rpc.js';
import type { HostRow } from './hosts.store.js';

/**
 * Exec and files (decisions.md; issue 12, item 5): the API's way into an environment.
 * Every call is activity and wakes a suspended or stopped environment, then waits for it:
 * 15 s to be placed on a host, 90 s to be up (service.md, Limits), else 503
 * environment_not_placed / environment_not_running. A host that stopped heartbeating
 * answers 503 host_unavailable at once.
 */
export const EXEC_OUTPUT_MAX_BYTES = 1024 * 1024;
export const FILE_READ_MAX_BYTES = 16 * 1024 * 1024;

export interface ExecInput {
  command: string[];
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string;
  timeout_secs?: number;
}

export interface ExecOutput {
  exit_code: number | null;
  stdout: string;
  stderr: string;
  duration_ms: number;
  /** Beyond decisions.md: output past EXEC_OUTPUT_MAX_BYTES is dropped and flagged. */
  stdout_truncated: boolean;
  stderr_truncated: boolean;
}

export interface RuntimeServiceDeps {
  db: Db;
  clock: Clock;
  runtime: RuntimeState;
  /** The host agents in this process, by host id. */
  agents: () => ReadonlyMap<string, HostHandle>;
  /** A host in another process, reached at its endpoint (hosts/rpc.ts); null when it has none. */
  remote?: (host: HostRow) => HostHandle | null;
  /** The variables every process in the environment starts with. */
  envFor(environmentId: string): Promise<Record<string, string>>;
  placeTimeoutMs?: number;
  runTimeoutMs?: number;
  /** Heartbeats older than this mark a host offline. */
  offlineAfterMs?: number;
}

/**
 * A path on the data disk, as the VM sees it: relative paths are relative to the data
 * disk's root; `..` is refused outright (400), as is anything outside the disk. Symlinks
 * are resolved inside the VM, where one leading out is refused too.
 */
export function diskPath(raw: string): string {
  if (typeof raw !== 'string' || raw.length === 0) throw new ServiceError('invalid_request', 'path is required');
  if (raw.length > 4096 || /[\u0000-\u001f]/.test(raw)) throw new ServiceError('invalid_request', 'path is longer than 4096 characters or holds a control character');
  if (raw.split('/').includes('..')) throw new ServiceError('invalid_request', 'path must not contain ".." segments');
  const abs = posix.normalize(raw.startsWith('/') ? raw : `${DATA_DISK}/${raw}`).replace(/\/+$/, '');
  if (!abs.startsWith(`${DATA_DISK}/`)) throw new ServiceError('invalid_request', `path must be a file on the data disk (${DATA_DISK})`);
  return abs;
}

function driverError(err: unknown): never {
  if (err instanceof DriverError) {
    switch (err.kind) {
      case 'exec_failed': throw new ServiceError('exec_failed', err.message);
      case 'guest_unavailable': throw new ServiceError('guest_unavailable', err.message);
      case 'file_not_found': throw new ServiceError('not_found', 'no such file');
      case 'file_path_refused': throw new ServiceError('invalid_request', err.message);
      case 'file_failed': throw new ServiceError('file_operation_failed', err.message);
      case 'start_failed': throw new ServiceError('environment_failed', err.message);
    }
  }
  throw err;
}

export function createRuntimeService(deps: RuntimeServiceDeps) {
  const { db, clock, runtime } = deps;
  const placeTimeoutMs = deps.placeTimeoutMs ?? 15_000;
  const runTimeoutMs = deps.runTimeoutMs ?? 90_000;
  const offlineAfterMs = deps.offlineAfterMs ?? 30_000;

  /** Records the call as activity (waking the environment) and waits until it runs. */
  async function ready(developerId: string, id: string, call: string): Promise<{ row: EnvironmentRow; agent: HostHandle }> {
    await runtime.activity(developerId, id, call);
    const t0 = performance.now();
    for (;;) {
      const row = await runtime.byId(id);
      if (!row || row.desired_state === 'destroyed') throw new ServiceError('environment_destroyed', 'the environment is destroyed');
      if (row.state === 'failed') throw new ServiceError('environment_failed', `the environment failed: ${row.failure_reason ?? 'its VM could not be started'}`);
      if (row.host_id) {
        // A host in this process is alive by definition (a test clock moved past its last
        // heartbeat does not make it offline); another one is judged by its heartbeat.
        let agent = deps.agents().get(row.host_id) ?? null;
        if (!agent) {
          const host = await hostsStore.get(db, row.host_id);
          if (!host || host.status === 'offline' || clock.nowMs() - Number(host.last_heartbeat_at) > offlineAfterMs) {
            throw new ServiceError('host_unavailable', 'the environment\'s host is offline');
          }
          agent = deps.remote?.(host) ?? null;
          if (!agent) throw new ServiceError('host_unavailable', 'the environment\'s host serves no endpoint this process can reach');
        }
        if (row.state === 'running' && (agent.isRunning(id) ?? true)) return { row, agent };
        if (row.desired_state !== 'running') await runtime.activity(developerId, id, call);
        if (performance.now() - t0 > runTimeoutMs) throw new ServiceError('environment_not_running', `the environment did not start within ${runTimeoutMs / 1000} seconds`);
        agent.notify();
        await agent.nextChange(200);
        continue;
      }
      if (performance.now() - t0 > placeTimeoutMs) throw new ServiceError('environment_not_placed', `no host took the environment within ${placeTimeoutMs / 1000} seconds`);
      const local = [...deps.agents().values()];
      for (const a of local) a.notify();
      if (local[0]) await local[0].nextChange(200);
      else await new Promise((r) => setTimeout(r, 200));
    }
  }

  async function exec(
    developerId: string,
    id: string,
    input: ExecInput,
    stream?: { onOutput(stream: 'stdout' | 'stderr', chunk: Buffer): void; signal?: AbortSignal },
  ): Promise<ExecOutput & { timed_out: boolean }> {
    const { agent } = await ready(developerId, id, 'exec');
    const base = await deps.envFor(id);
    let r: ExecResult;
    try {
      r = await agent.exec(id, {
        command: input.command,
        cwd: input.cwd,
        env: { ...base, ...(input.env ?? {}) },
        stdin: input.stdin,
        timeoutMs: (input.timeout_secs ?? 60) * 1000,
        maxOutputBytes: EXEC_OUTPUT_MAX_BYTES,
        onOutput: stream?.onOutput,
        signal: stream?.signal,
      });
    } catch (err) {
      driverError(err);
    }
    if (r.timedOut && !stream) {
      throw new ServiceError('exec_timeout', `the command did not finish within ${input.timeout_secs ?? 60} seconds; its process tree was killed`);
    }
    return {
      exit_code: r.exitCode ?? (r.signal ? 128 + signalNumber(r.signal) : null),
      stdout: r.stdout.toString('utf8'),
      stderr: r.stderr.toString('utf8'),
      duration_ms: r.durationMs,
      stdout_truncated: r.stdoutTruncated,
      stderr_truncated: r.stderrTruncated,
      timed_out: r.timedOut,
    };
  }

  async function readFile(developerId: string, id: string, rawPath: string): Promise<{ path: string; content: string; encoding: 'base64'; size: number }> {
    const path = diskPath(rawPath);
    const { agent } = await ready(developerId, id, 'file_read');
    try {
      const data = await agent.readFile(id, path, FILE_READ_MAX_BYTES);
      return { path, content: data.toString('base64'), encoding: 'base64', size: data.length };
    } catch (err) {
      driverError(err);
    }
  }

  async function writeFile(developerId: string, id: string, input: { path: string; content: string; encoding?: 'utf8' | 'base64' }): Promise<{ path: string; size: number }> {
    const path = diskPath(input.path);
    const data = Buffer.from(input.content, input.encoding === 'base64' ? 'base64' : 'utf8');
    const { agent } = await ready(developerId, id, 'file_write');
    try {
      return await agent.writeFile(id, path, data);
    } catch (err) {
      driverError(err);
    }
  }

  /** Marks hosts whose heartbeat stopped as offline (a job). */
  async function sweepOfflineHosts(): Promise<string[]> {
    for (const a of deps.agents().values()) await a.heartbeat?.();
    return hostsStore.sweepOffline(db, clock.nowMs() - offlineAfterMs);
  }

  async function listHosts(): Promise<Array<Record<string, unknown>>> {
    return (await hostsStore.list(db)).map((h) => ({
      id: h.id, name: h.name, driver: h.driver, status: h.status, draining: isDraining(h),
      capacity: { cpus: Number(h.cpus), memory_mib: Number(h.memory_mib) },
      capabilities: fromJson(h.capabilities),
      last_heartbeat_at: new Date(Number(h.last_heartbeat_at)).toISOString(),
    }));
  }

  return { exec, readFile, writeFile, sweepOfflineHosts, listHosts };
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };
function signalNumber(sig: string): number {
  return SIGNALS[sig] ?? 0;
}

export type RuntimeService = ReturnType<typeof createRuntimeService>;
