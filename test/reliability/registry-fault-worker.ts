/**
 * Runs one sqlite disk fault inside a private mount namespace (started by the test as
 * `unshare -m --propagation private node this-file FAULT DIR`): mounts a 3 MB tmpfs on DIR, puts
 * the registry there, and breaks it for real — filled to ENOSPC, or remounted read-only. Prints
 * the observations as one `RESULT {...}` line on stdout.
 */
import {execFileSync} from 'node:child_process';
import {closeSync, openSync, rmSync, writeSync} from 'node:fs';
import path from 'node:path';
import {runRegistryFaultScenario, type RegistryFaultDriver} from './registry-fault-scenario.ts';

const [fault, dir] = process.argv.slice(2);
if (!dir || (fault !== 'disk_full' && fault !== 'read_only')) {
  process.stderr.write('usage: registry-fault-worker.ts disk_full|read_only DIR\n');
  process.exit(2);
}
execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', dir]);
const fill = path.join(dir, 'fill');

/** Writes zeros until the file system says ENOSPC. */
function fillDisk(): void {
  const fd = openSync(fill, 'w');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
}

const driver: RegistryFaultDriver = {
  storage: `{type: sqlite, path: ${path.join(dir, 'registry.db')}}`,
  async inject() {
    if (fault === 'disk_full') fillDisk();
    else execFileSync('mount', ['-o', 'remount,ro', dir]);
  },
  async clear() {
    if (fault === 'disk_full') rmSync(fill);
    else execFileSync('mount', ['-o', 'remount,rw', dir]);
  },
};

const result = await runRegistryFaultScenario(driver);
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
