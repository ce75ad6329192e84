/**
 * A FIFO bound on tasks in flight, without a listener, timer, symbol or event per task. The
 * early listings (src/clouds/early-listings.ts) queue every subscription of a plan — W5:
 * 500 a cycle over 100 slots — and p-queue's bookkeeping per task (a running-task record, a
 * Promise.race with an abort listener while queued and another while running, four events) was
 * some 25 µs a task. An aborted task is not run: it settles with its signal's reason when its
 * turn comes.
 */

interface Waiter {
  readonly start: () => void;
  readonly signal: AbortSignal;
  readonly fail: (reason: unknown) => void;
}

/** At most `concurrency` tasks of `run` at a time, started in the order given. */
export class Slots {
  readonly #concurrency: number;
  #running = 0;
  #waiting: Waiter[] = [];
  #head = 0;
  /** Waiting tasks at the head of the queue that were queued `first`. */
  #firsts = 0;

  constructor(concurrency: number) {
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new TypeError(`Expected \`concurrency\` to be an integer >= 1, got ${concurrency}`);
    this.#concurrency = concurrency;
  }

  /** Tasks running now. */
  get running(): number {
    return this.#running;
  }

  /** Tasks waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length - this.#head;
  }

  /**
   * Runs `task` once a slot is free; rejects with `signal.reason` instead when `signal` was aborted
   * by the time its turn comes. A running task is told of an abort by its own signal, not by this.
   * With `first`, it goes ahead of the tasks already waiting (after those queued `first` before it).
   */
  run<T>(task: () => Promise<T>, signal: AbortSignal, options: {readonly first?: boolean} = {}): Promise<T> {
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      const start = (): void => {
        this.#running++;
        let settled: Promise<T>;
        try {
          settled = task();
        } catch (error) {
          settled = Promise.reject(error);
        }
        settled.then(
          (value) => {
            this.#release();
            resolve(value);
          },
          (error: unknown) => {
            this.#release();
            reject(error);
          },
        );
      };
      if (this.#running < this.#concurrency) start();
      // No listener while it waits: an abort is seen when its turn comes (the running tasks, aborted
      // by the same cause, free their slots at once), and the cycle never waits on a queued source
      // (cycle.ts races every source against the cycle's abort).
      else if (options.first === true) {
        this.#waiting.splice(this.#head + this.#firsts, 0, {start, signal, fail: reject});
        this.#firsts++;
      } else this.#waiting.push({start, signal, fail: reject});
    });
  }

  #release(): void {
    this.#running--;
    while (this.#running < this.#concurrency && this.#head < this.#waiting.length) {
      const next = this.#waiting[this.#head] as Waiter;
      this.#head++;
      if (this.#firsts > 0) this.#firsts--;
      if (next.signal.aborted) next.fail(next.signal.reason);
      else next.start();
    }
    if (this.#head === this.#waiting.length) {
      this.#waiting = [];
      this.#head = 0;
    } else if (this.#head > 1024) {
      this.#waiting = this.#waiting.slice(this.#head);
      this.#head = 0;
    }
  }
}
