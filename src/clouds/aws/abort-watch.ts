/**
 * One abort listener per signal for the many short waits of the AWS calls. A source's calls
 * share its signal; each call waited on it two or three times (the retry token, the socket, the
 * answer), and Node's `addEventListener` / `removeEventListener` cost a listener record, a map
 * entry and an options check each time (~1 KB and a few µs per call, all garbage by the answer).
 * Here the first wait on a signal adds the one listener; later waits are an entry in a Set.
 */

/** The watch on a signal, kept on the signal itself (gone with it; a WeakMap lookup cost more than the Set). */
const WAITING = Symbol('kubeDiscoveryAbortWatchers');
interface Watch {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}
type Watched = AbortSignal & {[WAITING]?: Watch | undefined};

/** Calls `onAbort` once when `signal` aborts, until unwatched; at once when it has aborted already. */
export function watchAbort(signal: AbortSignal, onAbort: () => void): void {
  if (signal.aborted) {
    onAbort();
    return;
  }
  const watched = signal as Watched;
  let watch = watched[WAITING];
  if (watch === undefined) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      // A callback may unwatch another while the abort is delivered: that one is not called.
      for (const callback of callbacks) callback();
      callbacks.clear();
      watched[WAITING] = undefined;
    };
    watch = {callbacks, listener};
    watched[WAITING] = watch;
    signal.addEventListener('abort', listener, {once: true});
  }
  watch.callbacks.add(onAbort);
}

/**
 * Stops watching; a callback not watched is ignored. The last watcher to leave takes the listener
 * off: a signal from `AbortSignal.any` is kept alive while it has listeners and its sources live,
 * and a cycle's signal combines the scheduler's, which lives as long as the leadership.
 */
export function unwatchAbort(signal: AbortSignal, onAbort: () => void): void {
  const watched = signal as Watched;
  const watch = watched[WAITING];
  if (watch === undefined) return;
  watch.callbacks.delete(onAbort);
  if (watch.callbacks.size === 0) {
    signal.removeEventListener('abort', watch.listener);
    watched[WAITING] = undefined;
  }
}
