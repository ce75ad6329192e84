/**
 * Adversarial: on `storage: kubernetes` a deregistration deletes the cluster's KubeServer. When
 * another controller put a finalizer on it (a backup or policy tool, `kubectl delete
 * --cascade=foreground`), the API server answers the DELETE with success and only marks the object
 * (deletionTimestamp): it stays until that finalizer is removed. When the cluster was listed again
 * meanwhile, the backend wrote it onto the marked object with a PUT, which sends no finalizers: the
 * last one gone, the API server deleted the object at once, and answered the write 200. The cluster
 * counted as registered, yet it left the registry, /v1/kube_servers and /v1/watch (a `delete`)
 * until a later cycle created it again. Kept, the finalizer would only have put the loss off to
 * when its controller removes it.
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import {Inventory} from '../../src/inventory/inventory.ts';
import {KubeApiError, type KubeClient} from '../../src/registry/kube-client.ts';
import {objectNameForKey} from '../../src/registry/kube-names.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {quiet, startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const TTL_MS = 60_000;
const KEY = 'kube_servers/g/web';
const PATH = `/apis/kube-discovery.io/v1/namespaces/kd/kubeservers/${objectNameForKey(KEY)}`;

let env: KubeEnv;
let clock: FakeClock;
let leader: KubernetesBackend;
let follower: KubernetesBackend;
/** Another controller's client (what `kubectl` or a policy tool does to the object). */
let other: KubeClient;
let inventory: Inventory | undefined;

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
  leader = new KubernetesBackend({client: await env.clientAs('leader'), namespace: 'kd', clock, identity: 'leader'});
  follower = new KubernetesBackend({client: await env.clientAs('follower'), namespace: 'kd', clock, identity: 'follower'});
  other = await env.clientAs('backup-controller');
});
afterEach(async () => {
  await inventory?.stop();
  inventory = undefined;
  await follower.close();
  await leader.close();
  await env.close();
});

const doc = (name: string, revision: string): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {rev: revision}}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

/** Sets the object's finalizers as the other controller; an object already gone is nothing to do. */
const finalizers = (list: string[]): Promise<unknown> =>
  other.request({method: 'PATCH', path: PATH, contentType: 'application/merge-patch+json', body: {metadata: {finalizers: list}}})
    .catch((err: unknown) => {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    });

it('a cluster registered again while its deleted KubeServer waits on a finalizer stays registered once the finalizer goes', async () => {
  const lease = await leader.grantLease(TTL_MS);
  await leader.put(KEY, doc('web', '1'), {lease});
  await finalizers(["backup.example.com/protect"]);
  inventory = new Inventory({backend: follower, group: 'g', clock, resyncMs: 3_600_000});
  await inventory.start();

  // The cluster leaves its listing: deregistered; the API server answers with success and keeps the object.
  await leader.delete(KEY);
  // Listed again next cycle: registered again, answered with success.
  const registered = await leader.put(KEY, doc('web', '2'), {lease});
  expect(registered.key).toBe(KEY);
  await quiet(env.server);
  const deletes: string[] = [];
  inventory.subscribe((event) => {
    if (event.type === 'delete') deletes.push(event.name);
  });

  // The other controller is done: it removes its finalizer, and the object it held goes.
  await finalizers([]);
  await quiet(env.server);
  await inventory.resync();

  expect((await leader.list('kube_servers/g/')).map((i) => JSON.parse(i.value).metadata.labels.rev), 'the registry').toEqual(['2']);
  expect({served: inventory.list().map((s) => `${s.metadata.name}@${s.metadata.labels?.['rev']}`), deletes}, 'the follower\'s readers').toEqual({served: ['web@2'], deletes: []});

  // Deregistered for good: nothing of it is left behind.
  await leader.delete(KEY);
  await quiet(env.server);
  await inventory.resync();
  expect(env.server.listObjects('kube-discovery.io', 'kubeservers', 'kd')).toEqual([]);
  expect({served: inventory.list(), deletes}).toEqual({served: [], deletes: ['web']});
}, 60_000);

it("an update keeps another controller's finalizer on the KubeServer", async () => {
  const lease = await leader.grantLease(TTL_MS);
  await leader.put(KEY, doc('web', '1'), {lease});
  await finalizers(['backup.example.com/protect']);
  await leader.put(KEY, doc('web', '2'), {lease});
  expect(env.server.getObject('kube-discovery.io', 'kubeservers', 'kd', objectNameForKey(KEY))?.metadata.finalizers).toEqual(['backup.example.com/protect']);
  expect((await leader.list('kube_servers/g/')).map((i) => JSON.parse(i.value).metadata.labels.rev)).toEqual(['2']);
}, 60_000);
