/** Injected time: only the entry point builds the system clock; tests advance a FakeClock. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /**
   * Milliseconds on a clock that never steps (monotonic; only differences mean anything), for
   * deadlines a wall clock step must not move. Absent (test clocks), `now()` stands in.
   */
  elapsed?(): number;
  /** Runs `fn` after `ms`; returns a function that cancels it. */
  setTimeout(fn: () => void, ms: number): () => void;
  /** Resolves after `ms`, or rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The real clock, backed by Date.now and timers that never keep the process alive. */
export const systemClock: Clock = {
  now: () => Date.now(),
  elapsed: () => performance.now(),
  setTimeout(fn, ms) {
    const t = globalThis.setTimeout(fn, ms);
    t.unref();
    return () => globalThis.clearTimeout(t);
  },
  sleep(ms, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const t = globalThis.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = (): void => {
        globalThis.clearTimeout(t);
        reject(signal?.reason as Error);
      };
      signal?.addEventListener('abort', onAbort, {once: true});
    });
  },
};
