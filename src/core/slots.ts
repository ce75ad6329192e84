/**
 * A FIFO bound on tasks in flight, without a listener, timer, symbol or event per task. p-queue's
 * bookkeeping per task (a running-task record, a Promise.race with an abort listener while queued
 * and another while running, four events) was ~8 µs of CPU a call against ~3 µs here, and three
 * hot paths pass every task through a bound: the organization matchers' per-account cap (every
 * SDK call of a member account, ~34,000 a cycle at 1,000 accounts), a region's DescribeCluster
 * calls (`add`), and the early listings (src/clouds/early-listings.ts, W5: 500 a cycle over 100
 * slots; `run`, where an aborted task is not run: it settles with its signal's reason when its
 * turn comes).
 */

/**
 * Starts a waiting task, holding the slot handed to it; returns false when the task declined (its
 * signal was aborted), the slot then going on to the next one.
 */
type Starter = () => boolean | void;

/** At most `concurrency` tasks at a time, started in the order given. */
export class Slots {
  readonly #concurrency: number;
  #running = 0;
  /** Starters of waiting tasks; `#head` is the next one (no `shift()`: a long queue stays O(1)). */
  #waiting: Starter[] = [];
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
   * Runs `task` when a slot is free; settles as it does. A task that throws frees its slot too. No
   * signal: a caller with thousands of tasks on one signal checks it in the task (one listener per
   * task on it would make every add and remove linear).
   */
  add<T>(task: () => Promise<T>): Promise<T> {
    // The resolver of a promise returns undefined: the waiting task always starts.
    if (this.#running >= this.#concurrency) return new Promise<void>((start) => this.#waiting.push(start)).then(() => this.#run(task));
    this.#running++;
    return this.#run(task);
  }

  /**
   * Runs `task` once a slot is free; rejects with `signal.reason` instead when `signal` was aborted
   * by the time its turn comes. A running task is told of an abort by its own signal, not by this.
   * With `first`, it goes ahead of the tasks already waiting (after those queued `first` before it).
   */
  run<T>(task: () => Promise<T>, signal: AbortSignal, options: {readonly first?: boolean} = {}): Promise<T> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#running < this.#concurrency) {
      this.#running++;
      return this.#run(task);
    }
    // No listener while it waits: an abort is seen when its turn comes (the running tasks, aborted
    // by the same cause, free their slots at once), and the cycle never waits on a queued source
    // (cycle.ts races every source against the cycle's abort).
    return new Promise<T>((resolve, reject) => {
      const start = (): boolean => {
        if (signal.aborted) {
          reject(signal.reason);
          return false;
        }
        this.#run(task).then(resolve, reject);
        return true;
      };
      if (options.first === true) {
        this.#waiting.splice(this.#head + this.#firsts, 0, start);
        this.#firsts++;
      } else this.#waiting.push(start);
    });
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

  /** Hands the slot to the next waiting task that starts (which keeps `#running` as it is), else frees it. */
  #release(): void {
    while (this.#head < this.#waiting.length) {
      const start = this.#waiting[this.#head++] as Starter;
      if (this.#firsts > 0) this.#firsts--;
      if (this.#head === this.#waiting.length) {
        this.#waiting = [];
        this.#head = 0;
      } else if (this.#head >= 1024 && this.#head * 2 >= this.#waiting.length) {
        // A queue that never empties still drops the starters it has handed out.
        this.#waiting = this.#waiting.slice(this.#head);
        this.#head = 0;
      }
      if (start() !== false) return;
    }
    this.#running--;
  }
}
