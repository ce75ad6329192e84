// The kubernetes backend beyond the shared contract: object names and labels, O(1) keepalives,
// rate limits that never starve a keepalive, the reaper, watch recovery, client configuration,
// and THE PROMISE: API-server errors, malformed answers and hangs never make entries vanish.
import {execFile} from 'node:child_process';
import {existsSync, mkdirSync, writeFileSync} from 'node:fs';
import {join} from 'node:path';
import {promisify} from 'node:util';
import {afterEach, beforeEach, describe, expect, it, vi} from 'vitest';
import {loadOrCreateHostId} from '../../heartbeats/host-id.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';
import type {WatchEvent} from '../../src/registry/backend.ts';
import {classifyRegistryError} from '../../src/registry/health.ts';
import {createBackend} from '../../src/registry/index.ts';
import {createKubeClient} from '../../src/registry/kube-client.ts';
import {fencedView} from '../../src/registry/fenced-view.ts';
import {objectNameForKey} from '../../src/registry/kube-names.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {startKubeEnv} from '../kubernetes/kube-env.ts';
import {eventually} from './contract.ts';

const KUBECTL = existsSync('/usr/bin/kubectl') ? '/usr/bin/kubectl' : 'kubectl';
const run = promisify(execFile);
const GROUP = 'kube-discovery.io';

function kubeServerDoc(name: string, labels: Record<string, string>, health = 'healthy'): string {
  return JSON.stringify({
    kind: 'kube_server', version: 'v3',
    metadata: {name, labels, expires: '', revision: ''},
    spec: {version: '0', hostname: 'h', host_id: 'x', proxy_ids: [], cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: '', labels}, spec: {aws: {region: 'eu-west-1', account_id: '1', name}}}},
    status: {target_health: {status: health}},
  });
}

let env: KubeEnv;
let clock: FakeClock;
let backend: KubernetesBackend;

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
  backend = new KubernetesBackend({client: await env.client(), namespace: 'kd', clock});
});
afterEach(async () => {
  env.server.setFault(undefined);
  await backend.close();
  await env.close();
});

describe('objects', () => {
  it('names kube_servers <group>.<name>, maps invalid names deterministically and keeps the original key', async () => {
    expect(objectNameForKey('kube_servers/prod/eks-a')).toBe('prod.eks-a');
    const odd = objectNameForKey('kube_servers/prod/My_Cluster');
    expect(odd).toMatch(/^kube-servers-prod-my-cluster-h[0-9a-f]{10}$/);
    expect(objectNameForKey('kube_servers/prod/My_Cluster')).toBe(odd);
    expect(objectNameForKey('kube_servers/prod/my_cluster')).not.toBe(odd);
    // A valid name that looks hashed is rewritten too, so no key can take another's name.
    expect(objectNameForKey('kube_servers/prod/x-h0123456789')).not.toBe('prod.x-h0123456789');

    await backend.put('kube_servers/prod/My_Cluster', kubeServerDoc('My_Cluster', {env: 'prod'}));
    const stored = env.server.getObject(GROUP, 'kubeservers', 'kd', odd);
    expect(stored?.['spec']).toMatchObject({key: 'kube_servers/prod/My_Cluster', name: 'My_Cluster', cloud: 'aws', region: 'eu-west-1', health: 'healthy', stale: false});
  });

  it('copies the valid kube_server labels onto the object so kubectl can select by them', async () => {
    await backend.put('kube_servers/prod/a', kubeServerDoc('a', {env: 'prod', 'teleport.dev/cloud': 'AWS', 'bad key!': 'x', team: 'not a valid value'}));
    await backend.put('kube_servers/prod/b', kubeServerDoc('b', {env: 'dev'}));
    expect(env.server.getObject(GROUP, 'kubeservers', 'kd', 'prod.a')?.metadata.labels).toEqual({env: 'prod', 'teleport.dev/cloud': 'AWS', 'kube-discovery.io/group': 'prod'});
    const kubectlFound = await run(KUBECTL, ['version', '--client']).then(() => true, () => false);
    if (!kubectlFound) return;
    const {stdout} = await run(KUBECTL, ['--kubeconfig', env.kubeconfigPath, 'get', 'kubeservers', '-l', 'env=prod']);
    expect(stdout).toMatch(/^NAME\s+CLOUD\s+REGION\s+HEALTH\s+STALE\s+AGE\nprod\.a\s+aws\s+eu-west-1\s+healthy\s+false\s+\S+\n$/);
  });

  it('re-writes on top of a concurrent change (resourceVersion precondition, then re-read)', async () => {
    const first = await backend.put('k/a', '1');
    const other = new KubernetesBackend({client: await env.client(), namespace: 'kd', clock});
    await other.put('k/a', '2');
    const third = await backend.put('k/a', '3');
    expect(BigInt(third.revision)).toBeGreaterThan(BigInt(first.revision));
    expect(await other.get('k/a')).toMatchObject({value: '3'});
    const conflicts = env.server.calls.filter((c) => c.method === 'PUT');
    expect(conflicts.length).toBeGreaterThanOrEqual(2);
    await other.close();
  });
});

describe('heartbeats', () => {
  it('keeps 50 entries alive with one API call, a renewal of the replica Lease', async () => {
    const lease = await backend.grantLease(30_000);
    for (let i = 0; i < 50; i++) await backend.put(`kube_servers/g/c${i}`, 'x', {lease});
    await clock.advance(20_000);
    const before = env.server.calls.length;
    await backend.keepAlive(lease);
    const calls = env.server.calls.slice(before);
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([`PATCH /apis/coordination.k8s.io/v1/namespaces/kd/leases/${lease.id}`]);
    const stored = env.server.getObject('coordination.k8s.io', 'leases', 'kd', lease.id);
    expect(stored?.['spec']).toMatchObject({leaseDurationSeconds: 30, renewTime: new Date(clock.now()).toISOString().replace('Z', '000Z')});
    expect((await backend.list('kube_servers/g/'))).toHaveLength(50);
  });

  it('lets a keepalive overtake a queued batch of writes under a tight QPS limit', async () => {
    const slow = new KubernetesBackend({client: await env.client({qps: 20, burst: 1}), namespace: 'kd', clock});
    const lease = await slow.grantLease(30_000);
    const writes = Array.from({length: 12}, (_, i) => slow.put(`kube_servers/g/q${i}`, 'x', {lease}));
    await new Promise((r) => setTimeout(r, 30));
    await slow.keepAlive(lease);
    await Promise.all(writes);
    const order = env.server.calls.filter((c) => c.method !== 'GET').map((c) => c.method);
    const keepAliveAt = order.indexOf('PATCH');
    // The keepalive went out while most writes were still queued.
    expect(order.slice(keepAliveAt + 1).filter((m) => m === 'POST').length).toBeGreaterThanOrEqual(5);
    await slow.close();
  });

  it('hides entries whose owner Lease expired; only a reaper deletes them, and never live ones', async () => {
    const dead = await backend.grantLease(10_000);
    const live = await backend.grantLease(60_000);
    await backend.put('kube_servers/g/dead', 'x', {lease: dead});
    await backend.put('kube_servers/g/live', 'x', {lease: live});
    await backend.put('kube_servers/g/plain', 'x');
    await clock.advance(20_000);
    expect((await backend.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/live', 'kube_servers/g/plain']);
    expect(env.server.listObjects(GROUP, 'kubeservers', 'kd')).toHaveLength(3);
    expect(await backend.reapExpired()).toBe(1);
    expect(env.server.listObjects(GROUP, 'kubeservers', 'kd').map((o) => o.metadata.name).sort()).toEqual(['g.live', 'g.plain']);
    expect(env.server.getObject('coordination.k8s.io', 'leases', 'kd', dead.id)).toBeUndefined();
    expect(env.server.getObject('coordination.k8s.io', 'leases', 'kd', live.id)).toBeDefined();
  });
});

describe('THE PROMISE: a failing API server never makes entries vanish', () => {
  const faults = [
    {name: 'a 500 answer', fault: {status: 500, body: '{"kind":"Status","code":500,"reason":"InternalError","message":"etcdserver: leader changed"}'}},
    {name: 'a 503 answer', fault: {status: 503, body: 'upstream connect error'}},
    {name: 'a 200 that is not JSON', fault: {status: 200, body: '<html>proxy</html>'}},
    {name: 'a 200 list without items', fault: {status: 200, body: '{"kind":"KubeServerList","metadata":{"resourceVersion":"5"}}'}},
    {name: 'a 200 list with items: null', fault: {status: 200, body: '{"kind":"KubeServerList","metadata":{"resourceVersion":"5"},"items":null}'}},
    {name: 'an empty 200 body', fault: {status: 200, body: ''}},
    // The API server answers a list 200: a 206 is part of a list, a 203 one a proxy rewrote.
    {name: 'a 206 Partial Content list with no items', fault: {status: 206, body: '{"kind":"KubeServerList","metadata":{"resourceVersion":"5"},"items":[]}'}},
    {name: 'a 203 list with no items', fault: {status: 203, body: '{"kind":"KubeServerList","metadata":{"resourceVersion":"5"},"items":[]}'}},
    {name: 'a 200 list with an item missing spec.key', fault: {status: 200, body: '{"kind":"KubeServerList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"x","resourceVersion":"4"},"spec":{"value":"{}"}}]}'}},
  ] as const;

  for (const {name, fault} of faults) {
    it(`list fails on ${name}, and the entries are all there once the server answers again`, async () => {
      const lease = await backend.grantLease(60_000);
      for (const n of ['a', 'b', 'c']) await backend.put(`kube_servers/g/${n}`, 'x', {lease});
      env.server.setFault((call) => (call.method === 'GET' && call.path.endsWith('/kubeservers') ? fault : undefined));
      await expect(backend.list('kube_servers/g/')).rejects.toThrow();
      env.server.setFault(undefined);
      expect((await backend.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b', 'kube_servers/g/c']);
    });
  }

  // JSON.parse keeps the last of two equal keys: a second `"items":[]`, or a second `"continue":""` on a page that
  // has more, would read as fewer entries. Such a list is malformed (src/core/json-keys.ts) and fails, naming the key.
  const duplicates = [
    {name: 'items given twice, the second empty', key: 'items', rewrite: (text: string) => text.replace(/\}\s*$/, ',"items":[]}')},
    {name: 'metadata.continue given twice, the second empty', key: 'metadata.continue', rewrite: (text: string) => text.replace('"metadata":{', '"metadata":{"continue":"more","continue":"",')},
  ] as const;
  for (const {name, key, rewrite} of duplicates) {
    it(`list fails on a 200 list with ${name}, naming the key, and the entries are all there once the server answers well again`, async () => {
      const lease = await backend.grantLease(60_000);
      for (const n of ['a', 'b', 'c']) await backend.put(`kube_servers/g/${n}`, 'x', {lease});
      const real = JSON.stringify(await (await env.client()).request({method: 'GET', path: `/apis/${GROUP}/v1/namespaces/kd/kubeservers`}));
      expect(real).toContain('"metadata":{');
      env.server.setFault((call) => (call.method === 'GET' && call.path.endsWith('/kubeservers') ? {status: 200, body: rewrite(real)} : undefined));
      await expect(backend.list('kube_servers/g/')).rejects.toThrow(`malformed answer: duplicate key "${key}"`);
      env.server.setFault(undefined);
      expect((await backend.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b', 'kube_servers/g/c']);
    });
  }

  // A proxy that caches by path and drops the query answers every page alike, `continue` token and all:
  // followed, the list never ended and held every copy of the page (the heap grew until the pod was killed).
  for (const {what, suffix, read} of [
    {what: 'KubeServers', suffix: '/kubeservers', read: () => backend.list('kube_servers/g/')},
    {what: 'Leases', suffix: '/leases', read: () => backend.listLeases()},
  ] as const) {
    it(`a ${what} list whose pages repeat their continue token fails at the repeat, and reads well once the server answers well`, async () => {
      const lease = await backend.grantLease(60_000);
      for (const n of ['a', 'b']) await backend.put(`kube_servers/g/${n}`, 'x', {lease});
      const path = suffix === '/kubeservers' ? `/apis/${GROUP}/v1/namespaces/kd/kubeservers` : `/apis/coordination.k8s.io/v1/namespaces/kd/leases`;
      const real = (await (await env.client()).request({method: 'GET', path})) as {metadata: Record<string, unknown>};
      const looping = JSON.stringify({...real, metadata: {...real.metadata, continue: 'same-page-again'}});
      let calls = 0;
      // Past 50 calls the server fails them, so a list that follows the loop ends (with another error) instead of hanging the suite.
      env.server.setFault((call) => (call.method === 'GET' && !call.watch && call.path.endsWith(suffix) ? (++calls > 50 ? {status: 503, body: '{"kind":"Status","code":503}'} : {status: 200, body: looping}) : undefined));
      await expect(read()).rejects.toThrow(/continue token .*already/);
      expect(calls).toBe(2);
      env.server.setFault(undefined);
      if (suffix === '/kubeservers') expect((await backend.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b']);
      else expect((await backend.listLeases()).size).toBeGreaterThan(0);
    });
  }

  it('a hung API server fails the call at the request deadline instead of blocking or reading as empty', async () => {
    // Only the hung calls go through the 300 ms deadline: on a loaded machine a good call can take
    // longer than that, so the write and the reads after the hang use the default client (30 s).
    const impatient = new KubernetesBackend({client: await env.client({requestTimeoutMs: 300}), namespace: 'kd', clock});
    await backend.put('kube_servers/g/a', 'x');
    env.server.setFault((call) => (call.method === 'GET' ? 'hang' : undefined));
    await expect(impatient.list('kube_servers/g/')).rejects.toThrow(/no answer within 300 ms/);
    await expect(impatient.get('kube_servers/g/a')).rejects.toThrow(/no answer within 300 ms/);
    env.server.setFault(undefined);
    expect((await backend.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a']);
    // The impatient client reads again once the server answers; a good read slower than 300 ms is retried.
    await vi.waitFor(async () => expect((await impatient.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a']), ROUND_TRIP);
    await impatient.close();
  });

  it('a failing Lease list during the expiry check emits no delete events', async () => {
    const lease = await backend.grantLease(60_000);
    await backend.put('kube_servers/g/a', 'x', {lease});
    const events: WatchEvent[] = [];
    await backend.watch('kube_servers/g/', (e) => events.push(e));
    env.server.setFault((call) => (call.path.endsWith('/leases') && call.method === 'GET' ? {status: 200, body: '{"items":"nope"}'} : undefined));
    await clock.advance(5_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(events.filter((e) => e.type === 'delete')).toEqual([]);
  });

  it('an outage longer than the TTL expires nobody: after it every Lease has one TTL to be renewed', async () => {
    const lease = await backend.grantLease(30_000);
    for (const n of ['a', 'b']) await backend.put(`kube_servers/g/${n}`, 'x', {lease});
    const reader = new KubernetesBackend({client: await env.client(), namespace: 'kd', clock});
    const events: WatchEvent[] = [];
    await reader.watch('kube_servers/g/', (e) => events.push(e));
    env.server.setFault(() => ({status: 503, body: '{"kind":"Status","code":503}'}));
    // 90 s of clock without an answer: no owner could renew, no reader could look.
    for (let t = 0; t < 90; t++) await clock.advance(1_000);
    await expect(backend.keepAlive(lease)).rejects.toThrow(/503/);
    env.server.setFault(undefined);
    // The server answers again: the entries are there, and the owner's keepalive renews its Lease.
    expect((await reader.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b']);
    expect(await reader.reapExpired()).toBe(0);
    await backend.keepAlive(lease);
    await clock.advance(5_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(events.filter((e) => e.type === 'delete')).toEqual([]);
    expect((await reader.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b']);
    await reader.close();
  });

  it('background Lease-check failures go to onError with their reason class, never to process warnings', async () => {
    const errors: Error[] = [];
    let warnings = 0;
    const onWarning = (): void => void warnings++;
    process.on('warning', onWarning);
    const reader = new KubernetesBackend({client: await env.client(), namespace: 'kd', clock, onError: (e) => errors.push(e)});
    try {
      const lease = await backend.grantLease(60_000);
      await backend.put('kube_servers/g/a', 'x', {lease});
      await reader.watch('kube_servers/g/', () => undefined);
      env.server.setFault((call) => (call.path.endsWith('/leases') && call.method === 'GET' ? {status: 200, body: '{"items":"nope"}'} : undefined));
      await clock.advance(2_000);
      await eventually(() => expect(errors.map(classifyRegistryError)).toContain('malformed'));
      env.server.setFault((call) => (call.path.endsWith('/leases') && call.method === 'GET' ? {status: 503, body: '{}'} : undefined));
      await eventually(async () => {
        await clock.advance(1_000);
        expect(errors.map(classifyRegistryError)).toContain('unreachable');
      });
      await new Promise((r) => setImmediate(r));
      expect(warnings).toBe(0);
    } finally {
      process.off('warning', onWarning);
      await reader.close();
    }
  });

  it('a reaper that cannot read the Leases deletes nothing', async () => {
    const lease = await backend.grantLease(60_000);
    await backend.put('kube_servers/g/a', 'x', {lease});
    env.server.setFault((call) => (call.path.endsWith('/leases') && call.method === 'GET' ? {status: 500, body: '{}'} : undefined));
    await expect(backend.reapExpired()).rejects.toThrow();
    env.server.setFault(undefined);
    expect(env.server.listObjects(GROUP, 'kubeservers', 'kd')).toHaveLength(1);
  });

  it('a delete answered with success but held by a finalizer takes no later write of the key with it', async () => {
    const lease = await backend.grantLease(60_000);
    const name = objectNameForKey('kube_servers/g/a');
    await backend.put('kube_servers/g/a', 'x', {lease});
    const other = await env.client();
    const finalizers = (list: string[]): Promise<unknown> => other.request({method: 'PATCH', path: `/apis/${GROUP}/v1/namespaces/kd/kubeservers/${name}`, contentType: 'application/merge-patch+json', body: {metadata: {finalizers: list}}});
    await finalizers(['example.com/hold']);
    expect(await backend.delete('kube_servers/g/a')).toBe(true);
    expect(env.server.getObject(GROUP, 'kubeservers', 'kd', name)?.metadata.deletionTimestamp).toBeDefined();
    await backend.put('kube_servers/g/a', 'y', {lease});
    await finalizers([]);
    expect((await backend.list('kube_servers/g/')).map((i) => [i.key, i.value])).toEqual([['kube_servers/g/a', 'y']]);
    expect((await backend.get('kube_servers/g/a'))?.value).toBe('y');
  });

  it('a write waiting in the rate-limit queue when its writer is deposed is refused unsent', async () => {
    // One request a second: the second write waits its turn in the client's queue.
    const slow = new KubernetesBackend({client: await env.client({qps: 1, burst: 1}), namespace: 'kd', clock});
    try {
      let leading = true;
      const view = fencedView(slow, () => leading, 'the test lease');
      const writes = [view.put('kube_servers/g/a', 'x'), view.put('kube_servers/g/b', 'x')];
      leading = false;
      const results = await Promise.allSettled(writes);
      expect(results.map((r) => (r.status === 'rejected' ? (r.reason as Error).name : r.status))).toEqual(['fulfilled', 'FencedError']);
      expect((await backend.list('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/a']);
    } finally {
      await slow.close();
    }
  });
});

describe('watch', () => {
  it('resumes after the stream ends and relists after 410 Gone, reporting what changed meanwhile and nothing else', async () => {
    await backend.put('kube_servers/g/stays', 'x');
    await backend.put('kube_servers/g/goes', 'x');
    const events: WatchEvent[] = [];
    await backend.watch('kube_servers/g/', (e) => events.push(e));
    env.server.dropWatches();
    await backend.put('kube_servers/g/after-drop', 'x');
    await eventually(() => expect(events.map((e) => (e.type === 'put' ? `put ${e.item.key}` : `delete ${e.key}`))).toEqual(['put kube_servers/g/after-drop']));
    // History is compacted while changes happen: the watch must relist and diff.
    env.server.setFault((call) => (call.watch ? {status: 503, body: '{}'} : undefined));
    env.server.compact();
    await backend.delete('kube_servers/g/goes');
    await backend.put('kube_servers/g/new', 'x');
    env.server.setFault(undefined);
    await eventually(() => expect(events.map((e) => (e.type === 'put' ? `put ${e.item.key}` : `delete ${e.key}`)).sort()).toEqual([
      'delete kube_servers/g/goes', 'put kube_servers/g/after-drop', 'put kube_servers/g/new',
    ]), 10_000);
  });
});

describe('per-pod identity Secret', () => {
  it('creates <name>-identity-$POD_NAME once; a restart without volumes reads the same host id; pods differ', async () => {
    const first = await loadOrCreateHostId(backend, 'kube-discovery-7d9f-abcde');
    const secret = env.server.getObject('', 'secrets', 'kd', 'kube-discovery-identity-kube-discovery-7d9f-abcde');
    expect(Buffer.from(String((secret?.['data'] as Record<string, string>)['host_id']), 'base64').toString()).toBe(first);
    const restarted = new KubernetesBackend({client: await env.client(), namespace: 'kd', clock});
    expect(await loadOrCreateHostId(restarted, 'kube-discovery-7d9f-abcde')).toBe(first);
    expect(await loadOrCreateHostId(restarted, 'kube-discovery-7d9f-fghij')).not.toBe(first);
    expect(env.server.getObject('', 'secrets', 'kd', 'kube-discovery-identity-kube-discovery-7d9f-abcde')?.metadata.resourceVersion).toBe(secret?.metadata.resourceVersion);
    await restarted.close();
  });

  it('never overwrites a Secret it cannot read as an identity, and a lost create race reads the winner', async () => {
    const client = await env.client();
    await client.request({method: 'POST', path: '/api/v1/namespaces/kd/secrets', body: {metadata: {name: 'kube-discovery-identity-pod-x'}, data: {other: 'eA=='}}});
    await expect(loadOrCreateHostId(backend, 'pod-x')).rejects.toThrow(/has no data.host_id/);
    expect(env.server.getObject('', 'secrets', 'kd', 'kube-discovery-identity-pod-x')?.['data']).toEqual({other: 'eA=='});
    // Another process creates the Secret between our read and our create.
    let raced = false;
    env.server.setFault((call) => {
      if (!raced && call.method === 'POST' && call.path.endsWith('/secrets')) {
        raced = true;
        void client.request({method: 'POST', path: '/api/v1/namespaces/kd/secrets', body: {metadata: {name: 'kube-discovery-identity-pod-y'}, data: {host_id: Buffer.from('winner').toString('base64')}}});
        return {status: 409, body: '{"kind":"Status","code":409,"reason":"AlreadyExists","message":"exists"}'};
      }
      return undefined;
    });
    await eventually(async () => expect(await loadOrCreateHostId(backend, 'pod-y')).toBe('winner'));
  });
});

describe('client configuration', () => {
  it('builds from storage config with a kubeconfig file', async () => {
    const built = await createBackend({type: 'kubernetes', namespace: 'kd', kubeconfig: env.kubeconfigPath} as {type: string}, {clock});
    await built.put('k/a', 'x');
    expect(await built.get('k/a')).toMatchObject({value: 'x'});
    await built.close();
  });

  it('runs in-cluster from the service-account files and follows a rotated token', async () => {
    const prefix = join(env.dir, 'pod');
    const sa = join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount');
    mkdirSync(sa, {recursive: true});
    writeFileSync(join(sa, 'ca.crt'), env.server.caPem);
    writeFileSync(join(sa, 'namespace'), 'kd');
    writeFileSync(join(sa, 'token'), 'projected-1');
    env.server.tokens.set('projected-1', {username: 'system:serviceaccount:kd:kube-discovery'});
    const saved = {host: process.env['KUBERNETES_SERVICE_HOST'], port: process.env['KUBERNETES_SERVICE_PORT']};
    process.env['KUBERNETES_SERVICE_HOST'] = '127.0.0.1';
    process.env['KUBERNETES_SERVICE_PORT'] = new URL(env.server.url).port;
    try {
      const client = await createKubeClient({inClusterPathPrefix: prefix, qps: 100, burst: 100});
      expect(client.namespace).toBe('kd');
      const inCluster = new KubernetesBackend({client, namespace: 'kd', clock});
      await inCluster.put('k/a', 'x');
      // The kubelet rotates the projected token; the old one stops working.
      env.server.tokens.delete('projected-1');
      env.server.tokens.set('projected-2', {username: 'system:serviceaccount:kd:kube-discovery'});
      writeFileSync(join(sa, 'token'), 'projected-2');
      expect(await inCluster.get('k/a')).toMatchObject({value: 'x'});
      await inCluster.close();
    } finally {
      process.env['KUBERNETES_SERVICE_HOST'] = saved.host;
      process.env['KUBERNETES_SERVICE_PORT'] = saved.port;
      if (saved.host === undefined) delete process.env['KUBERNETES_SERVICE_HOST'];
      if (saved.port === undefined) delete process.env['KUBERNETES_SERVICE_PORT'];
    }
  });
});
