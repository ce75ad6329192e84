/** The system clock with a wall reading that a test can step; timers and elapsed time stay real. Kept out of src/, which ships. */
import {performance} from 'node:perf_hooks';
import {systemClock, type Clock} from '../../src/core/clock.ts';

/** A real clock whose `now()` jumps by `offsetMs` (an NTP step, a clock set by hand) while no time passes. */
export class SteppedClock implements Clock {
  offsetMs = 0;

  now(): number {
    return Date.now() + this.offsetMs;
  }

  elapsed(): number {
    return performance.now();
  }

  setTimeout(fn: () => void, ms: number): () => void {
    return systemClock.setTimeout(fn, ms);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return systemClock.sleep(ms, signal);
  }
}
