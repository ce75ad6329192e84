// The cycle runs its sources through a fixed pool of `sourceConcurrency` workers: never more at
// once, every source run exactly once in the planned order, and a failing or hung source costs
// only itself.
import {describe, expect, it} from 'vitest';
import {compileTagMatcher} from '../../matchers/index.ts';
import {EarlyListings} from '../../src/clouds/early-listings.ts';
import {builtInClouds} from '../../src/clouds/index.ts';
import type {SourceRef, SourceResult} from '../../src/core/types.ts';
import {runCycle, type Registrar} from '../../src/discovery/cycle.ts';
import {FakeClock, flushMicrotasks} from '../helpers/fake-clock.ts';

const ACCOUNT = '111111111111';

function source(i: number): SourceRef {
  return {id: `eks:region-${i}:${ACCOUNT}`, cloud: 'AWS', type: 'eks', region: `region-${i}`, account: ACCOUNT, matcherIndex: 0};
}

const registrar: Registrar = {current: async () => [], announce: async () => undefined, remove: async () => undefined};

describe('the cycle source pool', () => {
  it('runs every source once, in order, with at most sourceConcurrency at a time', async () => {
    const started: number[] = [];
    let inFlight = 0;
    let most = 0;
    const fetchers = Array.from({length: 23}, (_, i) => ({
      source: source(i),
      fetch: async (): Promise<SourceResult> => {
        started.push(i);
        most = Math.max(most, ++inFlight);
        // Sources finish out of order: a later one may free its slot first.
        for (let t = 0; t <= (i * 7) % 5; t++) await Promise.resolve();
        inFlight--;
        return i % 6 === 5
          ? {source: source(i), ok: false, clusters: [], malformed: [], error: {reason: 'other', code: 'InternalFailure', message: 'boom', operation: 'ListClusters'}}
          : {source: source(i), ok: true, clusters: [], malformed: []};
      },
    }));
    const report = await runCycle({
      planners: [{plan: async () => ({fetchers, failed: []})}],
      registrar,
      clock: new FakeClock(),
      discoveryGroup: 'pool',
      evaluateContext: {staticLabels: {}, clouds: builtInClouds},
      matcherFor: () => compileTagMatcher({'*': '*'}),
      sourceConcurrency: 4,
    });
    expect(started).toEqual(Array.from({length: 23}, (_, i) => i));
    expect(most).toBe(4);
    expect(report.sources).toHaveLength(23);
    expect(report.sources.filter((s) => !s.ok).map((s) => s.id)).toEqual([5, 11, 17].map((i) => source(i).id).sort());
    expect(report.result).toBe('partial');
  });

  it('a source that hangs past the deadline fails alone; the pool still runs the rest', async () => {
    const clock = new FakeClock();
    const fetchers = Array.from({length: 6}, (_, i) => ({
      source: source(i),
      fetch: (): Promise<SourceResult> =>
        i === 1 ? new Promise<SourceResult>(() => undefined) : Promise.resolve({source: source(i), ok: true, clusters: [], malformed: []}),
    }));
    const cycle = runCycle({
      planners: [{plan: async () => ({fetchers, failed: []})}],
      registrar,
      clock,
      discoveryGroup: 'pool',
      evaluateContext: {staticLabels: {}, clouds: builtInClouds},
      matcherFor: () => compileTagMatcher({'*': '*'}),
      sourceConcurrency: 2,
      deadlineMs: 1_000,
    });
    await clock.advance(1_000);
    const report = await cycle;
    expect(report.deadlineExceeded).toBe(true);
    expect(report.sources.filter((s) => !s.ok).map((s) => [s.id, s.error?.code])).toEqual([[source(1).id, 'CycleDeadline']]);
    expect(report.sources.filter((s) => s.ok)).toHaveLength(5);
  });

  it('counts the duration of a source listed early from when its listing began, not from when the plan handed it on', async () => {
    // An organization's walk takes 30 s while its last plan's sources are listed already; the
    // listing answers 1 s after the plan is final. Its source took 31 s, which the metric and the
    // source's log line must say (they said ~1 s, or 0 for a listing that answered during the walk).
    const clock = new FakeClock();
    let answer: (() => void) | undefined;
    const listing = {
      source: source(0),
      fetch: () => new Promise<SourceResult>((resolve) => (answer = () => resolve({source: source(0), ok: true, clusters: [], malformed: []}))),
    };
    const durations: number[] = [];
    const cycle = runCycle({
      planners: [
        {
          plan: async (context) => {
            const early = new EarlyListings(context!.sourceConcurrency!, context!.signal!, (error) => ({reason: 'other', code: 'Error', operation: 'ListClusters', message: String(error)}), context!.now);
            early.feed([['listing', listing]]);
            await clock.advance(30_000);
            early.stopFeeding(0);
            return {fetchers: [early.take('listing', listing)], failed: []};
          },
        },
      ],
      registrar,
      clock,
      discoveryGroup: 'pool',
      evaluateContext: {staticLabels: {}, clouds: builtInClouds},
      matcherFor: () => compileTagMatcher({'*': '*'}),
      sourceConcurrency: 2,
      events: {sourceDone: (_result, ms) => durations.push(ms)},
    });
    await flushMicrotasks();
    await clock.advance(1_000);
    answer!();
    await cycle;
    expect(durations).toEqual([31_000]);
  });
});
