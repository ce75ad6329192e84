// The storage fake of the Kubernetes API: checked against the real kubectl and on the wire.
import {execFile} from 'node:child_process';
import {existsSync, writeFileSync} from 'node:fs';
import {join} from 'node:path';
import {promisify} from 'node:util';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {startKubeEnv} from '../kubernetes/kube-env.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {httpsRequest} from './http-client.ts';
import type {HttpsResponse} from './http-client.ts';

const KUBECTL = existsSync('/usr/bin/kubectl') ? '/usr/bin/kubectl' : 'kubectl';
const run = promisify(execFile);
const kubectlFound = await run(KUBECTL, ['version', '--client']).then(() => true, () => false);
if (!kubectlFound && process.env['CI']) throw new Error('kubectl is not installed; CI must have it (see .ci/run)');

let env: KubeEnv;
beforeAll(async () => {
  env = await startKubeEnv();
});
afterAll(async () => env.close());

const ks = '/apis/kube-discovery.io/v1/namespaces/kd/kubeservers';

function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpsResponse> {
  return httpsRequest(env.server.url + path, {
    method,
    ca: env.server.caPem,
    headers: {authorization: 'Bearer test-token', 'content-type': 'application/json', ...headers},
    ...(body === undefined ? {} : {body: JSON.stringify(body)}),
  });
}

function kubeServer(name: string, labels: Record<string, string> = {}, spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {apiVersion: 'kube-discovery.io/v1', kind: 'KubeServer', metadata: {name, labels}, spec: {key: `kube_servers/g/${name}`, value: '{}', ...spec}};
}

describe.skipIf(!kubectlFound)('real kubectl against the fake', () => {
  const kubectl = async (...args: string[]) => (await run(KUBECTL, ['--kubeconfig', env.kubeconfigPath, ...args])).stdout;

  it('applies manifests, lists with printer columns and label selectors, re-applies changes and deletes', async () => {
    const file = join(env.dir, 'ks.yaml');
    writeFileSync(file, [
      'apiVersion: kube-discovery.io/v1', 'kind: KubeServer', 'metadata: {name: mgmt.prod-a, labels: {env: prod}}',
      'spec: {key: kube_servers/mgmt/prod-a, value: "{}", cloud: aws, region: us-east-1, health: healthy, stale: false}', '---',
      'apiVersion: kube-discovery.io/v1', 'kind: KubeServer', 'metadata: {name: mgmt.dev-b, labels: {env: dev}}',
      'spec: {key: kube_servers/mgmt/dev-b, value: "{}", cloud: azure, region: westeurope, health: unknown, stale: true}', '',
    ].join('\n'));
    expect(await kubectl('apply', '-f', file)).toMatch(/kubeserver.kube-discovery.io\/mgmt.prod-a created/);
    const table = await kubectl('get', 'kubeservers');
    expect(table.split('\n')[0]).toMatch(/^NAME\s+CLOUD\s+REGION\s+HEALTH\s+STALE\s+AGE$/);
    expect(table).toMatch(/mgmt\.prod-a\s+aws\s+us-east-1\s+healthy\s+false\s+\d+s/);
    expect(table).toMatch(/mgmt\.dev-b\s+azure\s+westeurope\s+unknown\s+true/);
    const prod = await kubectl('get', 'ks', '-l', 'env=prod', '-o', 'name');
    expect(prod.trim()).toBe('kubeserver.kube-discovery.io/mgmt.prod-a');

    writeFileSync(file, (await import('node:fs')).readFileSync(file, 'utf8').replace('health: healthy', 'health: unhealthy'));
    expect(await kubectl('apply', '-f', file)).toMatch(/mgmt.prod-a configured/);
    expect(await kubectl('get', 'ks', 'mgmt.prod-a', '-o', 'jsonpath={.spec.health}')).toBe('unhealthy');
    await kubectl('delete', 'ks', 'mgmt.dev-b');
    expect((await kubectl('get', 'ks', '-o', 'name')).trim()).toBe('kubeserver.kube-discovery.io/mgmt.prod-a');
  });

  it('creates CRDs from the shipped manifests through the apiextensions API', async () => {
    const out = await kubectl('apply', '-k', new URL('../../deploy/kubernetes/crds/', import.meta.url).pathname);
    expect(out).toMatch(/customresourcedefinition.apiextensions.k8s.io\/kubeservers.kube-discovery.io (created|unchanged|configured)/);
    expect(await kubectl('api-resources', '--api-group', 'kube-discovery.io', '-o', 'name')).toContain('discoveryconfigs.kube-discovery.io');
  });
});

describe('wire behaviour', () => {
  it('rejects a write with a stale resourceVersion with 409 Conflict, and a duplicate create with 409 AlreadyExists', async () => {
    const created = JSON.parse((await api('POST', ks, kubeServer('rv-a'))).body) as {metadata: {resourceVersion: string}};
    const dup = await api('POST', ks, kubeServer('rv-a'));
    expect(dup.status).toBe(409);
    expect(JSON.parse(dup.body)).toMatchObject({reason: 'AlreadyExists'});
    const ok = await api('PUT', `${ks}/rv-a`, {...kubeServer('rv-a', {}, {value: '1'}), metadata: {name: 'rv-a', resourceVersion: created.metadata.resourceVersion}});
    expect(ok.status).toBe(200);
    const stale = await api('PUT', `${ks}/rv-a`, {...kubeServer('rv-a', {}, {value: '2'}), metadata: {name: 'rv-a', resourceVersion: created.metadata.resourceVersion}});
    expect(stale.status).toBe(409);
    expect(JSON.parse(stale.body)).toMatchObject({kind: 'Status', reason: 'Conflict', code: 409});
    const del = await api('DELETE', `${ks}/rv-a`, {preconditions: {resourceVersion: created.metadata.resourceVersion}});
    expect(del.status).toBe(409);
  });

  it('rejects invalid object names and label values with 422', async () => {
    expect((await api('POST', ks, kubeServer('Not_Valid'))).status).toBe(422);
    expect((await api('POST', ks, kubeServer('ok-name', {env: 'not valid!'}))).status).toBe(422);
  });

  it('pages a list with limit and continue', async () => {
    for (const n of ['pg-1', 'pg-2', 'pg-3']) await api('POST', ks, kubeServer(n, {page: 'yes'}));
    const first = JSON.parse((await api('GET', `${ks}?labelSelector=page%3Dyes&limit=2`)).body) as {items: unknown[]; metadata: {continue: string}};
    expect(first.items).toHaveLength(2);
    const second = JSON.parse((await api('GET', `${ks}?labelSelector=page%3Dyes&limit=2&continue=${first.metadata.continue}`)).body) as {items: unknown[]; metadata: {continue?: string}};
    expect(second.items).toHaveLength(1);
    expect(second.metadata.continue).toBeUndefined();
    const notin = JSON.parse((await api('GET', `${ks}?labelSelector=${encodeURIComponent('page in (yes),name notin (x)')}`)).body) as {items: unknown[]};
    expect(notin.items).toHaveLength(3);
  });

  it('keeps an object with finalizers until the last finalizer is removed, with a deletionTimestamp meanwhile', async () => {
    const body = kubeServer('fin-a');
    (body['metadata'] as Record<string, unknown>)['finalizers'] = ['kube-discovery.io/deregister'];
    await api('POST', ks, body);
    const deleting = await api('DELETE', `${ks}/fin-a`);
    expect(deleting.status).toBe(202);
    const obj = JSON.parse((await api('GET', `${ks}/fin-a`)).body) as {metadata: {deletionTimestamp?: string; resourceVersion: string; finalizers: string[]}};
    expect(obj.metadata.deletionTimestamp).toBeDefined();
    const removed = await api('PATCH', `${ks}/fin-a`, {metadata: {finalizers: null}}, {'content-type': 'application/merge-patch+json'});
    expect(removed.status).toBe(200);
    expect((await api('GET', `${ks}/fin-a`)).status).toBe(404);
  });

  it('streams watch events from a resourceVersion with bookmarks, and answers 410 Gone after compaction', async () => {
    const start = JSON.parse((await api('GET', ks)).body) as {metadata: {resourceVersion: string}};
    const client = await env.client();
    const events: string[] = [];
    const handle = await client.watch(ks, {resourceVersion: start.metadata.resourceVersion, allowWatchBookmarks: 'true'}, (e) => {
      events.push(e.type === 'ERROR' ? `ERROR ${String((e.object as {code: number}).code)}` : `${e.type} ${String((e.object as {metadata: {name: string}}).metadata.name)}`);
    }, () => undefined);
    await api('POST', ks, kubeServer('w-a'));
    env.server.bookmark();
    await until(() => events.includes('ADDED w-a') && events.some((e) => e.startsWith('BOOKMARK')));
    env.server.compact();
    await until(() => events.includes('ERROR 410'));
    handle.abort();
    const late = await client.watch(ks, {resourceVersion: start.metadata.resourceVersion}, (e) => events.push(`late ${e.type} ${String((e.object as {code?: number}).code)}`), () => undefined);
    await until(() => events.includes('late ERROR 410'));
    late.abort();
  });

  it('answers TokenReview for known tokens only, and 401 for API calls without a valid token', async () => {
    const review = (token: string) => api('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: {token}});
    env.server.tokens.set('sa-token', {username: 'system:serviceaccount:apps:reader', groups: ['system:serviceaccounts']});
    expect(JSON.parse((await review('sa-token')).body)).toMatchObject({status: {authenticated: true, user: {username: 'system:serviceaccount:apps:reader'}}});
    expect(JSON.parse((await review('nope')).body)).toMatchObject({status: {authenticated: false}});
    const anon = await httpsRequest(env.server.url + ks, {ca: env.server.caPem});
    expect(anon.status).toBe(401);
  });

  it('serves Secrets and Leases with the same semantics', async () => {
    const secret = await api('POST', '/api/v1/namespaces/kd/secrets', {apiVersion: 'v1', kind: 'Secret', metadata: {name: 's1'}, data: {a: 'Yg=='}});
    expect(secret.status).toBe(201);
    expect((await api('POST', '/api/v1/namespaces/kd/secrets', {metadata: {name: 's1'}})).status).toBe(409);
    const lease = await api('POST', '/apis/coordination.k8s.io/v1/namespaces/kd/leases', {metadata: {name: 'l1'}, spec: {holderIdentity: 'a', leaseDurationSeconds: 15}});
    expect(JSON.parse(lease.body)).toMatchObject({kind: 'Lease', spec: {holderIdentity: 'a'}});
    expect((await api('GET', '/api/v1/namespaces/missing/secrets/s1')).status).toBe(404);
  });
});

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
