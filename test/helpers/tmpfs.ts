/**
 * The worker side of the tests that break a registry's volume for real: each worker runs as
 * `unshare -m --propagation private node WORKER ... DIR`, in a private mount namespace (root), so
 * the tmpfs it mounts on DIR, and what it does to it, stays invisible to the rest of the machine.
 */
import {execFileSync} from 'node:child_process';
import {closeSync, openSync, writeSync} from 'node:fs';
import path from 'node:path';

/** A worker's volume: the mount point and the registry file on it. */
export interface WorkerVolume {
  readonly dir: string;
  readonly file: string;
}

/**
 * Mounts a fresh tmpfs of `size` (`8m`) on `dir`, the worker's DIR argument, and names the registry
 * file on it. Without a DIR it prints `usage` and exits 2: mounting over an unnamed path is no test.
 */
export function mountWorkerTmpfs(dir: string | undefined, size: string, usage: string): WorkerVolume {
  if (!dir) {
    process.stderr.write(`usage: ${usage}\n`);
    process.exit(2);
  }
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  return {dir, file: path.join(dir, 'registry.db')};
}

/** Writes zeros to `file` in chunks of `chunkBytes` until the file system says ENOSPC. */
export function fillDisk(file: string, chunkBytes: number): void {
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(chunkBytes);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
}
