/**
 * One abort listener per signal for the many short waits of the AWS calls. A source's calls
 * share its signal; each call waited on it two or three times (the retry token, the socket, the
 * answer), and Node's `addEventListener` / `removeEventListener` cost a listener record, a map
 * entry and an options check each time (~1 KB and a few µs per call, all garbage by the answer).
 * Here the first wait on a signal adds the one listener; later waits are an entry in a Set.
 */

/** Callbacks waiting on each signal; gone with the signal. */
const waiting = new WeakMap<AbortSignal, Set<() => void>>();

/** Calls `onAbort` once when `signal` aborts, until unwatched; at once when it has aborted already. */
export function watchAbort(signal: AbortSignal, onAbort: () => void): void {
  if (signal.aborted) {
    onAbort();
    return;
  }
  let callbacks = waiting.get(signal);
  if (callbacks === undefined) {
    const set = new Set<() => void>();
    callbacks = set;
    waiting.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        for (const callback of set) callback();
        set.clear();
      },
      {once: true},
    );
  }
  callbacks.add(onAbort);
}

/** Stops watching; a callback not watched is ignored. */
export function unwatchAbort(signal: AbortSignal, onAbort: () => void): void {
  waiting.get(signal)?.delete(onAbort);
}
