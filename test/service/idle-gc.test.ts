// The collection after a cycle: never inside the cycle's own task, once per idle moment, and
// nothing at all when the runtime offers no collection (a process started without --expose-gc).
import {describe, expect, it} from 'vitest';
import {exposedGc, idleCollector} from '../../src/service/idle-gc.ts';

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('idleCollector', () => {
  it('collects after the calling task and its promise continuations, once for calls made together', async () => {
    const events: string[] = [];
    const collect = idleCollector(() => events.push('gc'));
    collect();
    collect();
    events.push('cycle done');
    await Promise.resolve();
    events.push('continuation');
    await turn();
    expect(events).toEqual(['cycle done', 'continuation', 'gc']);

    collect();
    await turn();
    expect(events.filter((e) => e === 'gc')).toHaveLength(2);
  });

  it('does nothing without a collection to call', async () => {
    const collect = idleCollector(undefined);
    expect(() => collect()).not.toThrow();
    await turn();
  });

  it('finds the runtime collection only when the process exposes one', () => {
    const global = globalThis as {gc?: unknown};
    const had = Object.getOwnPropertyDescriptor(globalThis, 'gc');
    try {
      let calls = 0;
      global.gc = () => calls++;
      exposedGc()?.();
      expect(calls).toBe(1);
      delete global.gc;
      expect(exposedGc()).toBeUndefined();
    } finally {
      if (had) Object.defineProperty(globalThis, 'gc', had);
    }
  });
});
