/**
 * Adversarial: the wall clock of the replica that owns the entries steps forward past their TTL
 * (`storage: kubernetes`, against the fake API server). No time passed: the replica keeps its
 * Lease renewed. Its reaper, its reads and its next keepalive must not take the step for a lapsed
 * Lease — the reaper would delete every KubeServer it wrote.
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {SteppedClock} from '../helpers/stepped-clock.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

let env: KubeEnv;
let clock: SteppedClock;
let backend: KubernetesBackend;

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new SteppedClock();
  backend = new KubernetesBackend({client: await env.client(), namespace: 'kd', clock});
});
afterEach(async () => {
  await backend.close();
  await env.close();
});

const doc = (name: string): string => JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name}, spec: {cluster: {kind: 'kube_cluster', metadata: {name, labels: {}}, spec: {}}}});

it('a forward wall clock step past the TTL leaves the owner’s entries in place', async () => {
  const lease = await backend.grantLease(30_000);
  for (const name of ['a', 'b', 'c']) await backend.put(`kube_servers/g/${name}`, doc(name), {lease});

  clock.offsetMs = 3_600_000;
  expect((await backend.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b', 'kube_servers/g/c']);
  expect(await backend.reapExpired()).toBe(0);
  await backend.keepAlive(lease);
  expect((await backend.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b', 'kube_servers/g/c']);
});
