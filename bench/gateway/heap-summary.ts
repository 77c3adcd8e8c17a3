/**
 * What the gateway's heap holds while the hold test's requests wait.
 *
 *   npx tsx bench/gateway/heap-summary.ts <file.heapsnapshot> [top=40]
 *       by constructor (or node type for strings, code, arrays): count and self size
 *   npx tsx bench/gateway/heap-summary.ts <file.heapprofile> [top=40]
 *       a sampling heap profile (live memory by allocation site): bytes by allocating
 *       function, and by the innermost project function on the allocating stack
 *
 * Divide by the held count for bytes per held request. Written by run.ts with
 * --heap-snapshot=<file> / --heap-profile=<file>. A snapshot of 10,000 held requests is
 * about 300 MB: run this with `node --max-old-space-size=4000 --import tsx`.
 */
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: heap-summary.ts <file.heapsnapshot|file.heapprofile> [top]\n');
  process.exit(2);
}
const top = Number(topArg ?? 40);
const MiB = 1048576;
const data = JSON.parse(readFileSync(file, 'utf8'));
const show = (title: string, m: Map<string, { n: number; bytes: number }>) => {
  process.stdout.write(`\n## ${title}\n`);
  for (const [k, v] of [...m].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top)) {
    process.stdout.write(`${(v.bytes / MiB).toFixed(2).padStart(8)} MiB ${String(v.n).padStart(9)}  ${k}\n`);
  }
};
const add = (m: Map<string, { n: number; bytes: number }>, k: string, bytes: number, n = 1) => {
  const a = m.get(k) ?? { n: 0, bytes: 0 };
  a.n += n;
  a.bytes += bytes;
  m.set(k, a);
};

if (data.snapshot) {
  const fields: string[] = data.snapshot.meta.node_fields;
  const types: string[] = data.snapshot.meta.node_types[0];
  const width = fields.length;
  const [fType, fName, fSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const agg = new Map<string, { n: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < data.nodes.length; i += width) {
    const type = types[data.nodes[i + fType]]!;
    const size: number = data.nodes[i + fSize];
    total += size;
    const name: string = data.strings[data.nodes[i + fName]];
    add(agg, type === 'object' || type === 'closure' || type === 'native' ? `${type}: ${name.slice(0, 60)}` : type, size);
  }
  process.stdout.write(`total self size ${(total / MiB).toFixed(1)} MiB\n`);
  show('by constructor', agg);
} else {
  interface HNode { callFrame: { functionName: string; url: string; lineNumber: number }; selfSize: number; children: HNode[] }
  const root = process.cwd();
  const where = (url: string) => {
    const u = url.replace(/^file:\/\//, '');
    const nm = u.lastIndexOf('/node_modules/');
    if (nm >= 0) return `npm:${u.slice(nm + 14).split('/')[0]}`;
    return u.startsWith(root) ? u.slice(root.length + 1) : u || '(native)';
  };
  const name = (f: HNode['callFrame']) => `${f.functionName || '(anonymous)'} ${where(f.url)}:${f.lineNumber + 1}`;
  const isProject = (f: HNode['callFrame']) => f.url.includes(root) && !f.url.includes('/node_modules/');
  const site = new Map<string, { n: number; bytes: number }>();
  const project = new Map<string, { n: number; bytes: number }>();
  const pathTo = new Map<string, { n: number; bytes: number }>();
  let total = 0;
  const walk = (n: HNode, stack: HNode['callFrame'][]) => {
    const s = [...stack, n.callFrame];
    if (n.selfSize > 0) {
      total += n.selfSize;
      add(site, name(n.callFrame), n.selfSize);
      const p = [...s].reverse().find(isProject);
      add(project, p ? name(p) : '(no project frame)', n.selfSize);
      const tail = [...s].reverse().slice(0, 6).map(name).join(' < ');
      add(pathTo, tail, n.selfSize);
    }
    for (const c of n.children) walk(c, s);
  };
  walk(data.head, []);
  process.stdout.write(`sampled live bytes ${(total / MiB).toFixed(1)} MiB\n`);
  show('by innermost project function on the allocating stack', project);
  show('by allocating function', site);
  show('by allocating stack (innermost 6 frames)', pathTo);
}
