/**
 * Adversarial: on `storage: kubernetes`, a follower replica judges the leader's Lease by the
 * Lease's `renewTime` (written by the leader's wall clock) against its own wall clock. When the two
 * clocks disagree — a node whose NTP is off by a few minutes — the follower takes the leader's
 * live, renewed Lease for lapsed: its registry reads leave out every entry on it, and its inventory
 * serves /v1/kube_servers without them (its /v1/watch clients get a `delete` for each), although
 * the leader keeps renewing and the registry holds every entry. The leader's own Lease is already
 * judged on elapsed time (kube-clock-step.test.ts); Kubernetes' own leader election judges another
 * holder's Lease by when this replica saw its renewal change, never by the holder's clock.
 *
 * With the default TTL (10 min) and keepalive (every 3 min 20 s), a follower 6 min 41 s ahead of the
 * leader hides everything for the end of every keepalive interval. Here the leader has just renewed,
 * so the follower is put a whole TTL ahead, which is the same sum.
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {SteppedClock} from '../helpers/stepped-clock.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const TTL_MS = 600_000;
const KEEPALIVE_MS = TTL_MS / 3;

let env: KubeEnv;
let leader: KubernetesBackend;
let follower: KubernetesBackend;
let followerClock: SteppedClock;
let inventory: Inventory | undefined;

beforeEach(async () => {
  env = await startKubeEnv();
  followerClock = new SteppedClock();
  leader = new KubernetesBackend({client: await env.clientAs('leader'), namespace: 'kd', clock: systemClock, identity: 'leader', reap: true});
  follower = new KubernetesBackend({client: await env.clientAs('follower'), namespace: 'kd', clock: followerClock, identity: 'follower'});
});
afterEach(async () => {
  await inventory?.stop();
  inventory = undefined;
  await follower.close();
  await leader.close();
  await env.close();
});

const doc = (name: string): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {}}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

it("a follower whose wall clock runs ahead of the leader's still serves the leader's entries", async () => {
  const lease = await leader.grantLease(TTL_MS);
  for (const name of ['a', 'b']) await leader.put(`kube_servers/g/${name}`, doc(name), {lease});
  await leader.keepAlive(lease);

  // The leader renewed KEEPALIVE_MS - 1 s ago as the follower's clock reads it, and the follower runs
  // TTL - KEEPALIVE_MS + 2 s (6 min 42 s) ahead: together a little more than the TTL.
  followerClock.offsetMs = KEEPALIVE_MS - 1_000 + (TTL_MS - KEEPALIVE_MS + 2_000);

  // The registry holds both entries on a Lease its holder is renewing.
  expect((await leader.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b']);
  expect(await leader.reapExpired()).toBe(0);

  inventory = new Inventory({backend: follower, group: 'g', clock: followerClock, resyncMs: 3_600_000});
  await inventory.start();
  expect(
    inventory.list().map((s) => s.metadata.name),
    "the follower took the leader's renewed Lease for lapsed and serves none of its entries",
  ).toEqual(['a', 'b']);
});

it('a replica that takes over with its wall clock ahead moves the previous leader’s entries onto its lease instead of deleting them', async () => {
  const lease = await leader.grantLease(TTL_MS);
  for (const name of ['a', 'b']) await leader.put(`kube_servers/g/${name}`, doc(name), {lease});
  await leader.keepAlive(lease);
  // The previous leader has just renewed and steps down (leadership moved); the new leader's clock is
  // ahead as above. Its take-over reads the group's entries to move them onto its own lease
  // (src/service/reannounce.ts: registrar.current(), a list), and as leader it reaps what lapsed.
  followerClock.offsetMs = KEEPALIVE_MS - 1_000 + (TTL_MS - KEEPALIVE_MS + 2_000);
  const toMove = (await follower.list('kube_servers/g/')).map((i) => i.key);
  follower.setReaper(true);
  const reaped = await follower.reapExpired();
  expect({toMove, reaped, stored: (await leader.list('kube_servers/g/')).map((i) => i.key)}, 'the new leader found nothing to move and deleted the entries of a Lease renewed moments ago').toEqual({
    toMove: ['kube_servers/g/a', 'kube_servers/g/b'],
    reaped: 0,
    stored: ['kube_servers/g/a', 'kube_servers/g/b'],
  });
});
