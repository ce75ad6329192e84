/**
 * One abort listener per signal for the many short waits of the AWS calls. A source's calls
 * share its signal; each call waited on it two or three times (the retry token, the socket, the
 * answer), and Node's `addEventListener` / `removeEventListener` cost a listener record, a map
 * entry and an options check each time (~1 KB and a few µs per call, all garbage by the answer).
 * Here the first wait on a signal adds the one listener; later waits are an entry in a Set.
 */

/** The callbacks waiting on a signal, kept on the signal itself (gone with it; a WeakMap lookup cost more than the Set). */
const WAITING = Symbol('kubeDiscoveryAbortWatchers');
type Watched = AbortSignal & {[WAITING]?: Set<() => void>};

/** Calls `onAbort` once when `signal` aborts, until unwatched; at once when it has aborted already. */
export function watchAbort(signal: AbortSignal, onAbort: () => void): void {
  if (signal.aborted) {
    onAbort();
    return;
  }
  let callbacks = (signal as Watched)[WAITING];
  if (callbacks === undefined) {
    const set = new Set<() => void>();
    callbacks = set;
    (signal as Watched)[WAITING] = set;
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
  (signal as Watched)[WAITING]?.delete(onAbort);
}
