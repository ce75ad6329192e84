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
 * That collection stops the event loop for a while (~115 ms at 10,000 entries), so it runs only
 * when nobody is watching any more, only once enough has been streamed since the last one to
 * matter, a moment after the last watcher left (a client that reconnects at once is not made to
 * wait), and at most once per `minIntervalMs`.
 */
import type {Clock} from '../core/clock.ts';

/** When a memory-reducing collection follows watchers leaving. */
export interface ReclaimPolicy {
  /** Bytes the watchers must have been sent since the last collection for another to be worth its pause. */
  readonly afterBytes: number;
  /** Wait after the last watcher left. */
  readonly delayMs: number;
  /** Least time between two collections. */
  readonly minIntervalMs: number;
}

/**
 * 64 MiB is about five snapshots of 10,000 entries; streaming it costs several times the pause
 * that follows, so bursts cannot make the pauses a large share of the event loop's time.
 */
export const DEFAULT_RECLAIM_POLICY: ReclaimPolicy = {afterBytes: 64 * 1024 * 1024, delayMs: 1_000, minIntervalMs: 10_000};

/** What a server reclaims with. */
export interface MemoryReclaim {
  /** The memory-reducing collection. */
  readonly run: () => void;
  readonly clock: Clock;
  readonly policy?: Partial<ReclaimPolicy>;
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
  #sentAtLast = 0;
  #lastAt: number | undefined;
  #cancel: (() => void) | undefined;

  constructor(reclaim: MemoryReclaim, sent: () => number, idle: () => boolean) {
    this.#run = reclaim.run;
    this.#clock = reclaim.clock;
    this.#policy = {...DEFAULT_RECLAIM_POLICY, ...reclaim.policy};
    this.#sent = sent;
    this.#idle = idle;
  }

  /** The last watcher left. */
  allLeft(): void {
    if (this.#cancel !== undefined || this.#sent() - this.#sentAtLast < this.#policy.afterBytes) return;
    const sinceLast = this.#lastAt === undefined ? Infinity : this.#clock.now() - this.#lastAt;
    const wait = Math.max(this.#policy.delayMs, this.#policy.minIntervalMs - sinceLast);
    this.#cancel = this.#clock.setTimeout(() => {
      this.#cancel = undefined;
      // A watcher came back meanwhile: its leaving asks again.
      if (!this.#idle()) return;
      this.#sentAtLast = this.#sent();
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
