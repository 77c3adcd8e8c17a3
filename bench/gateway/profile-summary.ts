/**
 * Where a `node --cpu-prof` profile's time goes. For the gateway profile written by
 * `BENCH_PROFILE=<dir> npx tsx bench/gateway/run.ts` (two files: the main thread is the
 * larger, `...001.cpuprofile`):
 *
 *   npx tsx bench/gateway/profile-summary.ts <file.cpuprofile> [top=40]
 *       self time by function and by file (project files by path, dependencies by package,
 *       Node internals by module), inclusive time of project functions, and the busy time
 *       split into buckets (audit writer, undici, stream pipeline, TLS, ...)
 *   npx tsx bench/gateway/profile-summary.ts <file.cpuprofile> callers <regexp> [depth=9]
 *       the call stacks leading to frames matching <regexp> ("function url:line")
 *   npx tsx bench/gateway/profile-summary.ts <file.cpuprofile> callees <regexp> [depth=3]
 *       what the frames matching <regexp> spend their inclusive time on, path by path down to
 *       <depth> calls (an inclusive total alone hides what a callback continues into: the SNI
 *       callback's 5.6 % of a fresh-connection profile was the tunnel set-up its callback runs,
 *       and 0.8 % the handshake's certificate round trip; issue 29, item 4)
 *
 * Self time of a native frame (writev, initRead, writeLatin1String) includes the C++ work
 * under it: TLS encryption and handshakes, syscalls.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, mode, ...rest] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: profile-summary.ts <file.cpuprofile> [top] | callers <regexp> [depth] | callees <regexp> [depth]\n');
  process.exit(2);
}
const prof = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const root = process.cwd();
function where(url: string): string {
  if (!url) return '(native)';
  const u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = u.slice(nm + 14).split('/');
    return `npm:${parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  return u.startsWith(root) ? u.slice(root.length + 1) : u;
}
const frameName = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${where(f.url)}:${f.lineNumber + 1}`;

/** Every busy sample as [microseconds, stack leaf first]. */
function* samples(): Generator<[number, CallFrame[]]> {
  for (let i = 0; i < prof.samples.length; i++) {
    const dt = prof.timeDeltas[i + 1] ?? 0;
    const stack: CallFrame[] = [];
    for (let id: number | undefined = prof.samples[i]; id !== undefined; id = parent.get(id)) stack.push(byId.get(id)!.callFrame);
    if (stack[0]!.functionName === '(idle)') continue;
    yield [dt, stack];
  }
}

const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
let total = 0;
for (const [dt] of samples()) total += dt;
const pct = (v: number) => `${((100 * v) / total).toFixed(1).padStart(5)}%`;
const ms = (v: number) => `${(v / 1000).toFixed(0).padStart(7)} ms`;
const show = (title: string, m: Map<string, number>, top: number) => {
  process.stdout.write(`\n## ${title}\n`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${ms(v)} ${pct(v)}  ${k}\n`);
};

if (mode === 'callers') {
  const re = new RegExp(rest[0] ?? '.');
  const depth = Number(rest[1] ?? 9);
  const stacks = new Map<string, number>();
  for (const [dt, stack] of samples()) {
    const i = stack.findIndex((f) => re.test(frameName(f)));
    if (i >= 0) add(stacks, stack.slice(i, i + depth).map(frameName).join('\n      < '), dt);
  }
  show(`stacks through ${re}`, stacks, 12);
} else if (mode === 'callees') {
  const re = new RegExp(rest[0] ?? '.');
  const depth = Number(rest[1] ?? 3);
  const paths = new Map<string, number>();
  for (const [dt, stack] of samples()) {
    // The outermost matching frame, so a recursive match is not counted twice.
    let i = stack.length - 1;
    while (i >= 0 && !re.test(frameName(stack[i]!))) i--;
    if (i < 0) continue;
    add(paths, frameName(stack[i]!), dt);
    for (let d = 1; d <= depth && i - d >= 0; d++) add(paths, stack.slice(i - d, i + 1).reverse().map(frameName).join('\n      > '), dt);
  }
  show(`inclusive time under ${re}`, paths, 40);
} else {
  const top = Number(mode ?? 40);
  const self = new Map<string, number>();
  const selfFile = new Map<string, number>();
  const incl = new Map<string, number>();
  const buckets = new Map<string, number>();
  // First match wins, in this order.
  const BUCKETS: Array<[string, RegExp]> = [
    ['startup (module loading, migrations, CA)', /modules\/(esm|cjs)|npm:tsx|startService|migrat|certs\/ca/],
    ['audit writer (knex, better-sqlite3, hash chain)', /npm:knex|npm:better-sqlite3|audit\/chain|audit\.store|batch-writer/],
    ['audit enqueue (recordLater: id, sanitize)', /recordLater/],
    ['stream/promises pipeline, AbortController (excl. socket writes)', /abort_controller|domexception|end-of-stream/],
    ['TLS handshakes (initRead), socket writes (writev, writeLatin1String)', /^(initRead|writev|writeLatin1String|writeUtf8String|writeBuffer) /],
    ['undici (upstream request, response parsing)', /npm:undici/],
    ['pipeline stages (proxy/, policy, secrets, egress, ports)', /proxy\/pipeline|proxy\/credentials|policy-engine|policies\/|environments\/|bin\/service/],
    ['client-side HTTP server (parse, respond)', /node:_http_/],
    ['CONNECT, tunnels (gateway-proxy.ts, http-mitm-proxy, certs)', /gateway-proxy|npm:http-mitm-proxy|certs\/|_tls_wrap|node:net/],
  ];
  for (const [dt, stack] of samples()) {
    const leaf = stack[0]!;
    add(self, frameName(leaf), dt);
    add(selfFile, leaf.url ? where(leaf.url) : leaf.functionName, dt);
    const seen = new Set<string>();
    for (const f of stack) {
      const w = where(f.url);
      if (w.startsWith('npm:') || w.startsWith('node:') || w === '(native)') continue;
      const k = frameName(f);
      if (!seen.has(k)) add(incl, k, dt);
      seen.add(k);
    }
    const names = stack.map(frameName);
    let b = leaf.functionName === '(garbage collector)' ? 'garbage collector' : 'other';
    if (b === 'other') {
      for (const [name, re] of BUCKETS) {
        if (re.source.startsWith('^') ? re.test(names[0]!) : names.some((n) => re.test(n))) {
          b = name;
          break;
        }
      }
    }
    add(buckets, b, dt);
  }
  process.stdout.write(`busy ${(total / 1000).toFixed(0)} ms\n`);
  show('busy time by bucket', buckets, 20);
  show('self time by function', self, top);
  show('self time by file / package', selfFile, top);
  show('inclusive time of project functions', incl, top);
}
