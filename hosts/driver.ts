/**
 * The seam between the host agent and what runs an environment (ARCHITECTURE.md, Seams):
 * the process sandbox (drivers/process.ts) and the QEMU microVM (drivers/qemu.ts). Nothing
 * above this interface knows which one runs; the driver-agnostic tests run against each.
 *
 * A driver keeps no state in the store: the host agent tells it what to run and reports
 * what it did. Paths in exec and file calls are the VM's own paths.
 */
export interface VmSpec {
  id: string;
  cpus: number;
  memoryMib: number;
  diskGib: number;
}

/** What the agent finds under /run/service and in its processes' environment. */
export interface Surface {
  /** Every variable a process started in the VM gets (platform, configuration, placeholders). */
  env: Record<string, string>;
  /** Configuration files, `/run/service/files/<name>` (read-only). */
  files: Record<string, Buffer>;
  /** Stand-in tokens, `/run/service/connections/<connector>`. */
  connections: Record<string, string>;
  /** The gateway CA (PEM), `/run/service/ca.pem`. */
  caPem: string;
}

export interface ExecRequest {
  command: string[];
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string | Buffer;
  timeoutMs: number;
  /** Bytes kept of stdout and of stderr each; past it the rest is counted, not kept. */
  maxOutputBytes: number;
  /** Streaming: called with each chunk as it comes (output caps apply to the result only). */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  signal?: AbortSignal;
}

/**
 * Output of a streamed exec its reader may leave unread (the API's client, or the node
 * reading a remote host's stream) before the command is killed and its stream cut: the
 * service never holds a command's whole output.
 */
export const EXEC_STREAM_BACKLOG_BYTES = 8 * 1024 * 1024;

export interface ExecResult {
  exitCode: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  durationMs: number;
  timedOut: boolean;
}

export type VmStatus = 'running' | 'suspended' | 'absent';

export interface HostCapabilities {
  driver: string;
  /** The sandbox cannot reach anything but the gateway (no route out of its namespace). */
  network_sealed: boolean;
  /** Its own mount, pid, user, ipc, uts namespaces: none of the host's files or processes. */
  namespaces: boolean;
  cgroup: { layout: string; memory: boolean; cpu: boolean; pids: boolean; freeze: boolean; kill: boolean };
  /** Memory survives a restart of the host (snapshots): false for the process sandbox. */
  memory_across_host_restart: boolean;
  /** disk_gib is a hard quota: writing past it is the agent's ENOSPC, never the host's. */
  disk_quota: boolean;
  /** GATEWAY_RUNTIME_INSECURE=1 let the host start with parts of the isolation missing. */
  insecure: boolean;
  /** What is missing, in words. */
  missing: string[];
}

export class DriverError extends Error {
  constructor(readonly kind: 'start_failed' | 'exec_failed' | 'guest_unavailable' | 'file_not_found' | 'file_path_refused' | 'file_failed', message: string) {
    super(message);
    this.name = 'DriverError';
  }
}

export interface HostDriver {
  readonly name: string;
  capabilities(): HostCapabilities;
  /** Prepares the data disk and state (idempotent; keeps an existing disk). */
  create(spec: VmSpec): Promise<void>;
  /** Boots a fresh VM on the existing data disk. */
  start(spec: VmSpec, surface: Surface): Promise<void>;
  /** Freezes the VM with its memory kept. */
  suspend(id: string): Promise<void>;
  resume(id: string): Promise<void>;
  /** Powers off; the data disk stays. */
  stop(id: string): Promise<void>;
  /** Powers off and deletes the data disk and everything else of the VM. */
  destroy(id: string): Promise<void>;
  status(id: string): VmStatus;
  /**
   * Optional: gives a running VM's data disk the spec's `diskGib` (grown online; never
   * shrunk). The host agent calls it when an environment's disk_gib changes while its VM
   * exists (a stopped one gets its size at its next start). Issue 24, item 4.
   */
  resize?(spec: VmSpec): Promise<void>;
  /** Rewrites /run/service (env, files, connections) without restarting anything. */
  applySurface(id: string, surface: Surface): Promise<void>;
  exec(id: string, req: ExecRequest): Promise<ExecResult>;
  readFile(id: string, path: string, maxBytes: number): Promise<Buffer>;
  writeFile(id: string, path: string, data: Buffer): Promise<{ path: string; size: number }>;
  stats(id: string): Promise<{ memoryBytes: number | null; cpuUsec: number | null }>;
  /** Called when a VM ends without being asked to (its init died, the OOM killer, ...). */
  onExit(listener: (id: string, info: { code: number | null; signal: string | null }) => void): void;
  /** VMs left by a previous run of this host (the process sandbox's die with the service). */
  leftovers(): string[];
  close(): Promise<void>;
}

/** Where the data disk is mounted inside every VM; file paths of the API live under it. */
export const DATA_DISK = '/home/agent';
