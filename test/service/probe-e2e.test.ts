/**
 * Health in the inventory: after a cycle the service probes each registered EKS cluster
 * over TLS with its own EKS token, and kube_servers carry `status.target_health`.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import type {FakeAws} from '../fakes/aws-fakes.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';
import {base64, eksAuthenticator} from '../probe/eks-fixtures.ts';

const ACCOUNT = '111111111111';
const USER_ARN = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const KEY = {accessKeyId: 'AKIAPROBEE2E00000001', secretAccessKey: 'probe-e2e-secret', arn: USER_ARN};
let aws: AwsServiceWorld;
let fake: FakeAws;
let kube: FakeKubeApi;
let svc: RunningService;

beforeAll(async () => {
  aws = await startAwsServiceWorld({key: KEY, account: ACCOUNT});
  const {world} = aws;
  fake = aws.fake;
  const clusters = ['mapped', 'unmapped'].map((name) => ({account: ACCOUNT, region: 'us-east-1', name}));
  const authn = eksAuthenticator({world, clusters, stsUrl: fake.url});
  kube = await startFakeKubeApi({authenticate: authn.authenticate});
  for (const {name} of clusters) world.addCluster(ACCOUNT, 'us-east-1', {name, endpoint: kube.url, caData: base64(kube.caPem)});
  world.addAccessEntry(ACCOUNT, 'us-east-1', 'mapped', {principalArn: USER_ARN, kubernetesGroups: ['kube-discovery'], username: 'kube-discovery'});
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: probe
  poll_interval: 1h
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: memory}
http: {listen_addr: "127.0.0.1:0"}
`,
    'probe.yaml',
  );
  svc = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger});
  // The first cycle resolves nextCycle() once its probes have written their health, however slow a loaded machine makes them.
  // startService returns as soon as leadership starts the cycle, and the cycle needs network round trips, so this waiter is
  // registered before it can end; poll_interval 1h means no later cycle would answer a waiter that came late.
  await svc.nextCycle();
});

afterAll(async () => {
  await svc.stop({deregister: false});
  await kube.close();
  await aws.close();
});

describe('probe in the service', () => {
  it('marks a mapped cluster healthy and an unmapped one unauthorized with what to fix', async () => {
    const {items} = (await (await fetch(`${svc.url}/v1/kube_servers`)).json()) as {items: KubeServer[]};
    const health = Object.fromEntries(items.map((s) => [s.spec.cluster.spec.aws?.name, s.status?.target_health]));
    expect(health['mapped']).toMatchObject({status: 'healthy'});
    expect(health['unmapped']).toMatchObject({status: 'unhealthy', reason: 'unauthorized'});
    expect(health['unmapped']?.message).toContain('create-access-entry');
    // The API server saw real EKS tokens; the inventory never carries one.
    expect(kube.requests.some((r) => r.authorization?.startsWith('Bearer k8s-aws-v1.'))).toBe(true);
    expect(JSON.stringify(items)).not.toContain('k8s-aws-v1.');
  });
});
