import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The first directory under `root` (at most `maxDepth` levels below it) whose name and path
 * `match` accepts, or null. A walk of our own: a recursive readdir fails whole when any
 * directory goes away mid-walk, and other services on the machine (a second test run beside
 * this one, CI's two runs side by side) create and remove cgroups all the time.
 */
export function findCgroup(root: string, match: (name: string, path: string) => boolean, maxDepth = 6): string | null {
  const walk = (dir: string, depth: number): string | null => {
    let names: string[];
    try {
      names = readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
    } catch {
      return null; // gone meanwhile
    }
    for (const n of names) {
      const path = join(dir, n);
      if (match(n, path)) return path;
      if (depth < maxDepth) {
        const hit = walk(path, depth + 1);
        if (hit) return hit;
      }
    }
    return null;
  };
  return walk(root, 0);
}
