// The fake ARM server, driven by the real Azure SDK clients: if the fake drifts from what
// @azure/arm-containerservice and @azure/arm-resources-subscriptions send and parse, these fail.
import {execFile} from 'node:child_process';
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {promisify} from 'node:util';
import {ContainerServiceClient} from '@azure/arm-containerservice';
import {SubscriptionClient} from '@azure/arm-resources-subscriptions';
import {afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished} from 'vitest';
import {parse} from 'yaml';
import {createRoleAssignmentsApi} from '../../src/clouds/azure/role-assignments-client.ts';
import {armClientOptions} from '../../src/clouds/azure/pipeline.ts';
import {AKS_AAD_SERVER_ID, managedClusterJson} from './arm-json.ts';
import type {FakeArm} from './arm-server.ts';
import {ARM_API_VERSIONS, FAKE_ARM_TOKEN, startFakeArm} from './arm-server.ts';
import {fakeTokenCredential} from './arm-token-credential.ts';
import {ArmWorld} from './arm-world.ts';
import {httpsRequest} from './http-client.ts';
import type {FakeKubeApi} from './kube-api-server.ts';
import {startFakeKubeApi} from './kube-api-server.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';

const SUB = '00000000-0000-0000-0000-00000000000a';
const OTHER_SUB = '00000000-0000-0000-0000-00000000000b';
const TENANT = 'aaaaaaaa-0000-0000-0000-000000000001';
const execFileAsync = promisify(execFile);

let world: ArmWorld;
let arm: FakeArm;
let kube: FakeKubeApi;

beforeAll(async () => {
  world = new ArmWorld();
  kube = await startFakeKubeApi({authenticate: (token) => world.localAccountIdentity(token)});
  world.addSubscription({subscriptionId: SUB, displayName: 'prod', tenantId: TENANT});
  world.addSubscription({subscriptionId: OTHER_SUB, displayName: 'staging', tenantId: TENANT});
  world.addSubscription({displayName: 'sandbox', state: 'Disabled'});
  world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'aad-1', tags: {env: 'prod'},
    aadProfile: {managed: true, enableAzureRBAC: true}, disableLocalAccounts: true, server: kube.url, caPem: kube.caPem});
  world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'local-1', server: kube.url, caPem: kube.caPem});
  world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-b', name: 'stopped-1', powerState: 'Stopped', location: 'westeurope'});
  world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-b', name: 'creating-1', provisioningState: 'Creating'});
  world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-b', name: 'nolocal-1', disableLocalAccounts: true});
  world.addCluster({subscriptionId: OTHER_SUB, resourceGroup: 'rg-c', name: 'other-1'});
  arm = await startFakeArm({world});
});

afterAll(async () => {
  await arm.close();
  await kube.close();
});

beforeEach(() => {
  arm.setFault(undefined);
  arm.stats.reset();
});

/** How production code points the SDK at the fake: endpoint + trust the fake's CA; fast retries. */
function containerService(subscriptionId = SUB, token = FAKE_ARM_TOKEN, apiVersion?: string): ContainerServiceClient {
  return new ContainerServiceClient(fakeTokenCredential(token), subscriptionId, {
    endpoint: arm.url,
    tlsOptions: {ca: arm.caPem},
    retryOptions: {maxRetries: 2, retryDelayInMs: 1, maxRetryDelayInMs: 5},
    ...(apiVersion === undefined ? {} : {apiVersion}),
  });
}

async function collect<T>(iter: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iter) out.push(item);
  return out;
}

describe('managed clusters', () => {
  it('list() follows nextLink through every page and parses the cluster fields', async () => {
    const clusters = await collect(containerService().managedClusters.list());

    expect(clusters.map((c) => c.name)).toEqual(['aad-1', 'local-1', 'stopped-1', 'creating-1', 'nolocal-1']);
    expect(arm.stats.count({operation: 'managedClusters.list', status: 200})).toBe(3);
    const aad = clusters[0];
    expect(aad).toMatchObject({
      location: 'eastus', tags: {env: 'prod'}, provisioningState: 'Succeeded', powerState: {code: 'Running'},
      kubernetesVersion: '1.31.2', aadProfile: {managed: true, enableAzureRbac: true, tenantID: TENANT}, disableLocalAccounts: true,
    });
    expect(aad?.id).toBe(`/subscriptions/${SUB}/resourcegroups/rg-a/providers/Microsoft.ContainerService/managedClusters/aad-1`);
    expect(aad?.fqdn).toMatch(/^aad-1-dns-[0-9a-f]+\.hcp\.eastus\.azmk8s\.io$/);
    expect(clusters[2]).toMatchObject({powerState: {code: 'Stopped'}, location: 'westeurope'});
    expect(clusters[3]?.provisioningState).toBe('Creating');
  });

  it('listByResourceGroup() returns only that group, matching its name case-insensitively', async () => {
    const names = (await collect(containerService().managedClusters.listByResourceGroup('RG-B'))).map((c) => c.name);

    expect(names).toEqual(['stopped-1', 'creating-1', 'nolocal-1']);
    expect(arm.stats.count({operation: 'managedClusters.listByResourceGroup', resourceGroup: 'rg-b'})).toBe(2);
    await expect(collect(containerService().managedClusters.listByResourceGroup('rg-missing')))
      .rejects.toMatchObject({name: 'RestError', statusCode: 404, code: 'ResourceGroupNotFound'});
  });

  it('sees the world change between calls', async () => {
    world.addCluster({subscriptionId: OTHER_SUB, resourceGroup: 'rg-c', name: 'other-2', tags: {team: 'a'}});
    world.retagCluster({subscriptionId: OTHER_SUB, resourceGroup: 'RG-C', name: 'other-1'}, {env: 'dev'});
    let clusters = await collect(containerService(OTHER_SUB).managedClusters.list());
    expect(clusters.map((c) => [c.name, c.tags])).toEqual([['other-1', {env: 'dev'}], ['other-2', {team: 'a'}]]);

    world.removeCluster({subscriptionId: OTHER_SUB, resourceGroup: 'rg-c', name: 'other-2'});
    clusters = await collect(containerService(OTHER_SUB).managedClusters.list());
    expect(clusters.map((c) => c.name)).toEqual(['other-1']);
  });

  it('answers each page with the bytes of its records serialised now, after every kind of change (the per-cluster text is cached)', async () => {
    const own = new ArmWorld();
    const sub = own.addSubscription({displayName: 'cache', tenantId: TENANT}).subscriptionId;
    for (const name of ['c-1', 'c-2', 'c-3']) own.addCluster({subscriptionId: sub, resourceGroup: 'rg-x', name, tags: {env: 'prod'}});
    const ownArm = await startFakeArm({world: own});
    onTestFinished(() => ownArm.close());
    const listUrl = `${ownArm.url}/subscriptions/${sub}/providers/Microsoft.ContainerService/managedClusters?api-version=2026-04-01`;
    const firstPage = async (): Promise<string> => (await httpsRequest(listUrl, {ca: ownArm.caPem, headers: {authorization: `Bearer ${FAKE_ARM_TOKEN}`}})).body;
    const expected = (tenantId: string): string => {
      const clusters = own.listClusters(sub);
      const skipToken = Buffer.from(JSON.stringify({o: 2}), 'utf8').toString('base64url');
      return JSON.stringify({value: clusters.slice(0, 2).map((c) => managedClusterJson(c, tenantId)), nextLink: `${ownArm.url}/subscriptions/${sub}/providers/Microsoft.ContainerService/managedClusters?api-version=2026-04-01&$skipToken=${skipToken}`});
    };

    expect(await firstPage()).toBe(expected(TENANT));
    expect(await firstPage()).toBe(expected(TENANT));
    own.retagCluster({subscriptionId: sub, resourceGroup: 'rg-x', name: 'c-1'}, {env: 'dev'});
    own.updateCluster({subscriptionId: sub, resourceGroup: 'rg-x', name: 'c-2'}, {powerState: 'Stopped'});
    const changed = await firstPage();
    expect(changed).toBe(expected(TENANT));
    expect(JSON.parse(changed)).toMatchObject({value: [{name: 'c-1', tags: {env: 'dev'}}, {name: 'c-2', properties: {powerState: {code: 'Stopped'}}}]});
    own.updateSubscription(sub, {tenantId: 'bbbbbbbb-0000-0000-0000-000000000002'});
    expect(await firstPage()).toBe(expected('bbbbbbbb-0000-0000-0000-000000000002'));
    own.removeCluster({subscriptionId: sub, resourceGroup: 'rg-x', name: 'c-1'});
    expect(JSON.parse(await firstPage())).toEqual({value: [expect.objectContaining({name: 'c-2'}), expect.objectContaining({name: 'c-3'})]});
  });
});

describe('listClusterUserCredentials', () => {
  async function kubeconfigOf(name: string, format: 'exec' | 'azure' = 'exec'): Promise<Record<string, unknown>> {
    const result = await containerService().managedClusters.listClusterUserCredentials('rg-a', name, {format});
    expect(result.kubeconfigs?.map((k) => k.name)).toEqual(['clusterUser']);
    return parse(Buffer.from(result.kubeconfigs?.[0]?.value ?? new Uint8Array()).toString('utf8')) as Record<string, unknown>;
  }

  it('gives Entra ID clusters a kubelogin exec user for the AKS server id, with server and CA', async () => {
    const config = await kubeconfigOf('aad-1');

    expect(config).toMatchObject({
      clusters: [{name: 'aad-1', cluster: {server: kube.url, 'certificate-authority-data': Buffer.from(kube.caPem).toString('base64')}}],
      users: [{name: 'clusterUser_rg-a_aad-1', user: {exec: {command: 'kubelogin', apiVersion: 'client.authentication.k8s.io/v1beta1'}}}],
    });
    const args = (config as {users: {user: {exec: {args: string[]}}}[]}).users[0]?.user.exec.args ?? [];
    expect(args[args.indexOf('--server-id') + 1]).toBe(AKS_AAD_SERVER_ID);
    expect(args[args.indexOf('--tenant-id') + 1]).toBe(TENANT);
    expect(arm.stats.requests.at(-1)).toMatchObject({operation: 'managedClusters.listClusterUserCredentials', apiVersion: '2026-04-01', status: 200});
  });

  it('gives local-account clusters a static token the Kubernetes fake accepts (kubectl end to end)', async (ctx) => {
    const config = await kubeconfigOf('local-1');
    const cluster = world.getCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'local-1'});
    expect(config).toMatchObject({users: [{user: {token: cluster?.localAccountToken}}]});

    const kubectl = await execFileAsync('kubectl', ['version', '--client']).then(() => true, () => false);
    if (!kubectl && process.env['CI'] === undefined) ctx.skip('kubectl is not installed');
    const dir = await mkdtemp(path.join(tmpdir(), 'kd-kubectl-'));
    try {
      const file = path.join(dir, 'config');
      const value = (await containerService().managedClusters.listClusterUserCredentials('rg-a', 'local-1')).kubeconfigs?.[0]?.value;
      await writeFile(file, Buffer.from(value ?? new Uint8Array()));
      const {stdout} = await execFileAsync('kubectl', ['--kubeconfig', file, 'get', '--raw', '/version'],
        {env: {...process.env, HOME: dir, KUBECACHEDIR: dir}});
      expect(JSON.parse(stdout)).toMatchObject({major: '1', minor: '31', gitVersion: 'v1.31.2'});
      expect(kube.requests.at(-1)).toMatchObject({path: '/version', user: 'masterclient', status: 200});
    } finally {
      await rm(dir, {recursive: true, force: true});
    }
  });

  it('refuses static credentials of a cluster without local accounts and without Entra ID', async () => {
    await expect(containerService().managedClusters.listClusterUserCredentials('rg-b', 'nolocal-1'))
      .rejects.toMatchObject({name: 'RestError', statusCode: 400, code: 'BadRequest'});
  });
});

describe('subscriptions', () => {
  it('SubscriptionClient lists every subscription across pages', async () => {
    const credential = fakeTokenCredential();
    const client = new SubscriptionClient(credential, {
      endpoint: arm.url, tlsOptions: {ca: arm.caPem}, credentialScopes: ['https://management.azure.com/.default'],
    });
    const subs = await collect(client.subscriptions.list());

    expect(subs.map((s) => [s.displayName, s.state])).toEqual([['prod', 'Enabled'], ['staging', 'Enabled'], ['sandbox', 'Disabled']]);
    expect(subs[0]).toMatchObject({subscriptionId: SUB, tenantId: TENANT, id: `/subscriptions/${SUB}`});
    expect(arm.stats.count({operation: 'subscriptions.list', status: 200})).toBe(2);
    expect(arm.stats.apiVersionsSeen('subscriptions.list')).toEqual([...ARM_API_VERSIONS.subscriptions]);
    expect(credential.scopesRequested[0]).toEqual(['https://management.azure.com/.default']);
  });
});

describe('auth, api-version and faults', () => {
  it('ContainerServiceClient asks for the ARM scope and sends its api-version', async () => {
    const credential = fakeTokenCredential();
    const client = new ContainerServiceClient(credential, SUB, {endpoint: arm.url, tlsOptions: {ca: arm.caPem}});
    await collect(client.managedClusters.list());
    expect(credential.scopesRequested[0]).toEqual(['https://management.azure.com/.default']);
    expect(arm.stats.apiVersionsSeen()).toEqual([...ARM_API_VERSIONS.containerService]);
  });

  it('rejects an unknown bearer token with 401 InvalidAuthenticationToken', async () => {
    await expect(collect(containerService(SUB, 'stolen-token').managedClusters.list()))
      .rejects.toMatchObject({name: 'RestError', statusCode: 401, code: 'InvalidAuthenticationToken'});
    expect(arm.stats.count({status: 401})).toBe(1);
  });

  it('rejects an api-version it does not know', async () => {
    await expect(collect(containerService(SUB, FAKE_ARM_TOKEN, '2099-01-01').managedClusters.list()))
      .rejects.toMatchObject({statusCode: 400, code: 'InvalidApiVersionParameter'});
    expect(arm.stats.apiVersionsSeen()).toEqual(['2099-01-01']);
  });

  it('answers 429 with Retry-After, which the SDK honours and retries', async () => {
    arm.setFault((c) => (c.operation === 'managedClusters.list' && c.attempt === 1 ? {status: 429, retryAfterSeconds: 0} : undefined));
    const clusters = await collect(containerService().managedClusters.list());

    expect(clusters).toHaveLength(5);
    expect(arm.stats.counters().filter((c) => c.operation === 'managedClusters.list'))
      .toEqual([{operation: 'managedClusters.list', subscription: SUB, status: 429, count: 3}, {operation: 'managedClusters.list', subscription: SUB, status: 200, count: 3}]);
  });

  it('surfaces 403 as a RestError with code AuthorizationFailed, without retrying', async () => {
    arm.setFault((c) => (c.subscription === OTHER_SUB ? {status: 403, code: 'AuthorizationFailed'} : undefined));
    const error: unknown = await collect(containerService(OTHER_SUB).managedClusters.list()).catch((e: unknown) => e);

    expect(error).toMatchObject({name: 'RestError', statusCode: 403, code: 'AuthorizationFailed'});
    // Paged calls replace ARM's message with "Pagination failed..."; the request id survives for logs.
    const requestId = (error as {response?: {headers: {get(name: string): string | undefined}}}).response?.headers.get('x-ms-request-id');
    expect(requestId).toBe(arm.stats.requests.at(-1)?.requestId);
    expect(arm.stats.count({subscription: OTHER_SUB})).toBe(1);
  });

  it('error answers carry the ARM body shape, x-ms-request-id and Retry-After on the wire', async () => {
    arm.setFault(() => ({status: 429, retryAfterSeconds: 1}));
    const res = await httpsRequest(`${arm.url}/subscriptions/${SUB}/providers/Microsoft.ContainerService/managedClusters?api-version=2026-04-01`,
      {ca: arm.caPem, headers: {authorization: `Bearer ${FAKE_ARM_TOKEN}`}});

    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.headers['x-ms-request-id']).toBe(arm.stats.requests.at(-1)?.requestId);
    expect(JSON.parse(res.body)).toEqual({error: {code: 'TooManyRequests', message: expect.stringContaining('throttled') as unknown}});
  });

  it('a malformed body fails the call instead of yielding clusters', async () => {
    arm.setFault(() => ({malformed: true}));
    await expect(collect(containerService().managedClusters.list())).rejects.toThrow();
  });

  it('a hung request is left to the caller to abort', async () => {
    arm.setFault(() => ({hang: true}));
    const aborter = new AbortController();
    const pending = collect(containerService().managedClusters.list({abortSignal: aborter.signal}));
    await expect.poll(() => arm.stats.count({operation: 'managedClusters.list'}), ROUND_TRIP).toBe(1);
    aborter.abort();
    await expect(pending).rejects.toMatchObject({name: 'AbortError'});
  });
});

describe('role assignments (the set-up client over @azure/core-client)', () => {
  const PRINCIPAL = '0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6';
  const READER = `/subscriptions/${OTHER_SUB}/providers/Microsoft.Authorization/roleDefinitions/7f6c6a51-bcf8-42ba-9220-52d62157d7db`;
  const scope = `/subscriptions/${OTHER_SUB}/resourceGroups/rg-c/providers/Microsoft.ContainerService/managedClusters/other-1`;
  const signal = new AbortController().signal;
  const api = () => createRoleAssignmentsApi({
    credential: fakeTokenCredential(),
    clientOptions: armClientOptions(arm.url, 'https://management.azure.com/.default', {tlsOptions: {ca: arm.caPem}, retryOptions: {maxRetries: 0}}),
  });

  it('creates (201), reads, lists by principal over several pages, refuses a duplicate, and deletes (200, then 204)', async () => {
    const client = api();
    const names = ['10000000-0000-4000-8000-000000000001', '10000000-0000-4000-8000-000000000002', '10000000-0000-4000-8000-000000000003'];
    const roles = [READER, READER.replace('7f6c6a51-bcf8-42ba-9220-52d62157d7db', 'a7ffa36f-339b-4b5c-8bdf-e2c188b2c0eb'), READER.replace('7f6c6a51-bcf8-42ba-9220-52d62157d7db', '3498e952-d568-435e-9b2c-8d77e338d7f7')];
    for (const [i, name] of names.entries()) await client.create(scope, name, {principalId: PRINCIPAL, roleDefinitionId: roles[i] ?? READER, description: `n${i}`}, signal);
    expect(arm.stats.requests.filter((r) => r.operation === 'roleAssignments.create').map((r) => r.status)).toEqual([201, 201, 201]);
    expect(await client.get(scope, names[0] ?? '', signal)).toEqual({name: names[0], scope, principalId: PRINCIPAL, roleDefinitionId: READER, description: 'n0'});

    expect((await client.listForPrincipal(scope, PRINCIPAL, signal)).map((a) => a.name)).toEqual(names);
    expect(arm.stats.count({operation: 'roleAssignments.list'})).toBe(2);
    expect(await client.listForPrincipal(scope, '99999999-8888-4777-8666-555555555555', signal)).toEqual([]);

    await expect(client.create(scope, '10000000-0000-4000-8000-00000000000f', {principalId: PRINCIPAL, roleDefinitionId: READER, description: 'x'}, signal))
      .rejects.toMatchObject({code: 'RoleAssignmentExists', action: 'Microsoft.Authorization/roleAssignments/write'});
    expect(await client.get(scope, '10000000-0000-4000-8000-00000000000f', signal)).toBeUndefined();
    for (const name of names) await client.delete(scope, name, signal);
    await client.delete(scope, names[0] ?? '', signal);
    expect(arm.stats.requests.filter((r) => r.operation === 'roleAssignments.delete').map((r) => r.status)).toEqual([200, 200, 200, 204]);
    expect(world.roleAssignments()).toEqual([]);
    expect(new Set(arm.stats.requests.map((r) => r.apiVersion))).toEqual(new Set(ARM_API_VERSIONS.authorization));
  });
});
