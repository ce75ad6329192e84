/**
 * Adversarial: a DescribeCluster answer whose `arn` names another cluster than the one asked for —
 * the same name in another region (a request that reached the wrong regional endpoint), another
 * cluster's name in the ARN, another account — is an answer about that cluster: its status and
 * tags are not this cluster's. Read as this cluster's, a `DELETING` there deregistered it here.
 * Such a record is malformed: the entry is kept (stale). Short path and SDK path alike.
 */
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {context, stored} from '../discovery/builders.ts';
import {startProxiedAws, type ProxiedAws} from '../fakes/aws-proxied.ts';
import {mutateJson, when, type FaultProxy} from '../fakes/faults.ts';
import {eksFetcherOf} from './eks-fetcher-paths.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const KEY = {accessKeyId: 'AKIAEKSARNOTHER00001', secretAccessKey: 'eks-arn-other-secret'};
let aws: ProxiedAws;
let proxy: FaultProxy;

beforeAll(async () => {
  aws = await startProxiedAws({account: ACCOUNT, key: KEY, clusters: ['a1', 'b1'].map((name) => ({name, tags: {env: 'prod'}})), region: REGION});
  ({proxy} = aws);
});
afterAll(async () => {
  await aws.close();
});
beforeEach(() => {
  proxy.fault = undefined;
});

/** One source's fetch through a real EKS client, on the short path or the SDK's own. */
const fetcherOf = (path: 'short' | 'sdk'): ReturnType<typeof eksFetcherOf> => eksFetcherOf(path, {endpoint: proxy.url, key: KEY, account: ACCOUNT});

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
