import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Logger } from '../lib/log.js';

/**
 * GATEWAY_MASTER_KEY when set; otherwise a key generated once into DATA_DIR/master.key
 * (mode 0600) with a warning: fine for a laptop, not for production, where the key
 * belongs in a secret manager and not next to the data it protects.
 */
export function loadMasterKey(configured: Buffer | null, dataDir: string, log: Logger): Buffer {
  if (configured) return configured;
  const file = join(dataDir, 'master.key');
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    try {
      // link-free rename: if another process won the race, its key stays.
      if (!existsSync(file)) renameSync(tmp, file);
    } catch {
      /* the other process's key is used below */
    }
    log.warn({ file }, 'GATEWAY_MASTER_KEY is not set: generated a master key into DATA_DIR; set GATEWAY_MASTER_KEY in production');
  }
  const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`${file} does not hold a base64 32-byte key`);
  return key;
}
