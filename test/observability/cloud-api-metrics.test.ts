/**
 * Cloud API request metrics come from inside the real SDK clients: the AWS middleware and the
 * Azure pipeline policy count every HTTP attempt against the wire fakes, retries included.
 */
import {ContainerServiceClient} from '@azure/arm-containerservice';
import {DescribeClusterCommand, EKSClient, paginateListClusters} from '@aws-sdk/client-eks';
import {GetCallerIdentityCommand, STSClient} from '@aws-sdk/client-sts';
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {instrumentAwsClient} from '../../src/observability/aws-middleware.ts';
import {armOperation, azureMetricsPolicies} from '../../src/observability/azure-policy.ts';
import {MAX_API_CODES, Metrics} from '../../src/observability/metrics.ts';
import {FakeAwsWorld, startFakeAws, throttleFirst, type FakeAws} from '../fakes/aws-fakes.ts';
import {FAKE_ARM_TOKEN, startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {samples, value} from './prom-tools.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAMETRICSEXAMPLE01', secretAccessKey: 'metrics-secret-key/+example'};
const SUB = '00000000-0000-0000-0000-00000000000a';

let metrics: Metrics;

async function body(): Promise<string> {
  return (await metrics.render()).body;
}

beforeEach(() => {
  metrics = new Metrics({defaultMetrics: false});
});

describe('AWS SDK middleware', () => {
  let fake: FakeAws;

  beforeEach(async () => {
    const world = new FakeAwsWorld();
    world.addAccount(ACCOUNT, {accessKeys: [KEY]});
    for (const name of ['a', 'b', 'c']) world.addCluster(ACCOUNT, 'us-east-1', {name});
    fake = await startFakeAws({world});
  });

  afterEach(async () => {
    await fake.close();
  });

  function eks(): EKSClient {
    const client = new EKSClient({region: 'us-east-1', endpoint: fake.url, credentials: KEY, maxAttempts: 3});
    instrumentAwsClient(client, metrics);
    return client;
  }

  it('counts every attempt, the throttled retry with its AWS error code', async () => {
    fake.fault = throttleFirst(1, {operation: 'ListClusters'});
    const names: string[] = [];
    for await (const page of paginateListClusters({client: eks()}, {})) names.push(...(page.clusters ?? []));
    expect(names).toEqual(['a', 'b', 'c']);
    const text = await body();

    // Two pages, the first one tried twice.
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'ListClusters', code: 'ThrottlingException'})).toBe(1);
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'ListClusters', code: 'OK'})).toBe(2);
    expect(value(text, 'kube_discovery_cloud_api_throttled_total', {service: 'eks', operation: 'ListClusters'})).toBe(1);
    expect(value(text, 'kube_discovery_cloud_api_request_duration_seconds_count', {service: 'eks', operation: 'ListClusters'})).toBe(3);
    expect(fake.stats.count({operation: 'ListClusters'})).toBe(3);
  });

  it('labels a failed call with its error code, and instrumenting twice still counts once', async () => {
    const client = eks();
    instrumentAwsClient(client, metrics);
    await expect(client.send(new DescribeClusterCommand({name: 'missing'}))).rejects.toMatchObject({name: 'ResourceNotFoundException'});
    await client.send(new DescribeClusterCommand({name: 'a'}));
    const text = await body();

    expect(value(text, 'kube_discovery_cloud_api_requests_total', {operation: 'DescribeCluster', code: 'ResourceNotFoundException'})).toBe(1);
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {operation: 'DescribeCluster', code: 'OK'})).toBe(1);
  });

  it('works on STS clients too, and on connection failures without an HTTP answer', async () => {
    const sts = new STSClient({region: 'us-east-1', endpoint: fake.url, credentials: KEY, maxAttempts: 1});
    instrumentAwsClient(sts, metrics);
    expect((await sts.send(new GetCallerIdentityCommand({}))).Account).toBe(ACCOUNT);
    const dead = new EKSClient({region: 'us-east-1', endpoint: 'http://127.0.0.1:1', credentials: KEY, maxAttempts: 1});
    instrumentAwsClient(dead, metrics);
    await expect(dead.send(new DescribeClusterCommand({name: 'a'}))).rejects.toThrow();
    const text = await body();

    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'sts', operation: 'GetCallerIdentity', code: 'OK'})).toBe(1);
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'DescribeCluster', code: 'ECONNREFUSED'})).toBe(1);
  });

  it('keeps the code label bounded when an endpoint answers with ever new error codes', async () => {
    // A misbehaving endpoint (or a proxy in front of it) that names a fresh error code per answer:
    // each would otherwise be a new series for as long as the process lives.
    let n = 0;
    fake.fault = (ctx) => (ctx.operation === 'DescribeCluster' ? {code: `Made${String(n++).padStart(4, '0')}Exception`, status: 400} : undefined);
    const client = new EKSClient({region: 'us-east-1', endpoint: fake.url, credentials: KEY, maxAttempts: 1});
    instrumentAwsClient(client, metrics);
    for (let i = 0; i < 300; i++) await expect(client.send(new DescribeClusterCommand({name: 'a'}))).rejects.toThrow();
    const text = await body();

    const series = samples(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'DescribeCluster'});
    expect(series.length).toBeLessThanOrEqual(MAX_API_CODES + 1);
    // Every call is still counted: the codes past the bound under `other`.
    expect(series.reduce((sum, s) => sum + s.value, 0)).toBe(300);
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'DescribeCluster', code: 'other'})).toBe(300 - MAX_API_CODES);
    // The codes the process already counted keep their own series.
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'DescribeCluster', code: 'Made0000Exception'})).toBe(1);
  });
});

describe('Azure pipeline policy', () => {
  let arm: FakeArm;

  beforeAll(async () => {
    const world = new ArmWorld();
    world.addSubscription({subscriptionId: SUB, displayName: 'prod'});
    for (const name of ['aks-1', 'aks-2', 'aks-3']) world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name});
    arm = await startFakeArm({world});
  });

  afterAll(async () => {
    await arm.close();
  });

  function containerService(): ContainerServiceClient {
    return new ContainerServiceClient(fakeTokenCredential(FAKE_ARM_TOKEN), SUB, {
      endpoint: arm.url,
      tlsOptions: {ca: arm.caPem},
      retryOptions: {maxRetries: 2, retryDelayInMs: 1, maxRetryDelayInMs: 5},
      additionalPolicies: azureMetricsPolicies(metrics),
    });
  }

  it('counts every attempt of a paged list, the throttled one with its ARM code', async () => {
    arm.setFault((c) => (c.operation === 'managedClusters.list' && c.attempt === 1 ? {status: 429, retryAfterSeconds: 0} : undefined));
    const names: string[] = [];
    for await (const c of containerService().managedClusters.list()) names.push(c.name ?? '');
    expect(names).toEqual(['aks-1', 'aks-2', 'aks-3']);
    const text = await body();

    const labels = {service: 'containerservice', operation: 'ManagedClusters_List'};
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {...labels, code: 'TooManyRequests'})).toBe(2);
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {...labels, code: 'OK'})).toBe(2);
    expect(value(text, 'kube_discovery_cloud_api_throttled_total', labels)).toBe(2);
    expect(arm.stats.count({operation: 'managedClusters.list'})).toBe(4);
  });

  it('labels a refused call with the ARM error code and never with ids', async () => {
    arm.setFault(() => ({status: 403, code: 'AuthorizationFailed'}));
    await expect(containerService().managedClusters.listClusterUserCredentials('rg-a', 'aks-1')).rejects.toMatchObject({statusCode: 403});
    arm.setFault(undefined);
    const text = await body();

    expect(value(text, 'kube_discovery_cloud_api_requests_total', {operation: 'ManagedClusters_ListClusterUserCredential', code: 'AuthorizationFailed'})).toBe(1);
    expect(text).not.toContain(SUB);
    expect(text).not.toContain('aks-1');
    expect(samples(text, 'kube_discovery_cloud_api_requests_total').every((s) => s.labels['service'] === 'containerservice')).toBe(true);
  });

  it('names ARM operations like the REST API does', () => {
    const base = 'https://management.azure.com';
    expect(armOperation('GET', `${base}/subscriptions?api-version=2022-12-01`)).toEqual({service: 'resources', operation: 'Subscriptions_List'});
    expect(armOperation('GET', `${base}/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters?$skipToken=x`))
      .toEqual({service: 'containerservice', operation: 'ManagedClusters_ListByResourceGroup'});
    expect(armOperation('GET', `${base}/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c1`))
      .toEqual({service: 'containerservice', operation: 'ManagedClusters_Get'});
    expect(armOperation('POST', 'https://login.microsoftonline.com/tenant/oauth2/v2.0/token')).toEqual({service: 'entra', operation: 'Token'});
  });
});

describe('Metrics.cloudApiCall', () => {
  const call = (code: string, throttled: boolean, durationSeconds = 0.02): void =>
    metrics.cloudApiCall({service: 'eks', operation: 'DescribeCluster', code, durationSeconds, throttled});

  it('counts repeated calls of one kind, shows the throttled series at 0 until a throttled call, and keeps free-text codes out', async () => {
    for (let i = 0; i < 3; i++) call('OK', false);
    let text = await body();
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'DescribeCluster', code: 'OK'})).toBe(3);
    expect(value(text, 'kube_discovery_cloud_api_request_duration_seconds_count', {service: 'eks', operation: 'DescribeCluster'})).toBe(3);
    expect(value(text, 'kube_discovery_cloud_api_throttled_total', {service: 'eks', operation: 'DescribeCluster'})).toBe(0);

    call('ThrottlingException', true);
    call('ThrottlingException', true);
    call('not an identifier', false);
    call('OK', false);
    text = await body();
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'DescribeCluster', code: 'OK'})).toBe(4);
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'DescribeCluster', code: 'ThrottlingException'})).toBe(2);
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {service: 'eks', operation: 'DescribeCluster', code: 'other'})).toBe(1);
    expect(value(text, 'kube_discovery_cloud_api_request_duration_seconds_count', {service: 'eks', operation: 'DescribeCluster'})).toBe(7);
    expect(value(text, 'kube_discovery_cloud_api_throttled_total', {service: 'eks', operation: 'DescribeCluster'})).toBe(2);
  });

  it('shows the throttled series of an operation whose first call was throttled', async () => {
    metrics.cloudApiCall({service: 'sts', operation: 'GetCallerIdentity', code: 'Throttling', durationSeconds: 0.01, throttled: true});
    metrics.cloudApiCall({service: 'sts', operation: 'GetCallerIdentity', code: 'OK', durationSeconds: 0.01, throttled: false});
    expect(value(await body(), 'kube_discovery_cloud_api_throttled_total', {service: 'sts', operation: 'GetCallerIdentity'})).toBe(1);
  });
});
