/**
 * A registry written under the old naming rule (whole `-`-delimited pieces only) moves to
 * Teleport's names in one cycle: the new name is announced first, then the old entry removed,
 * with one log line per rename and no moment where the cluster is missing.
 */
import {describe, expect, it} from 'vitest';
import type {KubeServer, KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {runCycle, type Registrar} from '../../src/discovery/cycle.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {logCycleSummary} from '../../src/observability/log-events.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {context, eksCluster, okResult, oldEntry, stored} from './builders.ts';

const A = '111111111111';

/** A registrar over a map that records every write in order and whether the cluster was ever absent. */
class RecordingRegistrar implements Registrar {
  readonly entries = new Map<string, KubeServer>();
  readonly writes: string[] = [];
  constructor(initial: KubeServer[]) {
    for (const e of initial) this.entries.set(e.metadata.name, e);
  }
  current(): Promise<KubeServer[]> {
    return Promise.resolve([...this.entries.values()]);
  }
  announce(server: KubeServerDraft): Promise<unknown> {
    this.writes.push(`announce ${server.metadata.name}`);
    this.entries.set(server.metadata.name, stored(server));
    return Promise.resolve();
  }
  remove(name: string): Promise<unknown> {
    this.writes.push(`remove ${name}`);
    this.entries.delete(name);
    return Promise.resolve();
  }
}

/** One cycle of group g1 over the one listing `result`, writing to `registrar`. */
function cycleOf(result: SourceResult, registrar: Registrar) {
  return runCycle({
    planners: [{plan: () => Promise.resolve({fetchers: [{source: result.source, fetch: () => Promise.resolve(result)}], failed: []})}],
    registrar,
    clock: new FakeClock(0),
    discoveryGroup: 'g1',
    matcherFor: context('g1').matcherFor,
    sourceConcurrency: 1,
    evaluateContext: {staticLabels: {}},
  });
}

describe('moving a registry to Teleport names', () => {
  const result = okResult('us-east-1', A, [eksCluster('eks1', 'us-east-1', A)]);
  const OLD = 'eks1-eks-us-east-1-111111111111';
  const NEW = 'eks1-us-east-1-111111111111';

  it('plans the new name and the removal of the old one in the same cycle, saying why', () => {
    const plan = reconcile([oldEntry(result, OLD)], evaluate([result], context('g1')), [result], 'g1');
    expect(plan.items.map((i) => [i.name, i.action, i.reason])).toEqual([
      [OLD, 'delete', `renamed to ${NEW}`],
      [NEW, 'create', `new name of ${OLD}`],
    ]);
    expect(plan.items.find((i) => i.action === 'delete')?.renamedTo).toBe(NEW);
  });

  it('announces the new name before removing the old one, and logs one line per rename', async () => {
    const other = eksCluster('prod-us-east-1', 'us-east-1', A);
    const both = okResult('us-east-1', A, [eksCluster('eks1', 'us-east-1', A), other]);
    const registrar = new RecordingRegistrar([oldEntry(result, OLD), oldEntry(okResult('us-east-1', A, [other]), 'prod-us-east-1-eks-111111111111')]);
    const report = await cycleOf(both, registrar);
    // prod-us-east-1 already says its region, so only the type and account are appended.
    expect([...registrar.entries.keys()].sort()).toEqual([NEW, 'prod-us-east-1-eks-111111111111']);
    expect(registrar.writes.indexOf(`announce ${NEW}`)).toBeLessThan(registrar.writes.indexOf(`remove ${OLD}`));
    expect(report.counts).toMatchObject({create: 1, delete: 1, unchanged: 1});

    const chunks: string[] = [];
    const logger = createLogger({level: 'info', format: 'json', destination: {write: (s: string) => void chunks.push(s)}});
    logCycleSummary(logger, report);
    const renames = chunks.join('').split('\n').filter((l) => l.includes('"event":"rename"')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(renames).toEqual([expect.objectContaining({level: 'info', from: OLD, to: NEW})]);
  });

  it('keeps the old entry when announcing the new name fails, to retry next cycle', async () => {
    const registrar = new RecordingRegistrar([oldEntry(result, OLD)]);
    registrar.announce = () => Promise.reject(new Error('disk full'));
    const report = await cycleOf(result, registrar);
    expect([...registrar.entries.keys()]).toEqual([OLD]);
    expect(report.applyErrors).toEqual([expect.objectContaining({name: NEW, message: 'disk full'})]);
  });

  it('keeps an entry named by an override tag (no discovered-name label) when its record is malformed this cycle', () => {
    const named = okResult('us-east-1', A, [eksCluster('payments', 'us-east-1', A, {tags: {TeleportKubernetesName: 'pay'}})]);
    const current = [...evaluate([named], context('g1')).candidates.values()].map((c) => stored(c.server));
    expect(current[0]?.spec.cluster.metadata.labels['teleport.internal/discovered-name']).toBeUndefined();
    const malformed: SourceResult = {...okResult('us-east-1', A, []), malformed: [{name: 'payments', sourceId: named.source.id, reason: 'CA is not base64 PEM'}]};
    const plan = reconcile(current, evaluate([malformed], context('g1')), [malformed], 'g1');
    expect(plan.items.find((i) => i.name === 'pay')).toMatchObject({action: 'stale', reason: expect.stringContaining('CA is not base64 PEM')});
  });
});
