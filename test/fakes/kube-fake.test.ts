// The fake Kubernetes API server, reached over real TLS the way the probe and kubectl reach a cluster.
import {execFile} from 'node:child_process';
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {promisify} from 'node:util';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {httpsRequest} from './http-client.ts';
import type {HttpsResponse} from './http-client.ts';
import type {FakeKubeApi} from './kube-api-server.ts';
import {startFakeKubeApi} from './kube-api-server.ts';
import {buildKubeconfig} from './kube-kubeconfig.ts';
import {createTestCa} from './tls-ca.ts';

const ALICE = 'alice-token';
const BOB = 'bob-token';
const execFileAsync = promisify(execFile);

let kube: FakeKubeApi;

beforeAll(async () => {
  const ca = await createTestCa();
  kube = await startFakeKubeApi({
    tls: await ca.issueServerCert(),
    authenticate: (token) => ({[ALICE]: {user: 'alice', groups: ['platform']}, [BOB]: {user: 'bob', groups: []}})[token],
    authorize: (user, attrs) => {
      if (user.user === 'alice') {
        return attrs.verb === 'impersonate' && attrs.resource === 'groups'
          ? {allowed: false, reason: 'no RBAC policy matched'}
          : true;
      }
      return attrs.verb === 'get' || attrs.verb === 'list';
    },
  });
});

afterAll(async () => {
  await kube.close();
});

beforeEach(() => {
  kube.setMode('ok');
});

function call(pathname: string, token?: string, init: {method?: string; body?: unknown; timeoutMs?: number} = {}): Promise<HttpsResponse> {
  return httpsRequest(`${kube.url}${pathname}`, {
    ca: kube.caPem,
    method: init.method ?? 'GET',
    headers: {
      ...(token === undefined ? {} : {authorization: `Bearer ${token}`}),
      ...(init.body === undefined ? {} : {'content-type': 'application/json'}),
    },
    ...(init.body === undefined ? {} : {body: JSON.stringify(init.body)}),
    ...(init.timeoutMs === undefined ? {} : {timeoutMs: init.timeoutMs}),
  });
}

describe('TLS and authentication', () => {
  it('serves /version over TLS verified with the cluster CA', async () => {
    const res = await call('/version', ALICE);

    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({major: '1', minor: '31', gitVersion: 'v1.31.2', platform: 'linux/amd64'});
    expect(kube.requests.at(-1)).toMatchObject({method: 'GET', path: '/version', authorization: `Bearer ${ALICE}`, user: 'alice', status: 200});
  });

  it('fails the TLS handshake for a client trusting another CA', async () => {
    const other = await createTestCa();
    const seen = kube.requests.length;

    await expect(httpsRequest(`${kube.url}/version`, {ca: other.caPem, headers: {authorization: `Bearer ${ALICE}`}}))
      .rejects.toMatchObject({code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'});
    expect(kube.requests.length).toBe(seen);
  });

  it('answers 401 with a Kubernetes Status without a token or with an unknown one', async () => {
    const unauthorized = {kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401};
    for (const token of [undefined, 'forged-token']) {
      const res = await call('/version', token);
      expect(res.status).toBe(401);
      expect(JSON.parse(res.body)).toEqual(unauthorized);
    }
  });

  it('with anonymous access, serves public paths without a token but still rejects a bad token', async () => {
    const open = await startFakeKubeApi({anonymous: true, gitVersion: 'v1.31.2-eks-7f9249a', authenticate: () => undefined});
    try {
      const get = (p: string, headers: Record<string, string> = {}) => httpsRequest(`${open.url}${p}`, {ca: open.caPem, headers});
      const version = await get('/version');
      expect(version.status).toBe(200);
      expect(JSON.parse(version.body)).toMatchObject({minor: '31+', gitVersion: 'v1.31.2-eks-7f9249a'});
      expect((await get('/apis')).status).toBe(403);
      expect((await get('/version', {authorization: 'Bearer forged'})).status).toBe(401);
    } finally {
      await open.close();
    }
  });

  it('lets kubectl read /version with a generated kubeconfig', async (ctx) => {
    const kubectl = await execFileAsync('kubectl', ['version', '--client']).then(() => true, () => false);
    if (!kubectl && process.env['CI'] === undefined) ctx.skip('kubectl is not installed');
    const dir = await mkdtemp(path.join(tmpdir(), 'kd-kubectl-'));
    try {
      const file = path.join(dir, 'config');
      await writeFile(file, buildKubeconfig({clusterName: 'fake', server: kube.url, caPem: kube.caPem, userName: 'alice', user: {token: ALICE}}));
      const env = {...process.env, HOME: dir, KUBECACHEDIR: dir};
      const {stdout} = await execFileAsync('kubectl', ['--kubeconfig', file, 'get', '--raw', '/version'], {env});
      expect(JSON.parse(stdout)).toMatchObject({gitVersion: 'v1.31.2'});
    } finally {
      await rm(dir, {recursive: true, force: true});
    }
  });
});

describe('SelfSubjectAccessReview', () => {
  const review = (resource: string) => ({
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: {resourceAttributes: {verb: 'impersonate', resource}},
  });

  it('echoes the spec with the authorizer decision', async () => {
    const allowed = await call('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', ALICE, {method: 'POST', body: review('users')});
    const denied = await call('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', ALICE, {method: 'POST', body: review('groups')});

    expect(allowed.status).toBe(201);
    expect(JSON.parse(allowed.body)).toMatchObject({kind: 'SelfSubjectAccessReview', spec: review('users').spec, status: {allowed: true}});
    expect(JSON.parse(denied.body)).toMatchObject({status: {allowed: false, reason: 'no RBAC policy matched'}});
  });

  it('rejects a review without attributes as Invalid', async () => {
    const res = await call('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', ALICE, {method: 'POST', body: {spec: {}}});
    expect(res.status).toBe(422);
    expect(JSON.parse(res.body)).toMatchObject({kind: 'Status', reason: 'Invalid', code: 422});
  });
});

describe('health at runtime', () => {
  it('hang mode accepts the request and never answers, so the client timeout fires', async () => {
    kube.setMode('hang');
    await expect(call('/version', ALICE, {timeoutMs: 200})).rejects.toMatchObject({code: 'ETIMEDOUT'});
    expect(kube.requests.at(-1)).toMatchObject({path: '/version', status: 0});

    kube.setMode('ok');
    expect((await call('/version', ALICE)).status).toBe(200);
  });

  it('unready mode fails /readyz like an API server that lost etcd', async () => {
    expect((await call('/readyz', ALICE)).body).toBe('ok');
    kube.setMode('unready');
    const res = await call('/readyz', ALICE);
    expect(res.status).toBe(500);
    expect(res.body).toContain('readyz check failed');
  });
});

describe('RBAC objects', () => {
  const base = '/apis/rbac.authorization.k8s.io/v1';
  const role = {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: {name: 'kube-discovery'},
    rules: [{apiGroups: [''], resources: ['users', 'groups', 'serviceaccounts'], verbs: ['impersonate']}]};

  it('creates a ClusterRole once and answers AlreadyExists the second time', async () => {
    const first = await call(`${base}/clusterroles`, ALICE, {method: 'POST', body: role});
    const second = await call(`${base}/clusterroles`, ALICE, {method: 'POST', body: role});

    expect(first.status).toBe(201);
    expect(JSON.parse(first.body)).toMatchObject({kind: 'ClusterRole', metadata: {name: 'kube-discovery', resourceVersion: expect.stringMatching(/^\d+$/) as unknown}});
    expect(second.status).toBe(409);
    expect(JSON.parse(second.body)).toMatchObject({kind: 'Status', reason: 'AlreadyExists', code: 409,
      message: 'clusterroles.rbac.authorization.k8s.io "kube-discovery" already exists'});
  });

  it('updates with optimistic concurrency on resourceVersion', async () => {
    const current = JSON.parse((await call(`${base}/clusterroles/kube-discovery`, ALICE)).body) as {metadata: {resourceVersion: string}};
    const stale = await call(`${base}/clusterroles/kube-discovery`, ALICE, {method: 'PUT', body: {...role, metadata: {name: 'kube-discovery', resourceVersion: '1'}}});
    const fresh = await call(`${base}/clusterroles/kube-discovery`, ALICE, {method: 'PUT', body: {...role, metadata: current.metadata}});

    expect(stale.status).toBe(409);
    expect(JSON.parse(stale.body)).toMatchObject({reason: 'Conflict'});
    expect(fresh.status).toBe(200);
    expect(Number(kube.rbac.get('clusterroles', 'kube-discovery')?.metadata.resourceVersion)).toBeGreaterThan(Number(current.metadata.resourceVersion));
  });

  it('answers NotFound for a missing binding and refuses to change its roleRef later', async () => {
    expect((await call(`${base}/clusterrolebindings/kube-discovery`, ALICE)).status).toBe(404);
    const binding = {metadata: {name: 'kube-discovery'}, roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kube-discovery'},
      subjects: [{kind: 'User', name: 'discovery', apiGroup: 'rbac.authorization.k8s.io'}]};
    expect((await call(`${base}/clusterrolebindings`, ALICE, {method: 'POST', body: binding})).status).toBe(201);

    const changed = await call(`${base}/clusterrolebindings/kube-discovery`, ALICE,
      {method: 'PUT', body: {...binding, roleRef: {...binding.roleRef, name: 'cluster-admin'}}});
    expect(changed.status).toBe(422);
    const list = JSON.parse((await call(`${base}/clusterrolebindings`, ALICE)).body) as {kind: string; items: {metadata: {name: string}}[]};
    expect(list.kind).toBe('ClusterRoleBindingList');
    expect(list.items.map((i) => i.metadata.name)).toEqual(['kube-discovery']);
  });

  it('forbids writes the authorizer denies, with the API server message', async () => {
    const res = await call(`${base}/clusterroles`, BOB, {method: 'POST', body: {...role, metadata: {name: 'bob-role'}}});
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({reason: 'Forbidden',
      message: 'clusterroles.rbac.authorization.k8s.io is forbidden: User "bob" cannot create resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope'});
    expect(kube.rbac.get('clusterroles', 'bob-role')).toBeUndefined();
  });
});
