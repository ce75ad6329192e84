import {describe, expect, it} from 'vitest';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {Metrics} from '../../src/observability/metrics.ts';
import {CycleObserver} from '../../src/service/cycle-observer.ts';
import {StatusTracker} from '../../src/status/status.ts';
import {failedResult} from '../discovery/builders.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

function report(deadlineExceeded = false): CycleReport {
  return {
    startedAt: 0,
    durationMs: 10,
    result: 'failure',
    sources: [{id: 'eks:0:us-east-1:111111111111', cloud: 'AWS', region: 'us-east-1', account: '111111111111', ok: false, clusters: 0, error: {reason: 'timeout', code: 'CycleDeadline', message: 'cut off', operation: 'fetch'}}],
    items: [],
    counts: {create: 0, update: 0, delete: 0, unchanged: 0, stale: 0, skip: 0},
    notes: [],
    applyErrors: [],
    results: [],
    ...(deadlineExceeded ? {deadlineExceeded: true} : {}),
  };
}

describe('CycleObserver', () => {
  function observer() {
    const lines: {event?: string; msg?: string; failed_sources?: string[]}[] = [];
    const log = createLogger({level: 'info', format: 'json', destination: {write: (s: string) => void lines.push(...s.split('\n').filter(Boolean).map((l) => JSON.parse(l) as object))}});
    const status = new StatusTracker();
    const metrics = new Metrics();
    return {observer: new CycleObserver({clock: new FakeClock(), status, metrics, log}), status, metrics, lines};
  }

  it('records a source in status and metrics and logs its failure once', async () => {
    const {observer: o, status, metrics, lines} = observer();
    o.source(failedResult('us-east-1', '111111111111'), 120);
    expect(status.sources()).toMatchObject([{ok: false, consecutive_failures: 1}]);
    expect((await metrics.render()).body).toMatch(/^kube_discovery_source_duration_seconds_count\{cloud="AWS"\} 1$/m);
    expect(lines.filter((l) => l.event === 'source_failed')).toHaveLength(1);
  });

  it('a cycle cut off at its deadline is logged with the sources cut off; readiness sees the first cycle; waiters get the report after probes', async () => {
    const {observer: o, status, lines} = observer();
    const next = o.nextCycle();
    expect(o.firstCycleDone).toBe(false);
    const r = report(true);
    o.applied(r);
    expect(o.firstCycleDone).toBe(true);
    expect(status.lastCycle).toMatchObject({result: 'failure', deadline_exceeded: true});
    expect(lines.find((l) => l.event === 'cycle_deadline')?.failed_sources).toEqual(['eks:0:us-east-1:111111111111']);
    o.completed(r, 2);
    await expect(next).resolves.toBe(r);
    expect(lines.find((l) => l.event === 'probe')?.msg).toBe('probes changed the health of 2 clusters');
  });
});
