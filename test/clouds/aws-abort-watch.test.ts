/**
 * One abort listener per signal for the AWS calls' waits (src/clouds/aws/abort-watch.ts): every
 * watcher still hears the abort once, an unwatched one does not, a signal that has aborted
 * already answers at once, and a source's hundred waits put one listener on its signal.
 */
import {getEventListeners} from 'node:events';
import {describe, expect, it} from 'vitest';
import {unwatchAbort, watchAbort} from '../../src/clouds/aws/abort-watch.ts';

describe('abort watching', () => {
  it('calls every watcher once on abort, not the unwatched ones, with one listener on the signal however many wait', () => {
    const controller = new AbortController();
    const heard: number[] = [];
    const callbacks = Array.from({length: 100}, (_, i) => () => heard.push(i));
    for (const callback of callbacks) watchAbort(controller.signal, callback);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    for (const callback of callbacks.slice(50)) unwatchAbort(controller.signal, callback);
    controller.abort(new Error('deadline'));
    controller.abort(new Error('again'));
    expect(heard).toEqual(Array.from({length: 50}, (_, i) => i));
  });

  it('a watcher that unwatches another while the abort is delivered: the other is not called', () => {
    const controller = new AbortController();
    const heard: string[] = [];
    const second = (): void => {
      heard.push('second');
    };
    watchAbort(controller.signal, () => {
      heard.push('first');
      unwatchAbort(controller.signal, second);
    });
    watchAbort(controller.signal, second);
    controller.abort();
    expect(heard).toEqual(['first']);
  });

  it('a signal that has aborted already calls the watcher at once (even after its listener fired)', () => {
    const controller = new AbortController();
    watchAbort(controller.signal, () => undefined);
    controller.abort();
    let called = 0;
    watchAbort(controller.signal, () => called++);
    expect(called).toBe(1);
    watchAbort(AbortSignal.abort(), () => called++);
    expect(called).toBe(2);
  });

  it('takes its listener off the signal once nobody waits: a signal combined with a long-lived one is not kept alive', () => {
    // AbortSignal.any keeps a combined signal alive while it has listeners and its sources live:
    // a cycle's signal combines the scheduler's, which lives as long as the leadership.
    const root = new AbortController();
    const combined = AbortSignal.any([root.signal, new AbortController().signal]);
    const first = (): void => undefined;
    const second = (): void => undefined;
    watchAbort(combined, first);
    watchAbort(combined, second);
    unwatchAbort(combined, first);
    expect(getEventListeners(combined, 'abort')).toHaveLength(1);
    unwatchAbort(combined, second);
    expect(getEventListeners(combined, 'abort')).toHaveLength(0);
    // Watching again works as before.
    let heard = 0;
    watchAbort(combined, () => heard++);
    root.abort();
    expect(heard).toBe(1);
  });

});
