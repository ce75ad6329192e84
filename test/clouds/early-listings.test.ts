// The early listings of a plan (src/clouds/early-listings.ts) fed from a list of sources: only as
// many run as the cycle's bound allows, the next starts as one settles, and none of a matcher starts
// once its plan is final (an organization's plan has 16,677 sources; queued at once, each held a
// controller, a promise and a waiting task), while another matcher still walking goes on being fed.
import {describe, expect, it} from 'vitest';
import {EarlyListings} from '../../src/clouds/early-listings.ts';
import type {ClusterFetcher} from '../../src/clouds/fetcher.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {flushMicrotasks} from '../helpers/fake-clock.ts';

/** Fetchers whose listings answer when the test says so, recording which were started. */
function sources(count: number, matcherIndex = 0): {entries: [string, ClusterFetcher][]; started: string[]; aborted: string[]; answer(id: string): void} {
  const started: string[] = [];
  const aborted: string[] = [];
  const answers = new Map<string, () => void>();
  const entries = Array.from({length: count}, (_, i): [string, ClusterFetcher] => {
    const account = String(i + 100 * matcherIndex).padStart(12, '0');
    const source = {id: `eks:us-east-1:${account}${matcherIndex > 0 ? `#${matcherIndex}` : ''}`, cloud: 'AWS', type: 'eks', region: 'us-east-1', account, matcherIndex};
    return [
      `${source.id}|role`,
      {
        source,
        fetch: (signal) =>
          new Promise<SourceResult>((resolve, reject) => {
            started.push(source.id);
            answers.set(source.id, () => resolve({source, ok: true, clusters: [], malformed: []}));
            signal.addEventListener(
              'abort',
              () => {
                aborted.push(source.id);
                reject(signal.reason as Error);
              },
              {once: true},
            );
          }),
      },
    ];
  });
  return {entries, started, aborted, answer: (id) => answers.get(id)?.()};
}

const failure = (error: unknown) => ({reason: 'other' as const, code: 'Error', operation: 'ListClusters', message: String(error)});

describe('EarlyListings.feed', () => {
  it('runs as many listings as the bound allows, starts the next as one settles, and none once the plan is final', async () => {
    const cycle = new AbortController();
    const early = new EarlyListings(2, cycle.signal, failure, Date.now);
    const {entries, started, answer} = sources(5);
    early.feed(entries);
    await flushMicrotasks();
    expect(started).toEqual([entries[0]![1].source.id, entries[1]![1].source.id]);

    answer(entries[0]![1].source.id);
    await flushMicrotasks();
    expect(started).toHaveLength(3);

    // The walk is done: the plan is final and asks for its sources; nothing more is fed.
    early.stopFeeding(0);
    expect(early.started(entries[1]![0])).toBe(true);
    expect(early.started(entries[4]![0])).toBe(false);
    answer(entries[1]![1].source.id);
    await flushMicrotasks();
    expect(started).toHaveLength(3);

    // What was listed early is handed on; a source never fed is listed when the cycle runs it.
    const handed = early.take(entries[1]![0], entries[1]![1]);
    expect(await handed.fetch(cycle.signal)).toMatchObject({ok: true});
    const late = early.take(entries[4]![0], entries[4]![1]);
    const lateResult = late.fetch(cycle.signal);
    await flushMicrotasks();
    expect(started).toContain(entries[4]![1].source.id);
    answer(entries[4]![1].source.id);
    expect(await lateResult).toMatchObject({ok: true});
    early.dropRest();
  });

  it("keeps feeding a matcher still walking once another's plan is final, and drops a matcher's rest at once", async () => {
    const cycle = new AbortController();
    const early = new EarlyListings(2, cycle.signal, failure, Date.now);
    const first = sources(3, 0);
    const second = sources(3, 1);
    early.feed(first.entries, 0);
    early.feed(second.entries, 1);
    await flushMicrotasks();
    // The first matcher's plan is awaited first: its sources go first.
    expect([...first.started, ...second.started]).toEqual([first.entries[0]![1].source.id, first.entries[1]![1].source.id]);

    // The first plan is final with one listing taken; the other is dropped: the second matcher, still walking, takes the slots.
    early.stopFeeding(0);
    const handed = early.take(first.entries[0]![0], first.entries[0]![1]);
    early.dropRest(0);
    await flushMicrotasks();
    expect(first.aborted).toEqual([first.entries[1]![1].source.id]);
    expect(second.started).toEqual([second.entries[0]![1].source.id]);
    first.answer(first.entries[0]![1].source.id);
    expect(await handed.fetch(cycle.signal)).toMatchObject({ok: true});
    await flushMicrotasks();
    expect(second.started).toHaveLength(2);
    expect(first.started).toHaveLength(2);

    // The second walk failed: its listings stop at once and none more starts.
    early.dropRest(1);
    await flushMicrotasks();
    expect(second.aborted).toEqual(second.started);
    expect(second.started).toHaveLength(2);
    early.feed(second.entries, 1);
    await flushMicrotasks();
    expect(second.started).toHaveLength(2);
  });

  it('feeds nothing once the cycle is aborted', async () => {
    const cycle = new AbortController();
    cycle.abort(new Error('shutdown'));
    const early = new EarlyListings(2, cycle.signal, failure, Date.now);
    const {entries, started} = sources(3);
    early.feed(entries);
    await flushMicrotasks();
    expect(started).toEqual([]);
  });
});
