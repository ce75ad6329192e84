/**
 * Runs one sqlite disk fault inside a private mount namespace (started by the test as
 * `unshare -m --propagation private node this-file FAULT DIR`): mounts a 3 MB tmpfs on DIR, puts
 * the registry there, and breaks it for real — filled to ENOSPC while the service runs, or
 * remounted read-only under a filled registry before it starts (Linux refuses to remount a file
 * system read-only while a process has a file open for writing, so a running service cannot be
 * caught by it). Prints the observations as one `RESULT {...}` line on stdout.
 */
import {execFileSync} from 'node:child_process';
import {rmSync} from 'node:fs';
import path from 'node:path';
import {kubeServerKey} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {fillDisk, mountWorkerTmpfs} from '../helpers/tmpfs.ts';
import {CLUSTERS, runRegistryFaultScenario, type RegistryFaultDriver} from './registry-fault-scenario.ts';

const [fault, dir] = process.argv.slice(2);
if (!dir || (fault !== 'disk_full' && fault !== 'read_only')) {
  process.stderr.write('usage: registry-fault-worker.ts disk_full|read_only DIR\n');
  process.exit(2);
}
const {file} = mountWorkerTmpfs(dir, '3m', 'registry-fault-worker.ts disk_full|read_only DIR');
const fill = path.join(dir, 'fill');

/** The registry a previous run left: CLUSTERS entries on a lease. */
async function fillRegistry(): Promise<void> {
  const backend = await SqliteBackend.open({path: file, clock: systemClock});
  const lease = await backend.grantLease(30_000);
  for (let i = 0; i < CLUSTERS; i++) {
    const name = `c${i}-eks-us-east-1-111111111111`;
    const doc = {kind: 'kube_server', version: 'v3', metadata: {name, expires: new Date(Date.now() + 30_000).toISOString()}, spec: {cluster: {kind: 'kube_cluster', metadata: {name: `c${i}`, labels: {}}, spec: {}}}};
    await backend.put(kubeServerKey('faults', name), JSON.stringify(doc), {lease});
  }
  await backend.close();
}

const driver: RegistryFaultDriver = {
  storage: `{type: sqlite, path: ${file}}`,
  async prepare() {
    if (fault !== 'read_only') return;
    await fillRegistry();
    execFileSync('mount', ['-o', 'remount,ro', dir]);
  },
  async inject() {
    if (fault === 'disk_full') fillDisk(fill, 64 * 1024);
  },
  async clear() {
    if (fault === 'disk_full') rmSync(fill);
    else execFileSync('mount', ['-o', 'remount,rw', dir]);
  },
};

const result = await runRegistryFaultScenario(driver);
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
