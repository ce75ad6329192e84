/**
 * Adversarial: on `storage: kubernetes` (and any storage under `leader_election: kubernetes_lease`)
 * a leader writes through a fenced view that refuses a write once the leader could not renew its
 * election Lease (src/registry/fenced-view.ts). The check ran when the write was asked for; the
 * request itself may leave much later: it waits its turn in the client's rate limit (a cycle's
 * burst of writes at 20 QPS), and a write answered 409 is read and sent again inside the backend.
 * A leader deposed meanwhile (an API-server blip longer than its renew deadline) still sent them:
 * after the new leader had moved every entry onto its own Lease, the old leader's late writes
 * (409, re-read, written on top) moved them back onto the old leader's Lease, which nobody renews
 * any more. One TTL later the entries lapsed for every reader and the new leader's reaper deleted
 * them, though every listing still had the clusters (until the new leader's next cycle, which with
 * a poll interval longer than the TTL comes after).
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import type {KubeClient} from '../../src/registry/kube-client.ts';
import {fencedView} from '../../src/registry/fenced-view.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {quiet, startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const TTL_MS = 10_000;
const PREFIX = 'kube_servers/g/';
const NAMES = ['a', 'b', 'c', 'd'];

let env: KubeEnv;
let clock: FakeClock;
let previous: KubernetesBackend;
let next: KubernetesBackend;
let release: () => void = () => undefined;

/**
 * The real client, whose KubeServer writes wait (as in a busy rate-limit queue) while `held` is
 * set: `waiting` resolves once one waits, `release` lets them all go.
 */
function queued(client: KubeClient): {client: KubeClient; hold: () => Promise<void>} {
  let gate: Promise<void> | undefined;
  let reached: () => void = () => undefined;
  return {
    client: {
      server: client.server,
      namespace: client.namespace,
      watch: (...args) => client.watch(...args),
      async request(req) {
        if (gate && req.method !== 'GET' && req.path.includes('/kubeservers')) {
          reached();
          await gate;
        }
        return client.request(req);
      },
    },
    hold: () => {
      gate = new Promise<void>((resolve) => (release = () => {
        gate = undefined;
        resolve();
      }));
      return new Promise<void>((resolve) => (reached = resolve));
    },
  };
}

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
});
afterEach(async () => {
  release();
  await next.close();
  await previous.close();
  await env.close();
});

const doc = (name: string, revision: string): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {rev: revision}}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

it("a deposed leader's writes still waiting to be sent do not move entries off the new leader's Lease", async () => {
  const slow = queued(await env.clientAs('previous'));
  previous = new KubernetesBackend({client: slow.client, namespace: 'kd', clock, identity: 'previous'});
  next = new KubernetesBackend({client: await env.clientAs('next'), namespace: 'kd', clock, identity: 'next'});
  let leading = true;
  const view = fencedView(previous, () => leading, 'the leader Lease of the test');
  const oldLease = await previous.grantLease(TTL_MS);
  for (const name of NAMES) await view.put(`${PREFIX}${name}`, doc(name, '1'), {lease: oldLease});

  // The old leader's cycle updates every cluster; the writes wait their turn. Then it is deposed.
  const waiting = slow.hold();
  const late = NAMES.map((name) => view.put(`${PREFIX}${name}`, doc(name, '2'), {lease: oldLease}));
  await waiting;
  leading = false;

  // The new leader takes over: its own Lease, every entry moved onto it.
  const newLease = await next.grantLease(TTL_MS);
  for (const item of await next.list(PREFIX)) await next.put(item.key, item.value, {lease: newLease});
  release();
  // Refused when their turn came, as they would have been when asked for after the deposition.
  expect((await Promise.allSettled(late)).map((r) => (r.status === 'rejected' ? (r.reason as Error).name : r.status))).toEqual(NAMES.map(() => 'FencedError'));
  await quiet(env.server);

  // The old leader is gone; the new one renews its Lease and reaps what lapsed.
  for (let t = 0; t < 2 * TTL_MS; t += 1_000) {
    await next.keepAlive(newLease);
    await clock.advance(1_000);
  }
  await next.reapExpired();
  expect((await next.list(PREFIX)).map((i) => `${i.key.slice(PREFIX.length)} on ${i.lease === newLease.id ? 'the new Lease' : i.lease}`)).toEqual(NAMES.map((n) => `${n} on the new Lease`));
}, 60_000);
