/**
 * Adversarial: on `storage: kubernetes` a replica's registry watch reads the Lease a changed
 * KubeServer names before handing the change on (src/registry/kubernetes.ts `KubeWatch`). When a
 * new leader moves the entries onto its new Lease, the first event names a Lease the replica has
 * not listed yet, so it is read with one GET; when that GET fails (a 503, a 429 from API priority
 * and fairness during the take-over's burst of writes) the event was dropped and the watch's view
 * kept the entry on the previous leader's Lease: nothing ever listed again while the stream stayed
 * up. Once that Lease lapsed (the previous leader is gone), the watch's Lease check sent a `delete`
 * for an entry alive on the new leader's Lease: the replica's /v1/kube_servers lost the cluster and
 * its /v1/watch readers got a `delete`, though no listing lacked it.
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import {Inventory} from '../../src/inventory/inventory.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {startKubeEnv, quiet, type KubeEnv} from '../kubernetes/kube-env.ts';

const TTL_MS = 10_000;

let env: KubeEnv;
let clock: FakeClock;
let previous: KubernetesBackend;
let next: KubernetesBackend;
let follower: KubernetesBackend;
let inventory: Inventory | undefined;

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
  previous = new KubernetesBackend({client: await env.clientAs('previous'), namespace: 'kd', clock, identity: 'previous'});
  next = new KubernetesBackend({client: await env.clientAs('next'), namespace: 'kd', clock, identity: 'next'});
  follower = new KubernetesBackend({client: await env.clientAs('follower'), namespace: 'kd', clock, identity: 'follower'});
});
afterEach(async () => {
  env.server.setFault(undefined);
  await inventory?.stop();
  inventory = undefined;
  await follower.close();
  await next.close();
  await previous.close();
  await env.close();
});

const doc = (name: string): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {}}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

async function until(what: string, check: () => boolean): Promise<void> {
  const end = Date.now() + 15_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

it("keeps serving an entry moved onto a new leader's Lease when reading that Lease for the watch failed once", async () => {
  const oldLease = await previous.grantLease(TTL_MS);
  for (const name of ['a', 'b']) await previous.put(`kube_servers/g/${name}`, doc(name), {lease: oldLease});
  inventory = new Inventory({backend: follower, group: 'g', clock, resyncMs: 3_600_000});
  await inventory.start();
  const deletes: string[] = [];
  inventory.subscribe((event) => {
    if (event.type === 'delete') deletes.push(event.name);
  });
  expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b']);

  // The take-over: a new Lease, every entry moved onto it. The follower's first read of that Lease fails.
  const newLease = await next.grantLease(TTL_MS);
  let refused = 0;
  env.server.setFault((call) =>
    call.user === 'follower' && call.method === 'GET' && !call.watch && call.path.endsWith(`/leases/${newLease.id}`) && refused++ === 0
      ? {status: 503, body: '{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}'}
      : undefined,
  );
  for (const name of ['a', 'b']) await next.put(`kube_servers/g/${name}`, doc(name), {lease: newLease});
  await until('the follower to see the moves', () => refused >= 1 && inventory?.storedOnLease('b', newLease.id) === true);
  await quiet(env.server);
  env.server.setFault(undefined);

  // The previous leader is gone: its Lease lapses. The new leader keeps renewing its own.
  for (let t = 0; t < 3 * TTL_MS; t += 1_000) {
    await next.keepAlive(newLease);
    await clock.advance(1_000);
    await quiet(env.server);
  }

  // The registry holds both entries on the renewed Lease.
  expect((await next.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b']);
  expect({served: inventory.list().map((s) => s.metadata.name), deletes}, "a delete for an entry alive on the new leader's Lease").toEqual({served: ['a', 'b'], deletes: []});
}, 60_000);
