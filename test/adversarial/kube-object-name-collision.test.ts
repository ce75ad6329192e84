/**
 * Adversarial: on `storage: kubernetes` a kube_server `kube_servers/<group>/<name>` is stored as the
 * KubeServer object `<group>.<name>` when that is a valid object name (src/registry/kube-names.ts).
 * Group and kube_server names may both hold dots, so two discovery groups sharing a namespace can
 * map two keys onto one object: `prod` / `eu.web` and `prod.eu` / `web` are both `prod.eu.web`.
 * The second writer's create was answered `409 AlreadyExists`, and the backend read the object and
 * wrote over it: the first group's cluster left its registry listing and every reader of that group
 * (/v1/kube_servers, /v1/watch got a `delete`), although its cloud listing still had it. When the
 * second group then deregistered its own cluster, it deleted the object, whoever's it was.
 */
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Inventory} from '../../src/inventory/inventory.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {quiet, startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const TTL_MS = 60_000;

let env: KubeEnv;
let clock: FakeClock;
let prod: KubernetesBackend;
let prodEu: KubernetesBackend;
let inventory: Inventory | undefined;

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
  // Two deployments (discovery groups `prod` and `prod.eu`) with one registry namespace.
  prod = new KubernetesBackend({client: await env.clientAs('prod'), namespace: 'kd', clock, identity: 'prod'});
  prodEu = new KubernetesBackend({client: await env.clientAs('prod-eu'), namespace: 'kd', clock, identity: 'prod-eu'});
});
afterEach(async () => {
  await inventory?.stop();
  inventory = undefined;
  await prodEu.close();
  await prod.close();
  await env.close();
});

const doc = (name: string): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {}}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

describe('two discovery groups whose keys map onto one object name', () => {
  it("keep each other's clusters: neither a create nor a deregistration of one group touches the other's", async () => {
    const prodLease = await prod.grantLease(TTL_MS);
    await prod.put('kube_servers/prod/eu.web', doc('eu.web'), {lease: prodLease});
    inventory = new Inventory({backend: prod, group: 'prod', clock, resyncMs: 3_600_000});
    await inventory.start();
    const deletes: string[] = [];
    inventory.subscribe((event) => {
      if (event.type === 'delete') deletes.push(event.name);
    });
    expect(inventory.list().map((s) => s.metadata.name)).toEqual(['eu.web']);

    // The other group registers its cluster `web`, then its listing no longer has it.
    const euLease = await prodEu.grantLease(TTL_MS);
    await prodEu.put('kube_servers/prod.eu/web', doc('web'), {lease: euLease});
    expect((await prodEu.list('kube_servers/prod.eu/')).map((i) => i.key)).toEqual(['kube_servers/prod.eu/web']);
    await quiet(env.server);
    expect((await prod.list('kube_servers/prod/')).map((i) => i.key), 'after the other group registered').toEqual(['kube_servers/prod/eu.web']);

    expect(await prodEu.delete('kube_servers/prod.eu/web')).toBe(true);
    await quiet(env.server);
    expect((await prodEu.list('kube_servers/prod.eu/')).map((i) => i.key)).toEqual([]);
    expect((await prod.list('kube_servers/prod/')).map((i) => i.key), 'after the other group deregistered').toEqual(['kube_servers/prod/eu.web']);
    expect((await prod.get('kube_servers/prod/eu.web'))?.key).toBe('kube_servers/prod/eu.web');
    await inventory.resync();
    expect({served: inventory.list().map((s) => s.metadata.name), deletes}).toEqual({served: ['eu.web'], deletes: []});
  }, 60_000);

  it('a restarted writer keeps its key under the one name it took, after the other group freed the shared one', async () => {
    const prodLease = await prod.grantLease(TTL_MS);
    await prod.put('kube_servers/prod/eu.web', doc('eu.web'), {lease: prodLease});
    const euLease = await prodEu.grantLease(TTL_MS);
    await prodEu.put('kube_servers/prod.eu/web', doc('web'), {lease: euLease});
    expect(await prod.delete('kube_servers/prod/eu.web')).toBe(true);
    expect((await prodEu.list('kube_servers/prod.eu/')).map((i) => i.key)).toEqual(['kube_servers/prod.eu/web']);

    // A new process of the `prod.eu` deployment reads the registry (as its heartbeat does), then announces again.
    const restarted = new KubernetesBackend({client: await env.clientAs('prod-eu'), namespace: 'kd', clock, identity: 'prod-eu'});
    try {
      await restarted.list('kube_servers/prod.eu/');
      await restarted.put('kube_servers/prod.eu/web', doc('web'), {lease: (await restarted.resumeLease(euLease.id)) ?? euLease});
      const holding = env.server.listObjects('kube-discovery.io', 'kubeservers', 'kd').filter((o) => (o['spec'] as {key?: unknown}).key === 'kube_servers/prod.eu/web');
      expect(holding, 'objects holding the key').toHaveLength(1);
      expect(await restarted.delete('kube_servers/prod.eu/web')).toBe(true);
      expect(await restarted.list('kube_servers/')).toEqual([]);
    } finally {
      await restarted.close();
    }
  }, 60_000);
});
