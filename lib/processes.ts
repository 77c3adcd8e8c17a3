import { randomBytes } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';

/** Whether a process of this pid exists (EPERM: it does, another user's). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A host uid of [base, base + range) that no live process has (read from /proc) and `held`
 * does not hold: sandboxes and browsers run as uids of their own, allocated, never shared
 * (hosts/drivers/process.ts, browser/). Throws when none is found in 1,000 tries.
 */
export function allocateUid(held: ReadonlySet<number>, base: number, range: number): number {
  const taken = new Set(held);
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      taken.add(statSync(`/proc/${p}`).uid);
    } catch { /* gone */ }
  }
  for (let i = 0; i < 1000; i++) {
    const uid = base + (randomBytes(4).readUInt32BE(0) % range);
    if (!taken.has(uid)) return uid;
  }
  throw new Error(`no free uid in ${base}-${base + range - 1}`);
}
