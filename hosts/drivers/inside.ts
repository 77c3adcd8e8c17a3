import { DATA_DISK, DriverError, type ExecRequest, type ExecResult } from '../driver.js';

/**
 * What both drivers do the same way inside an environment: file calls as small shell
 * programs run through the driver's own exec as the agent (so a symlink can only lead to
 * what the agent may read anyway), and the capped collection of a command's output.
 */
const READ_SHIM = `p=$(realpath -e -- "$1" 2>/dev/null) || exit 3; case "$p" in ${DATA_DISK}/*) ;; *) exit 4;; esac; [ -f "$p" ] || exit 5; s=$(stat -c %s -- "$p") || exit 7; [ "$s" -le "$2" ] || exit 6; exec cat -- "$p"`;
const WRITE_SHIM = `p=$(realpath -m -- "$1" 2>/dev/null) || exit 4; case "$p" in ${DATA_DISK}/*) ;; *) exit 4;; esac; [ -d "$p" ] && exit 5; mkdir -p -- "$(dirname -- "$p")" 2>/dev/null || exit 7; cat > "$p" || exit 7; printf '%s' "$p"`;

type Exec = (req: ExecRequest) => Promise<ExecResult>;

async function fileOp(exec: Exec, shim: string, args: string[], input?: Buffer, max = 64 * 1024 * 1024): Promise<{ code: number | null; stdout: Buffer }> {
  const r = await exec({ command: ['/bin/sh', '-c', shim, 'file', ...args], env: { PATH: '/usr/bin:/bin' }, stdin: input, timeoutMs: 60_000, maxOutputBytes: max });
  return { code: r.exitCode, stdout: r.stdout };
}

export async function readFileInside(exec: Exec, path: string, maxBytes: number): Promise<Buffer> {
  const r = await fileOp(exec, READ_SHIM, [path, String(maxBytes)], undefined, maxBytes + 1);
  switch (r.code) {
    case 0: return r.stdout;
    case 3: throw new DriverError('file_not_found', 'no such file');
    case 4: throw new DriverError('file_path_refused', 'the path leads out of the data disk (/home/agent)');
    case 5: throw new DriverError('file_path_refused', 'the path is not a regular file');
    case 6: throw new DriverError('file_path_refused', `the file is larger than ${maxBytes} bytes`);
    default: throw new DriverError('file_failed', 'the file could not be read');
  }
}

export async function writeFileInside(exec: Exec, path: string, data: Buffer): Promise<{ path: string; size: number }> {
  const r = await fileOp(exec, WRITE_SHIM, [path], data);
  switch (r.code) {
    case 0: return { path: r.stdout.toString('utf8'), size: data.length };
    case 4: throw new DriverError('file_path_refused', 'the path leads out of the data disk (/home/agent)');
    case 5: throw new DriverError('file_path_refused', 'the path is a directory');
    default: throw new DriverError('file_failed', 'the file could not be written');
  }
}

/** A command's stdout and stderr, each kept up to maxOutputBytes (the rest counted as truncation), streamed to onOutput. */
export class OutputCollector {
  readonly #chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  readonly #kept = { stdout: 0, stderr: 0 };
  readonly over = { stdout: false, stderr: false };
  constructor(private readonly req: Pick<ExecRequest, 'maxOutputBytes' | 'onOutput'>) {}

  add(stream: 'stdout' | 'stderr', d: Buffer): void {
    this.req.onOutput?.(stream, d);
    const room = this.req.maxOutputBytes - this.#kept[stream];
    if (room <= 0) {
      this.over[stream] = true;
      return;
    }
    const keep = d.length > room ? d.subarray(0, room) : d;
    if (keep.length < d.length) this.over[stream] = true;
    this.#chunks[stream].push(keep);
    this.#kept[stream] += keep.length;
  }

  kept(stream: 'stdout' | 'stderr'): number {
    return this.#kept[stream];
  }

  text(stream: 'stdout' | 'stderr'): Buffer {
    return Buffer.concat(this.#chunks[stream]);
  }

  /** The exec's result, with what was kept of its output. */
  result(exitCode: number | null, signal: string | null, startedMs: number, timedOut: boolean): ExecResult {
    return {
      exitCode, signal, stdout: this.text('stdout'), stderr: this.text('stderr'), stdoutTruncated: this.over.stdout, stderrTruncated: this.over.stderr,
      durationMs: Math.round(performance.now() - startedMs), timedOut,
    };
  }
}
