/**
 * Listings started before a plan is final. A `subscriptions: ["*"]` matcher learns its
 * subscriptions from the subscriptions list and, with `management_groups`, a walk of the groups'
 * descendants: page after page, one round trip each, before a single cluster was listed. While
 * they run, the subscriptions of the matcher's last good plan are listed already; the plan then
 * hands on the listing of every subscription it still has (same source, same tenant) and aborts
 * the others, whose answers reach no cycle. A listing only ever counts once the walk and the
 * list have finished well: what may be deleted is still decided by them (walk-grace.ts).
 */
import type {SourceResult} from '../../core/types.ts';
import type {ClusterFetcher} from '../fetcher.ts';
import {Slots} from '../../core/slots.ts';
import {azureFailure} from './errors.ts';

interface Started {
  readonly controller: AbortController;
  readonly result: Promise<SourceResult>;
}

/** The listings one plan started early, and the bound they share with the sources it plans late. */
export class EarlyListings {
  readonly #queue: Slots;
  readonly #signal: AbortSignal;
  readonly #started = new Map<string, Started>();
  /** Every listing started and not yet settled, handed on or not: the cycle's abort (deadline, shutdown) stops them all. */
  readonly #controllers = new Set<AbortController>();
  /**
   * Whether `#onAbort` listens on the cycle's signal. Only while a listing is unsettled: that
   * signal combines the scheduler's, which lives for a whole leadership term, and Node keeps a
   * combined signal with a listener (and all it reaches: this object, its queue) for as long as
   * a source signal can still abort — a listener left behind kept every cycle's plan in memory.
   */
  #listening = false;
  readonly #onAbort = (): void => {
    this.#listening = false;
    for (const controller of this.#controllers) controller.abort(this.#signal.reason);
    this.#started.clear();
  };

  /** `concurrency` is the cycle's bound on sources in flight; `signal` the cycle's (deadline, shutdown). */
  constructor(concurrency: number, signal: AbortSignal) {
    this.#queue = new Slots(concurrency);
    this.#signal = signal;
  }

  /** Starts listing `fetcher`'s source, under `key` (its source and every input it was built with). */
  start(key: string, fetcher: ClusterFetcher): void {
    if (this.#signal.aborted || this.#started.has(key)) return;
    const controller = new AbortController();
    this.#controllers.add(controller);
    if (!this.#listening) {
      this.#signal.addEventListener('abort', this.#onAbort, {once: true});
      this.#listening = true;
    }
    const result = this.#queue
      .run(() => fetcher.fetch(controller.signal), controller.signal)
      // Settles to a result: a dropped listing leaves no rejection behind.
      .catch((error: unknown): SourceResult => ({source: fetcher.source, ok: false, clusters: [], malformed: [], error: azureFailure(error, 'ManagedClusters.List')}));
    void result.then(() => this.#settled(controller));
    this.#started.set(key, {controller, result});
  }

  /** A listing settled: the last one takes the listener off the cycle's signal. */
  #settled(controller: AbortController): void {
    this.#controllers.delete(controller);
    if (this.#controllers.size === 0 && this.#listening) {
      this.#signal.removeEventListener('abort', this.#onAbort);
      this.#listening = false;
    }
  }

  /** Whether a listing was started under `key` and not yet taken or dropped. */
  started(key: string): boolean {
    return this.#started.has(key);
  }

  /**
   * The fetcher the plan hands on for `fetcher`'s source: the listing started under `key` when
   * there is one, else `fetcher` itself, run within the same bound as the early listings.
   */
  take(key: string, fetcher: ClusterFetcher): ClusterFetcher {
    const started = this.#started.get(key);
    if (started === undefined) return this.#bounded(fetcher);
    this.#started.delete(key);
    return {
      source: fetcher.source,
      async fetch(signal) {
        const abort = (): void => started.controller.abort(signal.reason);
        if (signal.aborted) abort();
        else signal.addEventListener('abort', abort, {once: true});
        try {
          return await started.result;
        } finally {
          signal.removeEventListener('abort', abort);
        }
      },
    };
  }

  /** Aborts every listing not taken (the plan no longer has its subscription, or failed): its answer is never used. */
  dropRest(): void {
    for (const {controller} of this.#started.values()) controller.abort(new Error('the plan no longer lists this source'));
    this.#started.clear();
  }

  #bounded(fetcher: ClusterFetcher): ClusterFetcher {
    const queue = this.#queue;
    return {
      source: fetcher.source,
      fetch: (signal) =>
        // Ahead of the early listings still waiting: a source the last plan did not have (a subscription
        // that joined) needs its kubeconfigs too, a second round trip after its listing, and the cycle waits on it.
        queue.run(() => fetcher.fetch(signal), signal, {first: true}).catch((error: unknown): SourceResult => ({source: fetcher.source, ok: false, clusters: [], malformed: [], error: azureFailure(error, 'ManagedClusters.List')})),
    };
  }
}
