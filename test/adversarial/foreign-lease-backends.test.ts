/**
 * The heartbeat asks the inventory which lease each stored entry hangs on, to move an entry
 * another writer re-put on a lease of its own back onto ours (foreign-lease-overwrite.test.ts).
 * On the backends whose inventory follows a watch (etcd, Kubernetes) that answer must name the
 * heartbeat's own lease the way the heartbeat does: otherwise every unchanged entry would look
 * foreign and be written again every cycle. Real etcd and a real Kubernetes API server.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerKey, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import type {RegistryBackend} from '../../src/registry/backend.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {describeOnEtcd} from '../helpers/etcd.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const GROUP = 'fl';
const NAME = 'prod-eks-us-east-1-111111111111';

function draft(): KubeServerDraft {
  const labels = {env: 'prod'};
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name: NAME, labels},
    spec: {
      cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name: NAME, description: 'EKS cluster prod', labels}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name: 'prod'}}},
      proxy_ids: [],
    },
  };
}

/** The backend, counting puts. */
function counting(backend: RegistryBackend): {view: RegistryBackend; puts: () => number} {
  let puts = 0;
  const view = new Proxy(backend, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'put') return (...args: Parameters<RegistryBackend['put']>) => (puts++, target.put(...args));
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {view, puts: () => puts};
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The scenario on one registry: `writer` is the service's, `other` another writer's. */
async function scenario(writer: RegistryBackend, other: RegistryBackend): Promise<void> {
  const inventory = new Inventory({backend: writer, group: GROUP, clock: systemClock, resyncMs: 3_600_000});
  await inventory.start();
  const {view, puts} = counting(writer);
  // Wired as the service wires it (src/service/service.ts): the inventory's copies and leases.
  const heartbeat = new Heartbeat({
    backend: view,
    clock: systemClock,
    group: GROUP,
    ttlMs: 600_000,
    hostId: 'h',
    hostname: 'n',
    version: 't',
    stored: (name, revision) => inventory.stored(name, revision),
    storedOnLease: (name, lease) => inventory.storedOnLease(name, lease),
  });
  await heartbeat.start();
  try {
    const lease = heartbeat.lease?.id as string;
    await heartbeat.announce(draft());
    await until('the inventory to hold the entry', () => inventory.storedOnLease(NAME, lease) === true);
    const written = puts();
    await heartbeat.announce(draft());
    await heartbeat.announce(draft());
    expect(puts(), 'an unchanged entry on our lease was written again').toBe(written);

    const foreign = await other.grantLease(60_000);
    const key = kubeServerKey(GROUP, NAME);
    await other.put(key, (await other.get(key))?.value ?? '', {lease: foreign});
    await until('the inventory to see the other lease', () => inventory.storedOnLease(NAME, lease) === false);
    await heartbeat.announce(draft());
    expect(puts()).toBe(written + 1);
    expect((await other.get(key))?.lease).toBe(lease);
    await other.revokeLease(foreign);
    expect(await other.get(key), 'the entry left with the other lease').toBeDefined();
  } finally {
    await heartbeat.stop({deregister: true});
    await inventory.stop();
  }
}

describeOnEtcd('an entry on a foreign lease, etcd', (etcd) => {
  it('is moved back onto our lease, and an entry on ours is not written again', async () => {
    const writer = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/foreign-lease/', requestTimeoutMs: 2_000});
    const other = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/foreign-lease/', requestTimeoutMs: 2_000});
    try {
      await scenario(writer, other);
    } finally {
      await other.close();
      await writer.close();
    }
  });
});

describe('an entry on a foreign lease, Kubernetes', () => {
  let kube: KubeEnv;
  beforeAll(async () => {
    kube = await startKubeEnv();
  });
  afterAll(() => kube.close());

  it('is moved back onto our lease, and an entry on ours is not written again', async () => {
    const writer = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock: systemClock, identity: 'leader'});
    const other = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock: systemClock, identity: 'other'});
    try {
      await scenario(writer, other);
    } finally {
      await other.close();
      await writer.close();
    }
  });
});
