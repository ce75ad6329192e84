/** When the next cycle is due: a fixed interval, or the next match of a cron expression (node-cron). */
import {createTask} from 'node-cron';

/**
 * The next due time (epoch ms) after a cycle that was due at `previousDue`. It may lie
 * before `now` when the cycle overran; the scheduler then runs at once and counts it.
 */
export type NextDue = (previousDue: number, now: number) => number;

/** Every `intervalMs`, anchored on the previous due time so cycles don't drift. */
export function intervalSchedule(intervalMs: number): NextDue {
  return (previousDue) => previousDue + intervalMs;
}

const MINUTE = 60_000;
const SECOND = 1000;
const HORIZON_MS = 366 * 24 * 60 * MINUTE;

/** The next time after `previousDue` that a cron expression matches; 6-field expressions have second precision. */
export function cronSchedule(expression: string, timezone?: string): NextDue {
  const task = createTask(expression, () => undefined, timezone ? {timezone} : {});
  const step = expression.trim().split(/\s+/).length === 6 ? SECOND : MINUTE;
  return (previousDue, now) => {
    // Start from the later of the two so a long outage doesn't replay a year of slots.
    const from = Math.max(previousDue, now - step);
    let t = Math.floor(from / step) * step + step;
    for (const end = from + HORIZON_MS; t <= end; t += step) {
      if (task.match(new Date(t))) return t;
    }
    throw new Error(`cron expression ${JSON.stringify(expression)} never matches within a year`);
  };
}
