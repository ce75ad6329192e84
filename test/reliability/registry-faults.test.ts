/**
 * Registry faults, one row each, against a running service on a filled registry: the served
 * inventory never shrinks (0 false deregistrations, 0 gaps, checked every clock second over three
 * TTLs), the failure shows in /readyz (reason class only), /v1/status, the metrics and one JSON log
 * line, and everything recovers when the fault clears. Disk faults run for real on a 3 MB tmpfs in
 * a private mount namespace (registry-fault-worker.ts).
 */
import {spawnSync} from 'node:child_process';
import {mkdtemp, rm} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {Etcd3} from 'etcd3';
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi} from 'vitest';
import {kubeServerKey, kubeServerPrefix} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import type {RegistryItem} from '../../src/registry/backend.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {electionLeaseName} from '../../src/ha/lease-election.ts';
import type {KubeClient} from '../../src/registry/kube-client.ts';
import {quiet, startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';
import {CLUSTERS, runRegistryFaultScenario, type RegistryFaultDriver, type RegistryFaultObservations} from './registry-fault-scenario.ts';
import {startTcpProxy} from '../helpers/tcp-proxy.ts';
import {runInMountNamespace} from '../helpers/tmpfs.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-regfault-'));
});
afterAll(async () => {
  await rm(dir, {recursive: true, force: true});
});

const WORKER = path.resolve(import.meta.dirname, 'registry-fault-worker.ts');

/** Runs a disk fault in its own mount namespace; throws with the worker's output when it cannot. */
function inMountNamespace(fault: 'disk_full' | 'read_only'): RegistryFaultObservations {
  const mountPoint = path.join(dir, `mnt-${fault}`);
  spawnSync('mkdir', ['-p', mountPoint]);
  return runInMountNamespace<RegistryFaultObservations>(WORKER, [fault, mountPoint], 120_000);
}

/** Common expectations of a fault row. */
function expectServedThroughout(
  seen: RegistryFaultObservations,
  expected: {reason?: string; operation?: string; entriesAfter?: number; selfHealing?: boolean; refusedWrites?: boolean},
): void {
  expect(seen.entriesBefore).toBe(CLUSTERS);
  // Zero gaps, zero false deregistrations.
  expect(seen.minEntriesDuringFault).toBeGreaterThanOrEqual(CLUSTERS);
  expect(seen.deletesDuringFault).toBe(0);
  expect(seen.statusDuringFault.inventory.count).toBeGreaterThanOrEqual(CLUSTERS);
  // Nor once the fault clears, while the service recovers.
  expect(seen.minEntriesWhileRecovering).toBeGreaterThanOrEqual(CLUSTERS);
  expect(seen.deletesWhileRecovering).toBe(0);
  expect(seen.nonJsonLines).toEqual([]);
  expect(seen.processWarnings).toBe(0);
  if (expected.selfHealing) {
    // Healed by the next write: visible in the metrics and one log line per state change. The
    // re-created file and the lease that went with it may be two short faults (a write between
    // them succeeded), never one line per failed call.
    expect(seen.errorsMetric).toBeGreaterThan(0);
    expect(seen.degradedLines).toBeGreaterThanOrEqual(1);
    expect(seen.degradedLines).toBeLessThanOrEqual(2);
    expect(seen.recoveredLines).toBe(seen.degradedLines);
  } else if (expected.refusedWrites) {
    // Writes refused for a fence that no longer holds count as write faults (reason other), as many
    // as the cycle had on their way when it happened (none when the leader noticed first); each heals.
    expect(seen.recoveredLines).toBe(seen.degradedLines);
  } else if (expected.reason) {
    expect(seen.readyDuringFault).toMatchObject({httpStatus: 200, body: {status: 'degraded'}});
    expect(seen.readyDuringFault.body.reason).toContain(`(${expected.reason})`);
    expect(seen.statusDuringFault.backend.faults).toEqual(
      expect.arrayContaining([expect.objectContaining({reason: expected.reason, ...(expected.operation ? {operation: expected.operation} : {})})]),
    );
    expect(seen.errorsMetric).toBeGreaterThan(0);
    expect(seen.degradedMetric).toBeGreaterThanOrEqual(1);
    expect(seen.degradedLines).toBeGreaterThanOrEqual(1);
    // Once per state change, not once per failed call.
    expect(seen.degradedLines).toBeLessThanOrEqual(2);
    expect(seen.recoveredLines).toBe(seen.degradedLines);
  } else {
    expect(seen.readyDuringFault.body.status).toBe('ready');
    expect(seen.degradedLines).toBe(0);
  }
  expect(seen.readyAfter).toMatchObject({httpStatus: 200, body: {status: 'ready'}});
  expect(seen.faultsAfter).toBe(0);
  expect(seen.entriesAfter).toBe(expected.entriesAfter ?? CLUSTERS + 1);
}

const noFault = {inject: async () => undefined, clear: async () => undefined};
const C0 = kubeServerKey('faults', 'c0-eks-us-east-1-111111111111');
const ORPHAN = kubeServerKey('faults', 'orphan');

describe('registry faults: the inventory is served throughout', () => {
  const rows: Array<{name: string; driver: () => RegistryFaultDriver; reason?: string; operation?: string; selfHealing?: boolean}> = [
    {name: 'heartbeat.ttl 30s on sqlite: keepalives extend the lease, readers follow it', driver: () => ({storage: `{type: sqlite, path: ${path.join(dir, 'ttl.db')}}`, ...noFault})},
    {name: 'heartbeat.ttl 30s on memory', driver: () => ({storage: '{type: memory}', ...noFault})},
    {
      name: 'sqlite database file deleted while running: re-created and re-announced by the next keepalive',
      reason: 'file_deleted',
      selfHealing: true,
      driver: () => {
        const file = path.join(dir, 'deleted.db');
        return {
          storage: `{type: sqlite, path: ${file}}`,
          async inject() {
            for (const suffix of ['', '-wal', '-shm']) await rm(`${file}${suffix}`, {force: true});
          },
          // Heals itself: the next write re-creates the file and the heartbeat re-announces.
          clear: async () => undefined,
        };
      },
    },
    {
      name: 'a stored document that is not JSON (over a live entry, and on its own)',
      reason: 'malformed',
      operation: 'read',
      driver: () => {
        let original: RegistryItem | undefined;
        return {
          storage: `{type: sqlite, path: ${path.join(dir, 'malformed.db')}}`,
          async inject(svc) {
            original = await svc.runtime.backend.get(C0);
            await svc.runtime.backend.put(C0, '{"kind": "kube_server", "metadata": ');
            await svc.runtime.backend.put(ORPHAN, 'not json at all');
          },
          async clear(svc) {
            await svc.runtime.backend.delete(ORPHAN);
            if (original?.lease) await svc.runtime.backend.put(C0, original.value, {lease: {id: original.lease, ttlMs: 30_000}});
          },
        };
      },
    },
  ];

  for (const row of rows) {
    it(row.name, async () => {
      const seen = await runRegistryFaultScenario(row.driver());
      const {reason, operation, selfHealing} = row;
      expectServedThroughout(seen, {...(reason ? {reason} : {}), ...(operation ? {operation} : {}), ...(selfHealing ? {selfHealing} : {})});
    });
  }

  it('sqlite write-ahead log deleted while running: checkpointed into the file and a new log started, so the file on disk holds every entry', async () => {
    const file = path.join(dir, 'wal-deleted.db');
    let onDisk = 0;
    const seen = await runRegistryFaultScenario({
      storage: `{type: sqlite, path: ${file}}`,
      inject: () => rm(`${file}-wal`),
      // Heals itself at the next write; what a restart would find, read by another connection (as `kubeconfig -c` does).
      async clear() {
        const reader = await SqliteBackend.open({path: file, clock: systemClock, graceOnOpen: true});
        onDisk = (await reader.list(kubeServerPrefix('faults'))).length;
        await reader.close();
      },
    });
    expectServedThroughout(seen, {reason: 'file_deleted', selfHealing: true});
    expect(onDisk).toBe(CLUSTERS + 1);
  });

  it('sqlite on a full disk (3 MB tmpfs in a mount namespace, filled to ENOSPC)', () => {
    expectServedThroughout(inMountNamespace('disk_full'), {reason: 'disk_full', operation: 'write'});
  });

  it('sqlite on a read-only file system (the tmpfs remounted ro under a filled registry; start serves it, writes wait)', () => {
    expectServedThroughout(inMountNamespace('read_only'), {reason: 'read_only', operation: 'write'});
  });
});

describeWithEtcd('registry faults on etcd', () => {
  let etcd: TestEtcd;
  beforeAll(async () => {
    etcd = await startEtcd();
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  it('etcd down longer than the TTL: a reading replica keeps serving the last inventory, marked stale', async () => {
    const seen = await runRegistryFaultScenario({
      storage: `{type: etcd, endpoints: ["${etcd.endpoint}"], dial_timeout: 1s}`,
      discovery: false,
      async prepare() {
        const writer = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/kube-discovery/'});
        const lease = await writer.grantLease(120_000);
        for (let i = 0; i < CLUSTERS; i++) {
          const name = `c${i}-eks-us-east-1-111111111111`;
          const doc = {kind: 'kube_server', version: 'v3', metadata: {name, expires: new Date(Date.now() + 120_000).toISOString()}, spec: {cluster: {kind: 'kube_cluster', metadata: {name: `c${i}`, labels: {}}, spec: {}}}};
          await writer.put(kubeServerKey('faults', name), JSON.stringify(doc), {lease});
        }
        await writer.close();
      },
      inject: async () => etcd.kill(),
      clear: async () => etcd.restart(),
    });
    expectServedThroughout(seen, {reason: 'unreachable', operation: 'read', entriesAfter: CLUSTERS});
    expect(seen.statusDuringFault.inventory.stale).toBe(true);
    // The unauthenticated answer names the class only, never the endpoint.
    expect(JSON.stringify(seen.readyDuringFault.body)).not.toContain('127.0.0.1');
  });

  it('etcd down longer than the TTL under the writing leader, then restarted (etcd renews its leases): no gap while it recovers, and the cluster found meanwhile is registered', async () => {
    const seen = await runRegistryFaultScenario({
      storage: `{type: etcd, endpoints: ["${etcd.endpoint}"], prefix: /leader-restart/, dial_timeout: 1s}`,
      inject: async () => etcd.kill(),
      async clear(svc) {
        await etcd.restart();
        // The client pauses an endpoint whose calls failed for a few real seconds: recovery starts once it answers.
        await vi.waitFor(() => svc.runtime.backend.ping(), ROUND_TRIP);
      },
    });
    expectServedThroughout(seen, {reason: 'unreachable'});
  });

  it('the leader\'s election entry deleted and put back under it (a restore, a hand edit: another create revision): it steps down and leads again with a fence that holds; no gap, and the cluster found meanwhile is registered', async () => {
    const prefix = '/fence-recreated/';
    // The service reaches etcd through a proxy that holds back what etcd tells it while the entry
    // is replaced, so the leader hears of the delete and the put together (as after a restore).
    const proxy = await startTcpProxy(etcd.endpoint);
    const admin = new Etcd3({hosts: [etcd.endpoint]});
    try {
      const seen = await runRegistryFaultScenario({
        storage: `{type: etcd, endpoints: ["${proxy.endpoint}"], prefix: ${prefix}, dial_timeout: 1s}`,
        async inject() {
          proxy.hold();
          try {
            const [entry] = (await admin.getAll().prefix(`${prefix}election/faults/`).exec()).kvs;
            if (!entry) throw new Error('no election entry: the service does not lead');
            await admin.delete().key(entry.key).exec();
            await admin.put(entry.key).value(entry.value).lease(entry.lease).exec();
          } finally {
            proxy.release();
          }
        },
        // Heals itself: the next term writes.
        clear: async () => undefined,
      });
      expectServedThroughout(seen, {refusedWrites: true});
    } finally {
      admin.close();
      await proxy.close();
    }
  });
});

describe('registry faults on the Kubernetes API', () => {
  let kube: KubeEnv;
  let admin: KubeClient;
  // A fresh API server a row: what one row registered is not the next row's registry.
  beforeEach(async () => {
    kube = await startKubeEnv();
    admin = await kube.client();
  });
  afterEach(async () => {
    await kube?.close();
  });
  // No rate limit to wait out in real time, and each clock step waits for the API calls it caused.
  const driver = (): Pick<RegistryFaultDriver, 'storage' | 'afterStep'> => ({
    storage: `{type: kubernetes, namespace: kd, kubeconfig: "${kube.kubeconfigPath}", qps: 1000, burst: 1000}`,
    afterStep: () => quiet(kube.server),
  });
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/kd/leases/${electionLeaseName('faults')}`;

  it('heartbeat.ttl 30s on kubernetes, one replica leading on its Lease', async () => {
    expectServedThroughout(await runRegistryFaultScenario({...driver(), ...noFault}), {});
  });

  it('the election Lease applied again without leaseDurationSeconds (a manifest, a GitOps tool; valid to the API server): the leader keeps leading and writes its duration back; no gap, and the cluster found meanwhile is registered', async () => {
    const seen = await runRegistryFaultScenario({
      ...driver(),
      async inject() {
        const lease = (await admin.request({method: 'GET', path: leasePath})) as {metadata: Record<string, unknown>; spec: Record<string, unknown>};
        const {leaseDurationSeconds: _dropped, ...spec} = lease.spec;
        await admin.request({method: 'PUT', path: leasePath, body: {...lease, spec}});
      },
      clear: async () => undefined,
    });
    expectServedThroughout(seen, {});
  });

  it('the election Lease deleted under the leader (kubectl delete lease): it creates it again and keeps leading; no gap, and the cluster found meanwhile is registered', async () => {
    const seen = await runRegistryFaultScenario({
      ...driver(),
      inject: async () => void (await admin.request({method: 'DELETE', path: leasePath})),
      clear: async () => undefined,
    });
    expectServedThroughout(seen, {});
  });
});
