/**
 * A cap on calls in flight, first come first served: the per-account cap of organization
 * matchers, which every SDK call of a member account passes through (~34,000 a cycle at 1,000
 * accounts). p-queue, used before, emits events and supports priorities, timeouts and abort per
 * task: ~8 µs of CPU a call against ~3 µs here, which does only what the cap needs.
 */

/** Runs at most `concurrency` tasks at once; the others wait in arrival order. */
export class CallLimiter {
  readonly #concurrency: number;
  #active = 0;
  /** Starters of waiting tasks; `#head` is the next one (no `shift()`: a long queue stays O(1)). */
  #waiting: (() => void)[] = [];
  #head = 0;

  constructor(concurrency: number) {
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
    this.#concurrency = concurrency;
  }

  /** Tasks running now. */
  get active(): number {
    return this.#active;
  }

  /** Tasks waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length - this.#head;
  }

  /** Runs `task` when a slot is free; settles as it does. A task that throws frees its slot too. */
  add<T>(task: () => Promise<T>): Promise<T> {
    if (this.#active >= this.#concurrency) return new Promise<void>((start) => this.#waiting.push(start)).then(() => this.#run(task));
    this.#active++;
    return this.#run(task);
  }

  /**
   * Runs a task holding a slot; the slot is handed on when it settles. The task's own promise is
   * returned (no async wrapper and await per call: every SDK call of a member account passes here).
   */
  #run<T>(task: () => Promise<T>): Promise<T> {
    let running: Promise<T>;
    try {
      running = task();
    } catch (error) {
      this.#release();
      return Promise.reject(error as Error);
    }
    // The types promise a promise; a caller outside them (a plain value) still gets its slot back.
    if (typeof (running as Partial<Promise<T>> | null | undefined)?.then !== 'function') {
      this.#release();
      return Promise.resolve(running);
    }
    running.then(this.#onSettled, this.#onSettled);
    return running;
  }

  readonly #onSettled = (): void => this.#release();

  /** Hands the slot to the next waiting task (which keeps `#active` as it is), else frees it. */
  #release(): void {
    if (this.#head < this.#waiting.length) {
      const start = this.#waiting[this.#head++];
      if (this.#head === this.#waiting.length) {
        this.#waiting = [];
        this.#head = 0;
      } else if (this.#head >= 1024 && this.#head * 2 >= this.#waiting.length) {
        // A queue that never empties still drops the starters it has handed out.
        this.#waiting = this.#waiting.slice(this.#head);
        this.#head = 0;
      }
      start?.();
    } else {
      this.#active--;
    }
  }
}
