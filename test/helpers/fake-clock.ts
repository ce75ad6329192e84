/** The test clock: time moves only when a test calls `advance`. Kept out of src/, which ships. */
import type {Clock} from '../../src/core/clock.ts';

interface PendingTimer {
  readonly id: number;
  readonly at: number;
  readonly fn: () => void;
}

/** A clock that only moves when a test calls `advance`; timers fire in order of due time. */
export class FakeClock implements Clock {
  #now: number;
  #timers: PendingTimer[] = [];
  #nextId = 0;

  constructor(start: number | Date = Date.UTC(2026, 0, 1)) {
    this.#now = typeof start === 'number' ? start : start.getTime();
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): () => void {
    const timer = {id: this.#nextId++, at: this.#now + Math.max(0, ms), fn};
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t.id !== timer.id);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const cancel = this.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = (): void => {
        cancel();
        reject(signal?.reason as Error);
      };
      signal?.addEventListener('abort', onAbort, {once: true});
    });
  }

  /** Number of timers waiting to fire. */
  get pending(): number {
    return this.#timers.length;
  }

  /**
   * Moves time forward by `ms`, firing due timers one by one and letting promise
   * callbacks run between them, so code awaiting a sleep sees the time it expects.
   */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      await flushMicrotasks();
      const due = this.#timers
        .filter((t) => t.at <= target)
        .sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t.id !== due.id);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = target;
    await flushMicrotasks();
  }
}

/** Lets pending promise reactions (several hops deep) run. */
export async function flushMicrotasks(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
