/**
 * Runs discovery cycles: the first at start, then when the schedule says so. Never two at
 * once: a cycle still running when the next is due delays it (an overrun). `trigger()`
 * asks for a cycle now; triggers during a cycle coalesce into one follow-up cycle.
 */
import type {Clock} from '../core/clock.ts';
import type {NextDue} from './schedule.ts';

/** Options of a Scheduler. */
export interface SchedulerOptions {
  readonly clock: Clock;
  readonly next: NextDue;
  /** One cycle; receives a signal that aborts when the scheduler stops. Errors are reported, never fatal. */
  readonly run: (signal: AbortSignal) => Promise<void>;
  readonly onOverrun?: (lateByMs: number) => void;
  readonly onError?: (error: unknown) => void;
}

/** The cycle loop. */
export class Scheduler {
  readonly #options: SchedulerOptions;
  #running: Promise<void> | undefined;
  #cancelTimer: (() => void) | undefined;
  #due = 0;
  #pendingTrigger = false;
  #stopped = true;
  #abort = new AbortController();
  #cycles = 0;

  constructor(options: SchedulerOptions) {
    this.#options = options;
  }

  /** Completed cycles so far. */
  get cycles(): number {
    return this.#cycles;
  }

  /** When the next scheduled cycle is due (epoch ms), for /v1/status. */
  get nextDue(): number {
    return this.#due;
  }

  /** Whether a cycle is running now. */
  get busy(): boolean {
    return this.#running !== undefined;
  }

  /** Starts the loop with a cycle right away. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#abort = new AbortController();
    this.#due = this.#options.clock.now();
    this.#launch();
  }

  /** Runs a cycle now, or right after the running one. */
  trigger(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#pendingTrigger = true;
      return;
    }
    this.#cancelTimer?.();
    this.#launch(true);
  }

  /**
   * Stops scheduling. A running cycle gets `graceMs` to finish, then is aborted;
   * resolves once it has ended either way.
   */
  async stop(graceMs = 10_000): Promise<void> {
    this.#stopped = true;
    this.#cancelTimer?.();
    const running = this.#running;
    if (!running) return;
    const abort = (): void => this.#abort.abort(new Error('discovery is shutting down'));
    if (graceMs <= 0) abort();
    const cancelAbort = graceMs > 0 ? this.#options.clock.setTimeout(abort, graceMs) : () => undefined;
    try {
      await running;
    } finally {
      cancelAbort();
    }
  }

  #launch(triggered = false): void {
    const {clock} = this.#options;
    this.#running = (async () => {
      try {
        await this.#options.run(this.#abort.signal);
      } catch (error) {
        this.#options.onError?.(error);
      } finally {
        this.#cycles++;
        this.#running = undefined;
      }
      if (this.#stopped) return;
      if (this.#pendingTrigger) {
        this.#pendingTrigger = false;
        this.#launch(true);
        return;
      }
      const now = clock.now();
      let next = this.#options.next(this.#due, now);
      if (next < now) {
        // A scheduled cycle that ran past the next slot is an overrun; a manual one just moves the slot.
        if (!triggered) this.#options.onOverrun?.(now - next);
        while (triggered && next < now) next = this.#options.next(next, now);
      }
      this.#due = Math.max(next, now);
      this.#cancelTimer = clock.setTimeout(() => this.#launch(), this.#due - now);
    })();
  }
}
