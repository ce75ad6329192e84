/**
 * Adversarial: a DescribeCluster answer whose `arn` names another cluster than the one asked for —
 * the same name in another region (a request that reached the wrong regional endpoint), another
 * cluster's name in the ARN, another account — is an answer about that cluster: its status and
 * tags are not this cluster's. Read as this cluster's, a `DELETING` there deregistered it here.
 * Such a record is malformed: the entry is kept (stale). Short path and SDK path alike.
 */
import {DescribeClusterCommand, EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import PQueue from 'p-queue';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {createEksFetcher} from '../../src/clouds/aws/eks-fetcher.ts';
import {describeClusterOperation, leanReads, listClustersOperation} from '../../src/clouds/aws/lean-read.ts';
import {leanSdkClient} from '../../src/clouds/aws/lean-sdk.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {context, stored} from '../discovery/builders.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {awsClassifier, mutateJson, startFaultProxy, when, type FaultProxy} from '../fakes/faults.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const KEY = {accessKeyId: 'AKIAEKSARNOTHER00001', secretAccessKey: 'eks-arn-other-secret'};
let fake: FakeAws;
let proxy: FaultProxy;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  for (const name of ['a1', 'b1']) world.addCluster(ACCOUNT, REGION, {name, tags: {env: 'prod'}});
  fake = await startFakeAws({world});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
});
afterAll(async () => {
  await proxy.close();
  await fake.close();
});
beforeEach(() => {
  proxy.fault = undefined;
});

async function fetcherOf(path: 'short' | 'sdk'): Promise<{fetch(): Promise<SourceResult>; destroy(): void}> {
  const eks = leanSdkClient(new EKSClient({region: REGION, endpoint: proxy.url, credentials: KEY, maxAttempts: 1}));
  let client: Pick<EKSClient, 'send'> = eks;
  if (path === 'short') {
    client = leanReads(eks, [listClustersOperation(ListClustersCommand), describeClusterOperation(DescribeClusterCommand)]);
    await client.send(new ListClustersCommand({}));
    await client.send(new DescribeClusterCommand({name: 'a1'}));
  }
  const fetcher = createEksFetcher({source: eksSource(0, REGION, ACCOUNT), client, describeQueue: new PQueue({concurrency: 4})});
  return {fetch: () => fetcher.fetch(new AbortController().signal), destroy: () => eks.destroy()};
}

const ARNS: [string, string][] = [
  ['the same name in another region', `arn:aws:eks:eu-west-1:${ACCOUNT}:cluster/b1`],
  ['another cluster named in the ARN', `arn:aws:eks:${REGION}:${ACCOUNT}:cluster/zz9`],
  ['another account', `arn:aws:eks:${REGION}:222222222222:cluster/b1`],
  ['another partition', `arn:aws-cn:eks:${REGION}:${ACCOUNT}:cluster/b1`],
  ['another service', `arn:aws:ecs:${REGION}:${ACCOUNT}:cluster/b1`],
];

for (const path of ['short', 'sdk'] as const) {
  describe(`a DescribeCluster answer about another cluster (${path === 'short' ? 'short path' : "the SDK's path"})`, () => {
    for (const [what, arn] of ARNS) {
      it(`an ARN of ${what}, status DELETING: b1 is malformed and kept, not deregistered`, async () => {
        const ctx = context('g1', {env: 'prod'});
        const client = await fetcherOf(path);
        try {
          const clean = await client.fetch();
          const current = [...evaluate([clean], ctx).candidates.values()].map((c) => stored(c.server));
          expect(current).toHaveLength(2);

          proxy.fault = when({operation: 'DescribeCluster', cluster: 'b1'}, mutateJson((body) => ({cluster: {...(body['cluster'] as object), arn, status: 'DELETING'}})));
          const spoiled = await client.fetch();
          const plan = reconcile(current, evaluate([spoiled], ctx), [spoiled], 'g1');
          expect(plan.items.filter((i) => i.action === 'delete').map((i) => `${i.name}: ${i.reason}`)).toEqual([]);
          expect(spoiled.malformed).toEqual([expect.objectContaining({name: 'b1', reason: expect.stringContaining('ARN')})]);
        } finally {
          client.destroy();
        }
      });
    }
  });
}
