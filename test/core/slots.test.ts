// Slots (src/core/slots.ts): the FIFO bound the early listings (`run`), a region's DescribeCluster
// calls and the per-account cap of organization matchers (`add`) run under.
import {describe, expect, it} from 'vitest';
import {Slots} from '../../src/core/slots.ts';

/** A task the test finishes by hand. */
function deferred<T>(): {promise: Promise<T>; resolve: (value: T) => void; reject: (error: Error) => void} {
  let resolve = (_: T): void => undefined;
  let reject = (_: Error): void => undefined;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return {promise, resolve, reject};
}

const live = (): AbortSignal => new AbortController().signal;

describe('Slots', () => {
  it('rejects a concurrency that is not an integer >= 1, naming what it got', () => {
    expect(() => new Slots(0)).toThrow('Expected `concurrency` to be an integer >= 1, got 0');
    expect(() => new Slots(1.5)).toThrow('got 1.5');
  });

  it('runs at most `concurrency` tasks at once and starts the waiting ones in the order given', async () => {
    const slots = new Slots(2);
    const tasks = [deferred<string>(), deferred<string>(), deferred<string>(), deferred<string>()];
    const started: number[] = [];
    const results = tasks.map((t, i) =>
      slots.run(() => {
        started.push(i);
        return t.promise;
      }, live()),
    );
    expect(started).toEqual([0, 1]);
    expect(slots.waiting).toBe(2);
    tasks[1]?.resolve('b');
    await expect(results[1]).resolves.toBe('b');
    expect(started).toEqual([0, 1, 2]);
    // A failed task frees its slot too, and its caller sees its error.
    tasks[0]?.reject(new Error('listing failed'));
    await expect(results[0]).rejects.toThrow('listing failed');
    expect(started).toEqual([0, 1, 2, 3]);
    tasks[2]?.resolve('c');
    tasks[3]?.resolve('d');
    await expect(Promise.all(results.slice(2))).resolves.toEqual(['c', 'd']);
    expect(slots.running).toBe(0);
    expect(slots.waiting).toBe(0);
  });

  it('does not run a task whose signal was aborted before its turn: it rejects with the reason, and the next one starts', async () => {
    const slots = new Slots(1);
    const first = deferred<string>();
    const dropped = new AbortController();
    let ran = false;
    const a = slots.run(() => first.promise, live());
    const b = slots.run(async () => {
      ran = true;
      return 'b';
    }, dropped.signal);
    const c = slots.run(async () => 'c', live());
    dropped.abort(new Error('the plan no longer lists this source'));
    first.resolve('a');
    await expect(a).resolves.toBe('a');
    await expect(b).rejects.toThrow('the plan no longer lists this source');
    await expect(c).resolves.toBe('c');
    expect(ran).toBe(false);
    // Already aborted when asked: never queued.
    await expect(slots.run(async () => 'x', dropped.signal)).rejects.toThrow('the plan no longer lists this source');
  });

  it('starts a task queued `first` ahead of those already waiting, in the order such tasks came', async () => {
    const slots = new Slots(1);
    const running = deferred<void>();
    const started: string[] = [];
    const task = (name: string) => async (): Promise<void> => {
      started.push(name);
    };
    const all = [
      slots.run(() => running.promise, live()),
      slots.run(task('early 1'), live()),
      slots.run(task('early 2'), live()),
      slots.run(task('joined 1'), live(), {first: true}),
      slots.run(task('joined 2'), live(), {first: true}),
    ];
    running.resolve();
    await Promise.all(all);
    expect(started).toEqual(['joined 1', 'joined 2', 'early 1', 'early 2']);
  });

  it('frees the slot of a task that throws instead of returning a promise', async () => {
    const slots = new Slots(1);
    await expect(
      slots.run(() => {
        throw new Error('bug');
      }, live()),
    ).rejects.toThrow('bug');
    await expect(slots.run(async () => 'next', live())).resolves.toBe('next');
  });
});

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

describe('Slots.add', () => {
  it('runs at most N tasks at once and starts the waiting ones in arrival order', async () => {
    const limiter = new Slots(2);
    const started: number[] = [];
    const gates = Array.from({length: 5}, (_, i) => gate(started, i));
    const results = gates.map((g) => limiter.add(g.task));
    await settle();
    expect(started).toEqual([0, 1]);
    expect([limiter.running, limiter.waiting]).toEqual([2, 3]);
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
    expect([limiter.running, limiter.waiting]).toEqual([0, 0]);
  });

  it('a task that fails gives its caller the error and its slot to the next task', async () => {
    const limiter = new Slots(1);
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
    expect(limiter.running).toBe(0);
  });

  it('a task that returns a plain value (a caller outside the types) settles with it and frees its slot', async () => {
    const limiter = new Slots(1);
    const plain = (): Promise<number> => 7 as unknown as Promise<number>;
    await expect(limiter.add(plain)).resolves.toBe(7);
    expect(limiter.running).toBe(0);
    // The slot really is free: the next task runs.
    await expect(limiter.add(async () => 8)).resolves.toBe(8);
    expect([limiter.running, limiter.waiting]).toEqual([0, 0]);
  });

  it('keeps the cap over thousands of queued tasks', async () => {
    const limiter = new Slots(3);
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

  it('shares its slots with `run`: aborted waiting tasks between them hand the slot on, in order', async () => {
    const limiter = new Slots(1);
    const started: number[] = [];
    const first = gate(started, 0);
    const dropped = new AbortController();
    const results = [
      limiter.add(first.task),
      ...Array.from({length: 3000}, () => limiter.run(async () => -1, dropped.signal)),
      limiter.add(async () => 1),
      limiter.run(async () => 2, new AbortController().signal),
    ];
    await settle();
    expect([limiter.running, limiter.waiting]).toEqual([1, 3002]);
    dropped.abort(new Error('dropped'));
    first.release();
    const settled = await Promise.allSettled(results);
    expect(settled.filter((r) => r.status === 'rejected')).toHaveLength(3000);
    expect(settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))).toEqual([0, 1, 2]);
    expect([limiter.running, limiter.waiting]).toEqual([0, 0]);
  });
});
