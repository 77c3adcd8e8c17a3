import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { skipOrFailInCI } from '../helpers/ci-gate.js';

/** Where the guest image is built once per machine (content-addressed: rebuilt when its inputs change). */
export const IMAGE_DIR = process.env.GATEWAY_QEMU_IMAGE_DIR ?? '/var/cache/agent-gateway/vm-image';

/**
 * Why the qemu runtime cannot be tested here, or null. `.ci/run` installs QEMU in its
 * separate qemu step; elsewhere these suites skip and say why (and fail under CI).
 */
export function qemuUnavailable(): string | null {
  if (!existsSync('/usr/bin/qemu-system-x86_64')) return 'QEMU is not installed (apt-get install qemu-system-x86 qemu-utils)';
  if (!existsSync('/usr/bin/qemu-img')) return 'qemu-img is not installed (apt-get install qemu-utils)';
  if (process.getuid?.() !== 0) return 'the qemu runtime tests need root (per-environment uids and namespaces)';
  for (const tool of ['socat', 'zstd', 'xz', 'gcc', 'apt-get']) {
    if (!['/usr/bin', '/bin'].some((d) => existsSync(join(d, tool)))) return `${tool} is not installed`;
  }
  return null;
}

/** In a `before`: skips where QEMU cannot run here, saying why; under CI it fails instead (ci-gate.ts). */
export function skipWithoutQemu(ctx: Mocha.Context): void {
  skipOrFailInCI(ctx, qemuUnavailable());
}
