// A steady cycle hands reconcile the same cluster objects and registered entries as the last one
// (src/discovery/reconcile.ts `decisions`): the decision is reused then, and only then. Any
// change of the registered entry (a stale mark, a probe's health, someone else's write) or of
// the cluster is decided afresh.
import {describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile, type PlanItem} from '../../src/discovery/reconcile.ts';
import {context, eksCluster, okResult, stored} from './builders.ts';

const A = '111111111111';
const NAME = 'c-eks-us-east-1-111111111111';

// One context for every cycle, as a service has (a new tag matcher is a new judgement).
const ctx = context();

function decide(cluster: ReturnType<typeof eksCluster>, current: KubeServer): PlanItem {
  const results = [okResult('us-east-1', A, [cluster])];
  const item = reconcile([current], evaluate(results, ctx), results, 'g1').items.find((i) => i.name === NAME);
  if (!item) throw new Error('no plan item');
  return item;
}

describe('a decision is reused only for the same cluster object and the same registered entry', () => {
  const cluster = eksCluster('c', 'us-east-1', A);
  const [candidate] = evaluate([okResult('us-east-1', A, [cluster])], ctx).candidates.values();
  if (!candidate) throw new Error('no candidate');
  const entry = stored(candidate.server, {discovered_at: '2026-01-01T00:00:00.000Z'});

  it('the same inputs give the same decision and the same document object (the heartbeat then skips its compare)', () => {
    const first = decide(cluster, entry);
    const second = decide(cluster, entry);
    expect(first.action).toBe('unchanged');
    expect(second).toBe(first);
    expect(second.server).toBe(first.server);
  });

  it('an entry marked stale since (its source failed) is updated, although the cluster object is the same', () => {
    decide(cluster, entry);
    const item = decide(cluster, {...entry, status: {...entry.status, stale: true, stale_reason: 'source failed'}});
    expect(item).toMatchObject({action: 'update', reason: expect.stringContaining('no longer stale') as unknown});
  });

  it('a health the probe wrote since is carried into the document, not the one of the last decision', () => {
    const first = decide(cluster, entry);
    const probed: KubeServer = {...entry, status: {...entry.status, target_health: {status: 'healthy', reason: 'ok', message: 'reachable'}}};
    const item = decide(cluster, probed);
    expect(item.action).toBe('unchanged');
    expect(item.server?.status?.target_health).toEqual({status: 'healthy', reason: 'ok', message: 'reachable'});
    expect(first.server?.status?.target_health).not.toEqual(item.server?.status?.target_health);
  });

  it('an entry someone else rewrote with other labels is updated back', () => {
    decide(cluster, entry);
    const labels = {...entry.spec.cluster.metadata.labels, env: 'tampered'};
    const rewritten: KubeServer = {...entry, spec: {...entry.spec, cluster: {...entry.spec.cluster, metadata: {...entry.spec.cluster.metadata, labels}}}};
    expect(decide(cluster, rewritten)).toMatchObject({action: 'update', reason: 'changed: labels'});
  });

  it('a config change (static labels, as a DiscoveryConfig or config reload brings) is decided afresh for the same cluster object', () => {
    decide(cluster, entry);
    const results = [okResult('us-east-1', A, [cluster])];
    const item = reconcile([entry], evaluate(results, {...ctx, staticLabels: {team: 'platform'}}), results, 'g1').items.find((i) => i.name === NAME);
    expect(item).toMatchObject({action: 'update', reason: 'changed: labels'});
    expect(item?.server?.spec.cluster.metadata.labels).toMatchObject({team: 'platform'});
  });

  it('a changed cluster (a new object) is decided afresh against the same entry', () => {
    decide(cluster, entry);
    const item = decide(eksCluster('c', 'us-east-1', A, {tags: {env: 'staging'}}), entry);
    expect(item).toMatchObject({action: 'update', reason: 'changed: labels'});
  });
});
