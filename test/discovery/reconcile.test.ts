import fc from 'fast-check';
import {describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile, type Action} from '../../src/discovery/reconcile.ts';
import {context, eksCluster, failedResult, okResult, stored} from './builders.ts';

function registered(group: string, ...clusters: ReturnType<typeof eksCluster>[]): KubeServer[] {
  const evaluation = evaluate([okResultFor(clusters)], context(group));
  return [...evaluation.candidates.values()].map((c) => stored(c.server));
}

function okResultFor(clusters: ReturnType<typeof eksCluster>[]) {
  // One result per (region, account) is what the fetchers produce; tests mostly use one.
  return {...okResult(clusters[0]?.region ?? 'us-east-1', clusters[0]?.account ?? '111111111111', clusters)};
}

function actions(plan: ReturnType<typeof reconcile>): Record<string, Action> {
  return Object.fromEntries(plan.items.map((i) => [i.name, i.action]));
}

describe('reconcile', () => {
  const A = '111111111111';

  it('creates new clusters, keeps unchanged ones and deletes vanished ones of a successful source', () => {
    const current = registered('g1', eksCluster('keep', 'us-east-1', A), eksCluster('gone', 'us-east-1', A));
    const results = [okResult('us-east-1', A, [eksCluster('keep', 'us-east-1', A), eksCluster('new', 'us-east-1', A)])];
    const plan = reconcile(current, evaluate(results, context()), results, 'g1');
    expect(actions(plan)).toEqual({
      'keep-eks-us-east-1-111111111111': 'unchanged',
      'new-eks-us-east-1-111111111111': 'create',
      'gone-eks-us-east-1-111111111111': 'delete',
    });
    expect(plan.items.find((i) => i.action === 'delete')?.reason).toContain('no longer listed');
  });

  it('updates a cluster whose tags or endpoint changed and says which field', () => {
    const current = registered('g1', eksCluster('c', 'us-east-1', A));
    const results = [okResult('us-east-1', A, [eksCluster('c', 'us-east-1', A, {tags: {env: 'staging'}})])];
    const plan = reconcile(current, evaluate(results, context()), results, 'g1');
    expect(plan.items).toMatchObject([{action: 'update', reason: 'changed: labels'}]);
  });

  it('keeps clusters of a failed source and marks them stale, while a healthy region reconciles', () => {
    const current = registered('g1', eksCluster('east', 'us-east-1', A)).concat(registered('g1', eksCluster('west', 'us-west-2', A)));
    const results = [failedResult('us-east-1', A), okResult('us-west-2', A, [])];
    const plan = reconcile(current, evaluate(results, context()), results, 'g1');
    expect(actions(plan)).toEqual({'east-eks-us-east-1-111111111111': 'stale', 'west-eks-us-west-2-111111111111': 'delete'});
    const stale = plan.items.find((i) => i.action === 'stale');
    expect(stale?.server?.status?.stale).toBe(true);
    expect(stale?.reason).toContain('ThrottlingException');
  });

  it('clears the stale mark when the source answers again', () => {
    const [entry] = registered('g1', eksCluster('c', 'us-east-1', A));
    const current = [{...entry!, status: {...entry!.status, stale: true, stale_reason: 'x'}}];
    const results = [okResult('us-east-1', A, [eksCluster('c', 'us-east-1', A)])];
    const plan = reconcile(current, evaluate(results, context()), results, 'g1');
    expect(plan.items).toMatchObject([{action: 'update', reason: expect.stringContaining('recovered')}]);
    expect(plan.items[0]?.server?.status?.stale).toBeUndefined();
  });

  it('deletes a cluster that no longer matches the tags, saying why', () => {
    const current = registered('g1', eksCluster('c', 'us-east-1', A));
    const results = [okResult('us-east-1', A, [eksCluster('c', 'us-east-1', A, {tags: {env: 'dev'}})])];
    const plan = reconcile(current, evaluate(results, context('g1', {env: 'prod'})), results, 'g1');
    expect(plan.items.map((i) => [i.action, i.reason])).toContainEqual(['delete', expect.stringContaining('no longer matches')]);
  });

  it('keeps an entry whose record came back malformed', () => {
    const current = registered('g1', eksCluster('c', 'us-east-1', A));
    const result = {...okResult('us-east-1', A, []), malformed: [{name: 'c', sourceId: 'x', reason: 'certificate authority data is missing'}]};
    const plan = reconcile(current, evaluate([result], context()), [result], 'g1');
    expect(actions(plan)).toMatchObject({'c-eks-us-east-1-111111111111': 'stale'});
  });

  it('carries the probed health over to the new document', () => {
    const [entry] = registered('g1', eksCluster('c', 'us-east-1', A));
    const current = [{...entry!, status: {...entry!.status, target_health: {status: 'healthy' as const}}}];
    const results = [okResult('us-east-1', A, [eksCluster('c', 'us-east-1', A)])];
    const plan = reconcile(current, evaluate(results, context()), results, 'g1');
    expect(plan.items[0]?.server?.status?.target_health?.status).toBe('healthy');
  });

  it('never deletes an entry of a failed source or of another discovery group (property)', () => {
    const regions = ['us-east-1', 'us-west-2', 'eu-west-1'];
    const accounts = ['111111111111', '222222222222'];
    const clusterArb = fc.record({
      name: fc.constantFrom('a', 'b', 'c', 'd', 'e'),
      region: fc.constantFrom(...regions),
      account: fc.constantFrom(...accounts),
      group: fc.constantFrom('g1', 'g2'),
      env: fc.constantFrom('prod', 'dev'),
    });
    fc.assert(
      fc.property(
        fc.array(clusterArb, {maxLength: 12}),
        fc.array(clusterArb, {maxLength: 12}),
        fc.subarray(regions.flatMap((r) => accounts.map((a) => `${r}|${a}`))),
        (currentSpecs, fetchedSpecs, failedKeys) => {
          const failed = new Set(failedKeys);
          const current = currentSpecs.flatMap((s) => registered(s.group, eksCluster(s.name, s.region, s.account, {tags: {env: s.env}})));
          const results = regions.flatMap((region) =>
            accounts.map((account) =>
              failed.has(`${region}|${account}`)
                ? failedResult(region, account)
                : okResult(region, account, fetchedSpecs.filter((f) => f.region === region && f.account === account).map((f) => eksCluster(f.name, f.region, f.account, {tags: {env: f.env}}))),
            ),
          );
          const plan = reconcile(current, evaluate(results, context('g1', {env: 'prod'})), results, 'g1');
          for (const item of plan.items.filter((i) => i.action === 'delete')) {
            const entry = current.find((c) => c.metadata.name === item.name && c.spec.cluster.metadata.labels['teleport.internal/discovery-group-name'] === 'g1');
            expect(entry, `deleted ${item.name} must be an entry of g1`).toBeDefined();
            const labels = entry!.spec.cluster.metadata.labels;
            expect(failed.has(`${labels['region']}|${labels['account-id']}`), `deleted ${item.name} from a failed source`).toBe(false);
          }
          // Every g1 entry of a failed source is kept (stale or still present).
          for (const entry of current.filter((c) => c.spec.cluster.metadata.labels['teleport.internal/discovery-group-name'] === 'g1')) {
            const labels = entry.spec.cluster.metadata.labels;
            if (failed.has(`${labels['region']}|${labels['account-id']}`)) {
              expect(plan.items.some((i) => i.name === entry.metadata.name && (i.action === 'stale' || i.action === 'unchanged' || i.action === 'update'))).toBe(true);
            }
          }
        },
      ),
      {numRuns: 300},
    );
  });
});
