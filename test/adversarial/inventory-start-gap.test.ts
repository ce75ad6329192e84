/**
 * Adversarial: the inventory starts by listing the registry, then opens the backend's watch — from
 * "now", not from the listing's revision (src/inventory/inventory.ts `start`). A write that lands in
 * between (the leader registering clusters while a follower starts or restarts; a rolling update
 * during a large cycle) is in neither: the replica serves /v1/kube_servers and /v1/watch without
 * that cluster until its next periodic re-list (30 s by default), although the registry has it.
 * On etcd the watch starts at the revision etcd answers its creation with; on Kubernetes the watch
 * lists again itself, and what that second listing adds is never handed to the inventory.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import type {RegistryBackend} from '../../src/registry/backend.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {describeOnEtcd} from '../helpers/etcd.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const GROUP = 'start-gap';

const doc = (name: string, n = 0): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {n: String(n)}}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

/** The follower's backend, whose watch opens only after the leader's write `between` has landed: the time a watch takes to open. */
function watchOpensAfter(backend: RegistryBackend, between: () => Promise<unknown>): RegistryBackend {
  return new Proxy(backend, {
    get(target, key) {
      if (key === 'watch') return async (...args: Parameters<RegistryBackend['watch']>) => (await between(), target.watch(...args));
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

async function until(what: string, check: () => boolean): Promise<void> {
  const end = Date.now() + 15_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The scenario: `leader` writes, `follower` is the starting replica's registry client. */
async function scenario(leader: RegistryBackend, follower: RegistryBackend): Promise<void> {
  const lease = await leader.grantLease(600_000);
  await leader.put(`kube_servers/${GROUP}/first`, doc('first'), {lease});
  const inventory = new Inventory({
    backend: watchOpensAfter(follower, () => leader.put(`kube_servers/${GROUP}/between`, doc('between'), {lease})),
    group: GROUP,
    clock: systemClock,
    resyncMs: 3_600_000,
  });
  try {
    await inventory.start();
    // The watch is open: a later write reaches the inventory.
    for (let i = 0; i < 100 && inventory.get('later') === undefined; i++) {
      await leader.put(`kube_servers/${GROUP}/later`, doc('later', i), {lease});
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await until('a write after the watch opened to reach the inventory', () => inventory.get('later') !== undefined);
    expect((await leader.list(`kube_servers/${GROUP}/`)).map((i) => i.key.split('/').pop())).toEqual(['between', 'first', 'later']);
    expect(inventory.list().map((s) => s.metadata.name), 'the cluster registered between the listing and the watch is not served (until the next re-list)').toEqual(['between', 'first', 'later']);
  } finally {
    await inventory.stop();
    await leader.revokeLease(lease).catch(() => undefined);
  }
}

describeOnEtcd('an inventory starting while the leader writes (etcd)', (etcd) => {
  it('serves a cluster registered between its first listing and its watch', async () => {
    const leader = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/start-gap/', requestTimeoutMs: 2_000});
    const follower = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/start-gap/', requestTimeoutMs: 2_000});
    try {
      await scenario(leader, follower);
    } finally {
      await follower.close();
      await leader.close();
    }
  }, 60_000);
});

describe('an inventory starting while the leader writes (Kubernetes)', () => {
  let kube: KubeEnv;
  beforeAll(async () => {
    kube = await startKubeEnv();
  });
  afterAll(() => kube.close());

  it('serves a cluster registered between its first listing and its watch', async () => {
    const leader = new KubernetesBackend({client: await kube.clientAs('leader'), namespace: 'kd', clock: systemClock, identity: 'leader'});
    const follower = new KubernetesBackend({client: await kube.clientAs('follower'), namespace: 'kd', clock: systemClock, identity: 'follower'});
    try {
      await scenario(leader, follower);
    } finally {
      await follower.close();
      await leader.close();
    }
  }, 60_000);
});
