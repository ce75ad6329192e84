/**
 * Adversarial: when the heartbeat's lease is lost (an etcd lease that lapsed while the replica was
 * cut off from etcd, a Kubernetes Lease that lapsed or was deleted, a restarted store) it grants a
 * new lease and re-puts every entry it holds. The store that just came back is often still shaky
 * (an etcd leader election, an API server answering 429 while every client reconnects): a re-put
 * that failed its three attempts was never tried again. The entry stayed out of the registry until
 * a cycle wrote it again — and a cycle whose source fails keeps only the entries the registry still
 * has, so the cluster was lost although no listing lacked it.
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import type {RegistryBackend} from '../../src/registry/backend.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerKey, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const TTL = 60_000;
const NAME = 'prod-eks-us-east-1-111111111111';

const draft: KubeServerDraft = {
  kind: 'kube_server',
  version: 'v3',
  metadata: {name: NAME, labels: {env: 'prod'}},
  spec: {
    cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name: NAME, description: 'EKS cluster prod', labels: {env: 'prod'}}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name: 'prod'}}},
    proxy_ids: [],
  },
};

let clock: FakeClock;
let store: MemoryBackend;
let heartbeat: Heartbeat | undefined;

beforeEach(() => {
  clock = new FakeClock();
  store = new MemoryBackend({clock, purgeIntervalMs: 5_000});
});

afterEach(async () => {
  await heartbeat?.stop({deregister: false});
  heartbeat = undefined;
  await store.close();
});

/** `inner` whose next `failPuts` writes fail, as a store that has just come back does. */
function shaky(inner: RegistryBackend): {backend: RegistryBackend; fail(puts: number): void} {
  let failPuts = 0;
  const backend = new Proxy(inner, {
    get(target, prop: keyof RegistryBackend) {
      if (prop === 'put' && failPuts > 0) return () => (failPuts--, Promise.reject(new Error('etcdserver: leader changed')));
      const value = target[prop];
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {backend, fail: (puts) => void (failPuts = puts)};
}

it('re-puts an entry whose re-announce after a lost lease failed, at a later keepalive', async () => {
  const {backend, fail} = shaky(store);
  heartbeat = new Heartbeat({backend, clock, group: 'mgmt', ttlMs: TTL, hostId: 'host-a', hostname: 'discovery-0', version: '0.1.0', retry: {attempts: 3, baseMs: 100}});
  await heartbeat.start();
  await heartbeat.announce(draft);
  const lost = heartbeat.lease;
  // The lease is gone (its entries with it); the store answers again but refuses the first writes.
  if (lost) await store.revokeLease(lost);
  fail(3);
  await clock.advance(TTL / 3);
  expect(heartbeat.lease?.id).not.toBe(lost?.id);

  // The store is fine from here on; the heartbeat keeps its new lease alive for a few TTLs.
  await clock.advance(3 * TTL);
  expect((await store.list('kube_servers/mgmt/')).map((i) => i.key), 'the entry whose re-put failed is never written again').toEqual([kubeServerKey('mgmt', NAME)]);
});
