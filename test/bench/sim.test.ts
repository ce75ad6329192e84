/**
 * The cloud simulator behind `npm run demo`: the environment it hands the service, churn and its
 * control API, and Kubernetes API servers whose health the real probe sees as the scenario says
 * (healthy, principal not mapped, impersonation forbidden).
 */
import {DescribeClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {parseScenario} from '../../bench/scenario.ts';
import {startSimulator, type Simulator} from '../../bench/sim.ts';
import {mintEksToken} from '../../src/credentials/eks-token.ts';
import {probeCluster} from '../../src/probe/probe.ts';

let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator(parseScenario({
    name: 'sim-test',
    seed: 3,
    aws: {accounts: 1, regions: ['us-east-1', 'eu-west-1'], clusters_per_region: 3, page_size: 2, fail_regions: ['eu-west-1']},
    azure: {subscriptions: 1, clusters_per_resource_group: 2},
    kube: {servers: 1, unmapped: 1, forbidden: 2},
  }, 'inline'));
});

afterAll(async () => {
  await sim.close();
});

async function control(method: string, route: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${sim.description.control_url}${route}`, {method, ...(body ? {body: JSON.stringify(body)} : {})});
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

/** Probes one simulated EKS cluster the way the service does: DescribeCluster, then a token for its API. */
async function probeEks(name: string): Promise<{status: string; reason?: string}> {
  const env = sim.description.env;
  const credentials = {accessKeyId: env['AWS_ACCESS_KEY_ID'] ?? '', secretAccessKey: env['AWS_SECRET_ACCESS_KEY'] ?? ''};
  const client = new EKSClient({region: 'us-east-1', endpoint: sim.aws?.url, credentials});
  const {cluster} = await client.send(new DescribeClusterCommand({name}));
  client.destroy();
  return probeCluster({
    clusterName: name,
    cloud: 'AWS',
    region: 'us-east-1',
    endpoint: cluster?.endpoint,
    caData: cluster?.certificateAuthority?.data,
    timeoutMs: 5000,
    token: async () => (await mintEksToken({clusterName: name, region: 'us-east-1', credentials, env})).token,
  });
}

describe('cloud simulator', () => {
  it('hands the service loopback endpoints, fake credentials and a matcher per cloud', () => {
    const d = sim.description;
    for (const url of [d.env['AWS_ENDPOINT_URL_EKS'], d.env['AWS_ENDPOINT_URL_STS'], d.env['IDENTITY_ENDPOINT'], d.azure?.endpoint]) {
      expect(url).toMatch(/^https?:\/\/127\.0\.0\.1:\d+/);
    }
    expect(d.env).toMatchObject({AWS_EC2_METADATA_DISABLED: 'true', AZURE_TOKEN_CREDENTIALS: 'ManagedIdentityCredential', NODE_EXTRA_CA_CERTS: d.ca_file});
    expect(d.matchers.aws).toEqual([{types: ['eks'], regions: ['us-east-1', 'eu-west-1'], tags: {'*': '*'}}]);
    expect(d.matchers.azure[0]).toMatchObject({types: ['aks'], resource_manager_endpoint: d.azure?.endpoint});
    // eu-west-1 fails every call, so its clusters are not expected to be registered.
    expect(d.clusters).toEqual({total: 8, expected: 5});
  });

  it('serves Kubernetes APIs whose probe result matches the scenario', async () => {
    // The first clusters of the plan are the unhealthy ones: 000 unmapped, 001 forbidden; 002 is healthy.
    expect(await probeEks('eks-us-east-1-002')).toMatchObject({status: 'healthy'});
    expect(await probeEks('eks-us-east-1-000')).toMatchObject({status: 'unhealthy', reason: 'unauthorized'});
    expect(await probeEks('eks-us-east-1-001')).toMatchObject({status: 'unhealthy', reason: 'forbidden'});
  });

  it('churns on POST /churn and checks registered clusters against the truth on POST /verify', async () => {
    const before = [...sim.world.expectedKeys()];
    expect(await control('POST', '/verify', {keys: before})).toMatchObject({expected: before.length, missing: 0, unexpected: 0});
    const churned = await control('POST', '/churn?percent=50');
    expect(churned).toEqual({created: 1, deleted: 1, retagged: 2});
    const after = await control('POST', '/verify', {keys: before});
    expect(Number(after['missing']) + Number(after['unexpected'])).toBeGreaterThan(0);
  });
});
