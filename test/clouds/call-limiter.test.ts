/** The per-account call cap of organization matchers (src/clouds/aws/call-limiter.ts). */
import {describe, expect, it} from 'vitest';
import {CallLimiter} from '../../src/clouds/aws/call-limiter.ts';

/** A task that runs until released by hand, recording its start. */
function gate(started: number[], id: number): {task: () => Promise<number>; release: () => void; fail: (e: Error) => void} {
  let release!: () => void;
  let fail!: (e: Error) => void;
  const done = new Promise<void>((resolve, reject) => {
    release = resolve;
    fail = reject;
  });
  return {
    task: async () => {
      started.push(id);
      await done;
      return id;
    },
    release: () => release(),
    fail: (e) => fail(e),
  };
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('CallLimiter', () => {
  it('runs at most N tasks at once and starts the waiting ones in arrival order', async () => {
    const limiter = new CallLimiter(2);
    const started: number[] = [];
    const gates = Array.from({length: 5}, (_, i) => gate(started, i));
    const results = gates.map((g) => limiter.add(g.task));
    await settle();
    expect(started).toEqual([0, 1]);
    expect([limiter.active, limiter.waiting]).toEqual([2, 3]);
    gates[1]?.release();
    await settle();
    expect(started).toEqual([0, 1, 2]);
    gates[0]?.release();
    gates[2]?.release();
    await settle();
    expect(started).toEqual([0, 1, 2, 3, 4]);
    gates[3]?.release();
    gates[4]?.release();
    expect(await Promise.all(results)).toEqual([0, 1, 2, 3, 4]);
    expect([limiter.active, limiter.waiting]).toEqual([0, 0]);
  });

  it('a task that fails gives its caller the error and its slot to the next task', async () => {
    const limiter = new CallLimiter(1);
    const started: number[] = [];
    const first = gate(started, 0);
    const second = gate(started, 1);
    const failed = limiter.add(first.task);
    const next = limiter.add(second.task);
    await settle();
    first.fail(new Error('AccessDenied'));
    await expect(failed).rejects.toThrow('AccessDenied');
    await settle();
    expect(started).toEqual([0, 1]);
    second.release();
    expect(await next).toBe(1);
    // A task that throws before its first await frees its slot as well.
    await expect(limiter.add(() => Promise.reject(new Error('sync')))).rejects.toThrow('sync');
    expect(limiter.active).toBe(0);
  });

  it('a task that returns a plain value (a caller outside the types) settles with it and frees its slot', async () => {
    const limiter = new CallLimiter(1);
    const plain = (): Promise<number> => 7 as unknown as Promise<number>;
    await expect(limiter.add(plain)).resolves.toBe(7);
    expect(limiter.active).toBe(0);
    // The slot really is free: the next task runs.
    await expect(limiter.add(async () => 8)).resolves.toBe(8);
    expect([limiter.active, limiter.waiting]).toEqual([0, 0]);
  });

  it('keeps the cap over thousands of queued tasks', async () => {
    const limiter = new CallLimiter(3);
    let inFlight = 0;
    let most = 0;
    const tasks = Array.from({length: 3000}, (_, i) =>
      limiter.add(async () => {
        inFlight++;
        most = Math.max(most, inFlight);
        await settle();
        inFlight--;
        return i;
      }),
    );
    const out = await Promise.all(tasks);
    expect(out).toEqual(Array.from({length: 3000}, (_, i) => i));
    expect(most).toBe(3);
  });

  it('refuses a cap that is not a positive integer', () => {
    expect(() => new CallLimiter(0)).toThrow(/positive integer/);
  });
});
