// Slots (src/core/slots.ts): the FIFO bound the early Azure listings run under.
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
