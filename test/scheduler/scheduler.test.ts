import {describe, expect, it} from 'vitest';
import {FakeClock, flushMicrotasks} from '../helpers/fake-clock.ts';
import {cronSchedule, intervalSchedule} from '../../src/scheduler/schedule.ts';
import {Scheduler} from '../../src/scheduler/scheduler.ts';

/** A cycle whose duration the test controls through the fake clock. */
function harness(cycleMs: number | (() => number), intervalMs = 60_000) {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const starts: number[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const overruns: number[] = [];
  const scheduler = new Scheduler({
    clock,
    next: intervalSchedule(intervalMs),
    run: async (signal) => {
      starts.push(clock.now() - Date.UTC(2026, 0, 1));
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        await clock.sleep(typeof cycleMs === 'number' ? cycleMs : cycleMs(), signal);
      } finally {
        inFlight--;
      }
    },
    onOverrun: (late) => overruns.push(late),
  });
  return {clock, scheduler, starts, overruns, maxInFlight: () => maxInFlight};
}

describe('Scheduler', () => {
  it('runs a cycle at start and then every interval', async () => {
    const h = harness(1000);
    h.scheduler.start();
    await h.clock.advance(180_000);
    expect(h.starts).toEqual([0, 60_000, 120_000, 180_000]);
    expect(h.overruns).toEqual([]);
    await h.scheduler.stop(0);
  });

  it('never runs two cycles at once: a slow cycle delays the next and counts as an overrun', async () => {
    const durations = [90_000, 1000, 1000];
    const h = harness(() => durations.shift() ?? 1000);
    h.scheduler.start();
    await h.clock.advance(200_000);
    expect(h.maxInFlight()).toBe(1);
    expect(h.starts.slice(0, 3)).toEqual([0, 90_000, 150_000]);
    expect(h.overruns).toEqual([30_000]);
    await h.scheduler.stop(0);
  });

  it('runs a triggered cycle now, and coalesces triggers during a cycle into one follow-up', async () => {
    const h = harness(10_000);
    h.scheduler.start();
    await h.clock.advance(1000);
    h.scheduler.trigger();
    h.scheduler.trigger();
    await h.clock.advance(9000);
    expect(h.starts).toEqual([0, 10_000]);
    await h.clock.advance(10_000);
    h.scheduler.trigger();
    await flushMicrotasks();
    expect(h.starts).toEqual([0, 10_000, 20_000]);
    expect(h.maxInFlight()).toBe(1);
    await h.scheduler.stop(0);
  });

  it('stop aborts a running cycle after the grace period and schedules nothing more', async () => {
    const h = harness(1_000_000);
    h.scheduler.start();
    await h.clock.advance(1000);
    const stopped = h.scheduler.stop(5000);
    await h.clock.advance(5000);
    await stopped;
    expect(h.scheduler.busy).toBe(false);
    await h.clock.advance(600_000);
    expect(h.starts).toEqual([0]);
  });

  it('a failing cycle is reported and the loop goes on', async () => {
    const clock = new FakeClock(0);
    const errors: unknown[] = [];
    let runs = 0;
    const scheduler = new Scheduler({
      clock,
      next: intervalSchedule(1000),
      run: async () => {
        runs++;
        throw new Error('boom');
      },
      onError: (e) => errors.push(e),
    });
    scheduler.start();
    await clock.advance(3000);
    expect(runs).toBe(4);
    expect(errors).toHaveLength(4);
    await scheduler.stop();
  });
});

describe('cron schedule', () => {
  it('finds the next matching minute', () => {
    const next = cronSchedule('*/5 * * * *', 'UTC');
    const t0 = Date.UTC(2026, 0, 1, 10, 2, 30);
    expect(new Date(next(t0, t0)).toISOString()).toBe('2026-01-01T10:05:00.000Z');
    expect(new Date(next(Date.UTC(2026, 0, 1, 10, 5), Date.UTC(2026, 0, 1, 10, 5))).toISOString()).toBe('2026-01-01T10:10:00.000Z');
  });
});
