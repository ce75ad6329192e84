/**
 * The tests that break a volume for real (a registry's, a kubeconfig's): each worker runs as
 * `unshare -m --propagation private node WORKER ... DIR`, in a private mount namespace (root), so
 * the tmpfs it mounts on DIR, and what it does to it, stays invisible to the rest of the machine.
 * The test starts it with `runInMountNamespace`; the worker mounts with `mountWorkerTmpfs` and
 * prints one `RESULT {json}` line.
 */
import {execFileSync, spawnSync} from 'node:child_process';
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

/**
 * Runs `worker` with `args` in a private mount namespace and returns the JSON of its `RESULT`
 * line; a worker that printed none fails the test with its exit and its stderr.
 */
export function runInMountNamespace<T>(worker: string, args: readonly string[], timeoutMs = 60_000): T {
  const run = spawnSync('unshare', ['-m', '--propagation', 'private', process.execPath, worker, ...args], {encoding: 'utf8', timeout: timeoutMs});
  const line = run.stdout?.split('\n').find((l) => l.startsWith('RESULT '));
  if (!line) throw new Error(`${path.basename(worker)} ${args.join(' ')} failed with ${run.status ?? run.signal}: ${run.error?.message ?? ''}\n${run.stderr}`);
  return JSON.parse(line.slice('RESULT '.length)) as T;
}
