import {describe, expect, it} from 'vitest';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {StatusTracker} from '../../src/status/status.ts';
import {eksCluster, failedResult, okResult} from '../discovery/builders.ts';

const T0 = Date.UTC(2026, 0, 1);

function report(ids: readonly string[], result: CycleReport['result'], startedAt = T0): CycleReport {
  return {
    startedAt,
    durationMs: 1500,
    result,
    sources: ids.map((id) => ({id, cloud: 'AWS', region: 'us-east-1', account: '111111111111', ok: result === 'success', clusters: 0})),
    items: [],
    counts: {create: 0, update: 0, delete: 0, unchanged: 0, stale: 0, skip: 0},
    notes: [],
    applyErrors: [],
    results: [],
  };
}

describe('StatusTracker', () => {
  it('keeps the last success and counts consecutive failures of a source, marking it stale', () => {
    const status = new StatusTracker();
    const ok = okResult('us-east-1', '111111111111', [eksCluster('a', 'us-east-1', '111111111111'), eksCluster('b', 'us-east-1', '111111111111')]);
    status.recordSource(ok, T0);
    status.recordSource(failedResult('us-east-1', '111111111111'), T0 + 60_000);
    status.recordSource(failedResult('us-east-1', '111111111111'), T0 + 120_000);
    const [source] = status.sources();
    expect(source).toMatchObject({
      id: ok.source.id,
      ok: false,
      stale: true,
      clusters: 2,
      consecutive_failures: 2,
      last_success: new Date(T0).toISOString(),
      last_error: {code: 'ThrottlingException', at: new Date(T0 + 120_000).toISOString()},
    });
    status.recordSource(ok, T0 + 180_000);
    expect(status.sources()[0]).toMatchObject({ok: true, stale: false, consecutive_failures: 0, last_error: {code: 'ThrottlingException'}});
  });

  it('forgets sources a finished cycle no longer has, and stamps the end of the last fully successful cycle', () => {
    const status = new StatusTracker();
    const a = okResult('us-east-1', '111111111111', []);
    const b = okResult('eu-west-1', '111111111111', []);
    status.recordSource(a, T0);
    status.recordSource(b, T0);
    status.recordCycle(report([a.source.id], 'success'));
    expect(status.sources().map((s) => s.id)).toEqual([a.source.id]);
    expect(status.lastSuccess).toBe(new Date(T0 + 1500).toISOString());
    status.recordCycle(report([a.source.id], 'partial', T0 + 60_000));
    expect(status.lastCycle).toMatchObject({result: 'partial', started_at: new Date(T0 + 60_000).toISOString()});
    expect(status.lastSuccess).toBe(new Date(T0 + 1500).toISOString());
  });
});
