/**
 * Adversarial: EKS tags are a map of strings. A DescribeCluster answer whose `tags` is of another
 * JSON type (a string, a list), or whose tag value is (`{"env": 7}`, `{"env": ["prod"]}`,
 * `{"env": null}`, an object) must not change how the cluster is labelled or named: dropping the
 * tag un-matches the cluster from `tags: {env: prod}` (deregistered as "no longer matches") or
 * loses its `TeleportKubernetesName` (renamed: the old entry deleted). Such a record is malformed:
 * its entry is kept (stale), nothing deleted, nothing renamed. Met on the short path
 * (lean-read.ts) and the SDK's own path alike, through the real EKS client and the wire fake.
 */
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {context, stored} from '../discovery/builders.ts';
import {startProxiedAws, type ProxiedAws} from '../fakes/aws-proxied.ts';
import {mutateJson, when, type FaultProxy} from '../fakes/faults.ts';
import {eksFetcherOf} from './eks-fetcher-paths.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAEKSTAGTYPES00001', secretAccessKey: 'eks-tag-types-secret'};
let aws: ProxiedAws;
let proxy: FaultProxy;

beforeAll(async () => {
  aws = await startProxiedAws({account: ACCOUNT, key: KEY, clusters: [{name: 'a1', tags: {env: 'prod'}}, {name: 'a2', tags: {env: 'prod', TeleportKubernetesName: 'payments'}}]});
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

const spoilTags = (edit: (tags: Record<string, unknown>, name: string) => unknown) =>
  mutateJson((body) => {
    const cluster = body['cluster'] as Record<string, unknown>;
    return {cluster: {...cluster, tags: edit(cluster['tags'] as Record<string, unknown>, String(cluster['name']))}};
  });

const cases: [string, (tags: Record<string, unknown>, name: string) => unknown][] = [
  ...([['a number', 7], ['null', null], ['a list', ['prod']], ['an object', {v: 'prod'}], ['a boolean', true]] as const).map(
    ([what, value]): [string, (tags: Record<string, unknown>, name: string) => unknown] => [
      `a tag value that is ${what}`,
      (tags, name) => (name === 'a1' ? {...tags, env: value} : {...tags, TeleportKubernetesName: value}),
    ],
  ),
  ['tags that are a string', () => 'env=prod'],
  ['tags that are a list', (tags) => Object.entries(tags).map(([Key, Value]) => ({Key, Value}))],
];

for (const path of ['short', 'sdk'] as const) {
  describe(`an EKS DescribeCluster answer with tags of the wrong JSON type (${path === 'short' ? 'short path' : "the SDK's path"})`, () => {
    for (const [what, edit] of cases) {
      it(`${what}: nothing deregistered, nothing renamed; the records are malformed`, async () => {
        const ctx = context('g1', {env: 'prod'});
        const client = await fetcherOf(path);
        try {
          const clean = await client.fetch();
          const current = [...evaluate([clean], ctx).candidates.values()].map((c) => stored(c.server));
          expect(current.map((s) => s.metadata.name).sort()).toEqual(['a1-eks-us-east-1-111111111111', 'payments']);

          proxy.fault = when({operation: 'DescribeCluster'}, spoilTags(edit));
          const spoiled = await client.fetch();
          expect(spoiled.ok).toBe(true);
          const plan = reconcile(current, evaluate([spoiled], ctx), [spoiled], 'g1');
          expect(plan.items.filter((i) => i.action === 'delete').map((i) => `${i.name}: ${i.reason}`)).toEqual([]);
          expect(plan.items.filter((i) => i.action === 'create').map((i) => i.name)).toEqual([]);
          expect(spoiled.malformed.map((m) => m.name).sort()).toEqual(['a1', 'a2']);
          expect(plan.items.filter((i) => i.action === 'stale').map((i) => i.name).sort()).toEqual(['a1-eks-us-east-1-111111111111', 'payments']);
        } finally {
          client.destroy();
        }
      });
    }
  });
}
