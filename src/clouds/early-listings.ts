/**
 * Listings started before a plan is final. An Azure `subscriptions: ["*"]` matcher learns its
 * subscriptions from the subscriptions list and, with `management_groups`, a walk of the groups'
 * descendants; an AWS `organization` matcher learns its accounts from a walk of the organization's
 * OUs: page after page, one round trip each, before a single cluster was listed. While they run,
 * the sources of the matcher's last good plan are listed already; the plan then hands on the
 * listing of every source it still has with the same inputs (same tenant; same role, external id
 * and regions) and aborts the others, whose answers reach no cycle. A listing only ever counts
 * once the walk and the list have finished well: what may be deleted is still decided by them
 * (walk-grace.ts). Sources are fed per group (an AWS organization matcher): when one matcher's
 * plan is final or failed, its feeding stops and its listings not taken are aborted at once, while
 * the matchers still walking go on being listed early.
 */
import type {SourceFailure, SourceRef, SourceResult} from '../core/types.ts';
import type {ClusterFetcher} from './fetcher.ts';
import {Slots} from '../core/slots.ts';

/** The failure a listing that threw (rather than answering `ok: false`) reports: the cloud's error mapping. */
export type EarlyFailure = (error: unknown, source: SourceRef) => SourceFailure;

interface Started {
  readonly controller: AbortController;
  readonly result: Promise<SourceResult>;
  /** When the listing got its slot and began (the cycle's clock); none while it waits for one. */
  readonly timing: {began?: number};
  /** The group it was fed under (feed), if any. */
  readonly group: number | undefined;
}

/** The listings one plan started early, and the bound they share with the sources it plans late. */
export class EarlyListings {
  readonly #queue: Slots;
  readonly #concurrency: number;
  readonly #signal: AbortSignal;
  readonly #failure: EarlyFailure;
  readonly #now: () => number;
  /** Per group, sources still to start early (feed), pulled as listings settle until that group's plan is final; groups in the order fed. */
  readonly #pending = new Map<number, Iterator<readonly [string, ClusterFetcher]>>();
  /** Groups whose plan is final or failed: nothing more of them is fed. */
  readonly #closed = new Set<number>();
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
    this.#pending.clear();
  };

  /**
   * `concurrency` is the cycle's bound on sources in flight; `signal` the cycle's (deadline,
   * shutdown); `failure` maps what a listing threw to its source's error; `now` the cycle's clock,
   * on which a listing handed on says when it began.
   */
  constructor(concurrency: number, signal: AbortSignal, failure: EarlyFailure, now: () => number) {
    this.#queue = new Slots(concurrency);
    this.#concurrency = concurrency;
    this.#signal = signal;
    this.#failure = failure;
    this.#now = now;
  }

  /**
   * Starts listing the sources `entries` yields (key, fetcher: see start) for `group` (a matcher),
   * as many at a time as the bound allows and the next as one settles, until that group's plan is
   * final (stopFeeding) or drops its rest; groups fed earlier go first, as their plans are awaited
   * first. Queued all at once, an organization's 16,677 sources each held a controller, a promise
   * and a waiting task (W4: ~20 MB more peak RSS), most of them started only after the walk anyway.
   */
  feed(entries: Iterable<readonly [string, ClusterFetcher]>, group = 0): void {
    // A plan done before its listings were fed (a walk that failed at once) takes none of them.
    if (this.#closed.has(group)) return;
    this.#pending.set(group, entries[Symbol.iterator]());
    this.#pull();
  }

  #pull(): void {
    if (this.#signal.aborted) {
      this.#pending.clear();
      return;
    }
    for (const [group, pending] of this.#pending) {
      while (this.#controllers.size < this.#concurrency) {
        const next = pending.next();
        if (next.done === true) {
          this.#pending.delete(group);
          break;
        }
        this.start(next.value[0], next.value[1], group);
      }
      if (this.#controllers.size >= this.#concurrency) return;
    }
  }

  /** Starts listing `fetcher`'s source, under `key` (its source and every input it was built with), for `group` if given. */
  start(key: string, fetcher: ClusterFetcher, group?: number): void {
    if (this.#signal.aborted || this.#started.has(key)) return;
    const controller = new AbortController();
    this.#controllers.add(controller);
    if (!this.#listening) {
      this.#signal.addEventListener('abort', this.#onAbort, {once: true});
      this.#listening = true;
    }
    const timing: Started['timing'] = {};
    const result = this.#queue
      .run(() => {
        timing.began = this.#now();
        return fetcher.fetch(controller.signal);
      }, controller.signal)
      // Settles to a result: a dropped listing leaves no rejection behind.
      .catch((error: unknown): SourceResult => this.#failed(fetcher.source, error));
    void result.then(() => this.#settled(controller));
    this.#started.set(key, {controller, result, group, timing});
  }

  /** A listing settled: the next one fed starts; the last one takes the listener off the cycle's signal. */
  #settled(controller: AbortController): void {
    this.#controllers.delete(controller);
    this.#pull();
    if (this.#controllers.size === 0 && this.#listening) {
      this.#signal.removeEventListener('abort', this.#onAbort);
      this.#listening = false;
    }
  }

  /**
   * `group`'s plan is final: none more of its sources starts early, so what `started` says of them
   * holds while the plan takes them. The other groups are still fed (their walks may still run).
   */
  stopFeeding(group: number): void {
    this.#closed.add(group);
    this.#pending.delete(group);
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
      startedAt: () => started.timing.began,
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

  /**
   * Aborts every listing not taken (the plan no longer has its source with the same inputs, or
   * failed), of `group` only when given, and feeds that group (or any) no more: its answers are never
   * used, and the calls it no longer makes leave the bound (and the accounts' rate) to the others.
   */
  dropRest(group?: number): void {
    if (group === undefined) this.#pending.clear();
    else this.stopFeeding(group);
    for (const [key, started] of this.#started) {
      if (group !== undefined && started.group !== group) continue;
      started.controller.abort(new Error('the plan no longer lists this source'));
      this.#started.delete(key);
    }
  }

  #failed(source: SourceRef, error: unknown): SourceResult {
    return {source, ok: false, clusters: [], malformed: [], error: this.#failure(error, source)};
  }

  #bounded(fetcher: ClusterFetcher): ClusterFetcher {
    const queue = this.#queue;
    return {
      source: fetcher.source,
      fetch: (signal) =>
        // Ahead of the early listings still waiting: a source the last plan did not have (a subscription
        // or account that joined) is still to be listed (an Azure one's kubeconfigs too), and the cycle waits on it.
        queue.run(() => fetcher.fetch(signal), signal, {first: true}).catch((error: unknown): SourceResult => this.#failed(fetcher.source, error)),
    };
  }
}
