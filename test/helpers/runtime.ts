import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { expect } from 'chai';
import type { ApiClient } from './service.js';

/**
 * Whether this machine can run the process sandbox (bubblewrap, util-linux, root for the
 * per-environment uids and cgroups). `.ci/run` installs bubblewrap and socat, so in CI
 * this is true and the runtime tests run; elsewhere they skip with the reason.
 */
export function runtimeUnavailable(): string | null {
  if (!existsSync('/usr/bin/bwrap')) return 'bubblewrap is not installed (apt-get install bubblewrap socat)';
  if (process.getuid?.() !== 0) return 'the process runtime tests need root (per-environment uids and cgroups)';
  const r = spawnSync('/usr/bin/bwrap', ['--unshare-all', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--', '/usr/bin/true']);
  if (r.status !== 0) return `bubblewrap cannot create namespaces here: ${String(r.stderr).trim()}`;
  return null;
}

/** In a `before`: skips the suite, saying why, where the process runtime cannot run. */
export function skipWithoutRuntime(ctx: Mocha.Context): void {
  const why = runtimeUnavailable();
  if (why) {
    console.log(`      skipped: ${why}`);
    ctx.skip();
  }
}

/** Polls the environment until `state` is `want` (or fails the test after `ms`). */
export async function waitState(api: ApiClient, id: string, want: string, ms = 15_000): Promise<any> {
  const t0 = Date.now();
  let last: any;
  while (Date.now() - t0 < ms) {
    last = (await api.get(`/v1/environments/${id}`)).body;
    if (last.state === want) return last;
    await new Promise((r) => setTimeout(r, 25));
  }
  expect(last?.state, `environment ${id} state (failure_reason: ${last?.failure_reason})`).to.equal(want);
  return last;
}

export async function exec(api: ApiClient, id: string, command: string[], extra: Record<string, unknown> = {}): Promise<{ status: number; body: any }> {
  const r = await api.post(`/v1/environments/${id}/exec`, { command, ...extra });
  return { status: r.status, body: r.body };
}

/** sh -c inside the environment; expects 200 and returns the body. */
export async function sh(api: ApiClient, id: string, script: string, extra: Record<string, unknown> = {}): Promise<{ exit_code: number; stdout: string; stderr: string }> {
  const r = await exec(api, id, ['/bin/sh', '-c', script], extra);
  expect(r.status, JSON.stringify(r.body)).to.equal(200);
  return r.body;
}
