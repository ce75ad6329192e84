/**
 * Memory handed back once a burst of watchers has left.
 *
 * Streaming snapshots to many watchers at once grows V8's young generation to its maximum (the
 * image's `--max-semi-space-size`) and leaves old-generation pages V8 keeps for later use. A
 * full collection after they left finds the live heap back where it was (within 4 % at 200
 * watchers of 10,000 entries), yet ~25 MB of those pages stay resident. One memory-reducing
 * collection (V8's "last resort" flavour: full collections that also shrink the young
 * generation and give free pages back to the system) returns them.
 *
 * That collection stops the event loop for a while — about twice a plain full collection: ~115–
 * 190 ms at 10,000 entries, 0.6–1 s at 50,000 — so it runs only after a real burst: at least
 * `minWatchers` watchers connected at once since the last one, and more streamed since then
 * than both `afterBytes` and `afterHeapMultiple` times the live heap (the pause grows with the
 * heap, so must what it pays for). It runs a moment after the last watcher left (a client that
 * reconnects at once is not made to wait), never while a discovery cycle runs (it waits for the
 * cycle's end, as the cycle's own collection does, idle-gc.ts), and at most once per `minIntervalMs`.
 */
import {getHeapStatistics} from 'node:v8';
import type {Clock} from '../core/clock.ts';

/** When a memory-reducing collection follows watchers leaving. */
export interface ReclaimPolicy {
  /** Watchers that must have been connected at once since the last collection: a burst, not one client coming and going. */
  readonly minWatchers: number;
  /** Bytes the watchers must have been sent since the last collection for another to be worth its pause. */
  readonly afterBytes: number;
  /** …and at least this many times the heap in use when they left. */
  readonly afterHeapMultiple: number;
  /** Wait after the last watcher left. */
  readonly delayMs: number;
  /** Least time between two collections. */
  readonly minIntervalMs: number;
}

/**
 * 16 watchers at once is a burst; 64 MiB is about five snapshots of 10,000 entries, and eight
 * times the heap is about eight snapshots of any size (an entry's frame is about its share of
 * the heap): streaming that costs several times the pause that follows, so bursts cannot make
 * the pauses a large share of the event loop's time.
 */
export const DEFAULT_RECLAIM_POLICY: ReclaimPolicy = {minWatchers: 16, afterBytes: 64 * 1024 * 1024, afterHeapMultiple: 8, delayMs: 1_000, minIntervalMs: 10_000};

/** What a server reclaims with. */
export interface MemoryReclaim {
  /** The memory-reducing collection. */
  readonly run: () => void;
  readonly clock: Clock;
  readonly policy?: Partial<ReclaimPolicy>;
  /** Bytes of heap in use (default V8's). */
  readonly heapUsed?: () => number;
  /** While true (a discovery cycle runs), the collection waits. */
  readonly deferWhile?: () => boolean;
}

/**
 * V8's memory-reducing full collection, when the process was started with `--expose-gc` (the
 * image and `npm start` are); undefined otherwise, and then watchers leaving reclaim nothing.
 */
export function exposedMemoryReclaim(): (() => void) | undefined {
  const gc: unknown = (globalThis as {gc?: unknown}).gc;
  if (typeof gc !== 'function') return undefined;
  const options = {type: 'major', execution: 'sync', flavor: 'last-resort'};
  return () => void (gc as (o: typeof options) => unknown)(options);
}

/** Decides when the watchers of one server have left after a burst, and then reclaims once. */
export class WatchReclaim {
  readonly #run: () => void;
  readonly #clock: Clock;
  readonly #policy: ReclaimPolicy;
  /** Bytes sent to watchers so far (the pump's count), read when deciding. */
  readonly #sent: () => number;
  /** Whether no watcher is connected, read when the wait is over. */
  readonly #idle: () => boolean;
  readonly #heapUsed: () => number;
  readonly #deferWhile: () => boolean;
  #sentAtLast = 0;
  /** Most watchers connected at once since the last collection. */
  #peak = 0;
  #lastAt: number | undefined;
  #cancel: (() => void) | undefined;

  constructor(reclaim: MemoryReclaim, sent: () => number, idle: () => boolean) {
    this.#run = reclaim.run;
    this.#clock = reclaim.clock;
    this.#policy = {...DEFAULT_RECLAIM_POLICY, ...reclaim.policy};
    this.#sent = sent;
    this.#idle = idle;
    this.#heapUsed = reclaim.heapUsed ?? (() => getHeapStatistics().used_heap_size);
    this.#deferWhile = reclaim.deferWhile ?? (() => false);
  }

  /** A watcher connected; `watchers` are connected now. */
  opened(watchers: number): void {
    if (watchers > this.#peak) this.#peak = watchers;
  }

  /** The last watcher left. */
  allLeft(): void {
    if (this.#cancel !== undefined || this.#peak < this.#policy.minWatchers) return;
    const streamed = this.#sent() - this.#sentAtLast;
    if (streamed < this.#policy.afterBytes || streamed < this.#policy.afterHeapMultiple * this.#heapUsed()) return;
    const sinceLast = this.#lastAt === undefined ? Infinity : this.#clock.now() - this.#lastAt;
    this.#schedule(Math.max(this.#policy.delayMs, this.#policy.minIntervalMs - sinceLast));
  }

  #schedule(wait: number): void {
    this.#cancel = this.#clock.setTimeout(() => {
      this.#cancel = undefined;
      // A watcher came back meanwhile: its leaving asks again.
      if (!this.#idle()) return;
      // A cycle runs: after it, as its own collection does.
      if (this.#deferWhile()) {
        this.#schedule(this.#policy.delayMs);
        return;
      }
      this.#sentAtLast = this.#sent();
      this.#peak = 0;
      this.#lastAt = this.#clock.now();
      this.#run();
    }, wait);
  }

  /** Server shutdown: nothing more runs. */
  stop(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }
}
