import { existsSync } from 'node:fs';

/**
 * Skips that hide work (issue 24, item 6): a test that cannot run on this machine (no
 * bubblewrap, not root, no Chromium, no QEMU, no tun device...) skips with its reason on a
 * developer's machine, but under CI it fails with that same reason, so a green CI always
 * means the runtime, browser and QEMU tests ran. `.ci/run` exports CI=true; most CI
 * services set it too.
 *
 * Skips about the database engine (`if (!usingMysql()) this.skip()`) are not gates of the
 * machine: they are correct on the SQLite run, which CI also makes, and stay plain skips.
 * They are the only ones left (the SQLite run's pending, none on MySQL):
 * test/integration/audit-concurrency.test.ts (two pools on one database),
 * webhooks-delivery.test.ts (two workers sharing the outbox) and webhooks-endpoint.test.ts
 * (a MySQL snapshot read): SQLite is one connection of one process; and (issue 25)
 * test/e2e/cluster.test.ts (several nodes on one MySQL) and test/integration/health.test.ts's
 * MySQL cut by a relay.
 *
 * The other way round, the host-boundary suites (the browser's and the process sandbox's
 * attack suites, the runtime suite) are not loaded on the MySQL run: .mocharc.cjs lists them
 * and prints the list at the start of that run; they run on the SQLite run, which CI also
 * makes (GATEWAY_TEST_ALL=1 runs them on MySQL too).
 */
export function inCI(): boolean {
  return /^(true|1)$/i.test(process.env.CI ?? '');
}

/**
 * In a `before` or an `it`: nothing when `reason` is null; otherwise skips (saying why), or
 * throws under CI. A throw in a `before` fails the suite, as a failing test does.
 */
export function skipOrFailInCI(ctx: Mocha.Context, reason: string | null | undefined): void {
  if (!reason) return;
  if (inCI()) throw new Error(`cannot run here, and CI is set (a skip would pass unseen): ${reason}`);
  console.log(`      skipped: ${reason}`);
  ctx.skip();
}

/** Where the browser tests find Chromium (`CHROMIUM_PATH`, else Debian's). */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Why the browser tests cannot run here (no Chromium at `path`), or null. */
export function chromiumUnavailable(path: string = CHROMIUM_PATH): string | null {
  return existsSync(path) ? null : `no Chromium at ${path} (apt-get install chromium; .ci/run does)`;
}
