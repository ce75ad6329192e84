/**
 * Adversarial: on `storage: kubernetes`, a follower replica re-lists while a new leader takes over.
 * Its listing reads the KubeServers, then the Leases. In between, the new leader moves every entry
 * onto its own Lease and the old leader's lapsed Lease is deleted (its reaper); the follower's watch
 * lags (the Lease read it needs for the moves waits behind the listing in the client's queue, or an
 * API server answers it slowly). The listing found every entry on a Lease the later Lease list lacks
 * and left them all out, although each had been moved onto the new leader's live Lease: the
 * follower dropped every cluster from /v1/kube_servers and told its /v1/watch clients they were
 * deleted, while the leader and the registry held every one (they came back once the watch caught up).
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const GROUP = 'takeover';
const NAMES = ['alpha', 'beta', 'delta', 'gamma'];

let env: KubeEnv;
let oldLeader: KubernetesBackend;
let newLeader: KubernetesBackend;
let follower: KubernetesBackend;
let inventory: Inventory | undefined;

beforeEach(async () => {
  env = await startKubeEnv();
  // No purge ticks of their own here: the follower's listing is what is under test.
  const quiet = {namespace: 'kd', clock: systemClock, purgeIntervalMs: 3_600_000};
  oldLeader = new KubernetesBackend({...quiet, client: await env.clientAs('old'), identity: 'old'});
  newLeader = new KubernetesBackend({...quiet, client: await env.clientAs('new'), identity: 'new'});
  follower = new KubernetesBackend({...quiet, client: await env.clientAs('follower'), identity: 'follower'});
});
afterEach(async () => {
  env.server.setFault(undefined);
  await inventory?.stop();
  inventory = undefined;
  await follower.close();
  await newLeader.close();
  await oldLeader.close();
  await env.close();
});

const doc = (name: string): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {}}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

it('keeps every cluster the new leader moved onto its Lease while the follower listed', async () => {
  const oldLease = await oldLeader.grantLease(600_000);
  for (const name of NAMES) await oldLeader.put(`kube_servers/${GROUP}/${name}`, doc(name), {lease: oldLease});
  inventory = new Inventory({backend: follower, group: GROUP, clock: systemClock, resyncMs: 3_600_000});
  await inventory.start();
  expect(inventory.list().map((s) => s.metadata.name)).toEqual(NAMES);
  const deleted: string[] = [];
  inventory.subscribe((event) => {
    if (event.type === 'delete') deleted.push(event.name);
  });

  // The take-over, while the follower's Lease list is on its way.
  const takeover = async (): Promise<void> => {
    const lease = await newLeader.grantLease(600_000);
    for (const name of NAMES) await newLeader.put(`kube_servers/${GROUP}/${name}`, doc(name), {lease});
    // The old Lease lapsed and is gone (the new leader's reaper deletes it).
    await newLeader.revokeLease(oldLease);
  };
  let relisted!: () => void;
  const relistDone = new Promise<void>((resolve) => {
    relisted = resolve;
  });
  let armed = true;
  env.server.setFault((call) => {
    if (call.user !== 'follower' || call.method !== 'GET' || call.watch) return undefined;
    if (armed && call.path.endsWith('/leases')) {
      armed = false;
      return {until: takeover()};
    }
    // The follower's watch reads the new Lease for the moves: that answer comes after the listing.
    if (/\/leases\/[^/]+$/.test(call.path)) return {until: relistDone};
    return undefined;
  });
  await inventory.resync();
  relisted();

  expect((await newLeader.list(`kube_servers/${GROUP}/`)).map((i) => i.key.split('/').pop()), 'the registry holds every cluster').toEqual(NAMES);
  expect(deleted, 'clusters the follower told its watchers were deleted').toEqual([]);
  expect(inventory.list().map((s) => s.metadata.name)).toEqual(NAMES);
});

it("tells no watcher a cluster was deleted when the old Lease is gone while the follower's watch is still applying the moves", async () => {
  await follower.close();
  // The follower checks its entries' Leases every second, as by default.
  follower = new KubernetesBackend({namespace: 'kd', clock: systemClock, client: await env.clientAs('follower'), identity: 'follower'});
  const oldLease = await oldLeader.grantLease(600_000);
  for (const name of NAMES) await oldLeader.put(`kube_servers/${GROUP}/${name}`, doc(name), {lease: oldLease});
  inventory = new Inventory({backend: follower, group: GROUP, clock: systemClock, resyncMs: 3_600_000});
  await inventory.start();
  const deleted: string[] = [];
  inventory.subscribe((event) => {
    if (event.type === 'delete') deleted.push(event.name);
  });

  // The follower's watch needs the new Lease for the moves; that read is answered late.
  let answer!: () => void;
  const late = new Promise<void>((resolve) => {
    answer = resolve;
  });
  env.server.setFault((call) => (call.user === 'follower' && call.method === 'GET' && !call.watch && /\/leases\/[^/]+$/.test(call.path) ? {until: late} : undefined));
  const lease = await newLeader.grantLease(600_000);
  for (const name of NAMES) await newLeader.put(`kube_servers/${GROUP}/${name}`, doc(name), {lease});
  await newLeader.revokeLease(oldLease);
  // Two of the follower's Lease checks after the old Lease is gone.
  const mark = env.server.calls.length;
  const checks = (): number => env.server.calls.slice(mark).filter((c) => c.user === 'follower' && !c.watch && c.path.endsWith('/leases')).length;
  while (checks() < 2) await new Promise((resolve) => setTimeout(resolve, 50));
  answer();
  while (inventory.storedOnLease('alpha', lease.id) !== true) await new Promise((resolve) => setTimeout(resolve, 50));

  expect(deleted, 'clusters the follower told its watchers were deleted').toEqual([]);
  expect(inventory.list().map((s) => s.metadata.name)).toEqual(NAMES);
});
