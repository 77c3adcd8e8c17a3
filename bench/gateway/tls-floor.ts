/**
 * What Node needs per held TLS connection, before any code of ours: the floor under the
 * gateway's hold test (docs/performance.md, "Why 10,000 held requests cannot fit in
 * 300 MiB"). A bare server process (tls-floor.child.ts) accepts N connections from this
 * process and only holds them; its RSS before and after, per connection, is printed for
 * a plain TCP socket, a TLS socket after the handshake, and a TLS socket with one HTTP
 * request parked on it (what a request held for approval is, at the least).
 *
 *   npx tsx bench/gateway/tls-floor.ts                  # 10,000 connections per mode
 *   npx tsx bench/gateway/tls-floor.ts --n=5000 --modes=tls --tls-max=TLSv1.2
 *
 * Printed comparison, never an assertion.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { connect as netConnect, type Socket } from 'node:net';
import { startChild } from './ipc.js';

function option(name: string, dflt: string): string {
  const flag = process.argv.find((a) => a.startsWith(`--${name}=`));
  return flag ? flag.slice(name.length + 3) : dflt;
}
const N = Number(option('n', '10000'));
const MODES = option('modes', 'tcp,tls,https').split(',');
const TLS_MAX = option('tls-max', '');
const MiB = 1024 * 1024;
const POST = `POST /held HTTP/1.1\r\nHost: floor.example\r\nContent-Type: application/json\r\nContent-Length: 1024\r\n\r\n${'x'.repeat(1024)}`;

async function open(port: number, mode: string): Promise<Socket | TLSSocket> {
  return new Promise((resolve, reject) => {
    if (mode === 'tcp') {
      const s = netConnect(port, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
      return;
    }
    const s = tlsConnect({ port, host: '127.0.0.1', servername: 'floor.example', rejectUnauthorized: false }, () => {
      if (mode === 'https') s.write(POST);
      resolve(s);
    });
    s.once('error', reject);
  });
}

const dir = mkdtempSync(path.join(tmpdir(), 'gw-tls-floor-'));
console.log(`node ${process.version}; ${N} connections per mode; server: a bare Node process holding them\n`);
console.log('| mode | RSS before MiB | RSS held MiB | per connection KiB | heap used held MiB |');
console.log('|---|---:|---:|---:|---:|');
try {
  for (const mode of MODES) {
    const child = await startChild<{ port: number }>(`floor-${mode}`, 'tls-floor.child.ts', {
      env: { FLOOR_MODE: mode, ...(TLS_MAX ? { FLOOR_TLS_MAX: TLS_MAX } : {}) },
      nodeArgs: ['--expose-gc'],
      logFile: path.join(dir, `${mode}.log`),
    });
    await child.call('gc');
    const before = await child.stats();
    const sockets: Array<Socket | TLSSocket> = [];
    let next = 0;
    await Promise.all(Array.from({ length: 50 }, async () => {
      while (next < N) {
        next++;
        const s = await open(child.info.port, mode);
        s.on('error', () => undefined);
        sockets.push(s);
      }
    }));
    for (let i = 0; i < 200 && (await child.call<number>('count')) < N; i++) await new Promise((r) => setTimeout(r, 50));
    await child.call('gc');
    await new Promise((r) => setTimeout(r, 500));
    const heldStats = await child.stats();
    const per = (heldStats.rss - before.rss) / N / 1024;
    console.log(`| ${mode} | ${(before.rss / MiB).toFixed(0)} | ${(heldStats.rss / MiB).toFixed(0)} | ${per.toFixed(1)} | ${(heldStats.heapUsed / MiB).toFixed(0)} |`);
    for (const s of sockets) s.destroy();
    await child.stop();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
