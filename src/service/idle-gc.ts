/**
 * A full garbage collection right after each cycle, while the service idles until the next one.
 *
 * A cycle leaves most of what it allocated behind as garbage in the old generation (with the
 * image's small young generation, `--max-semi-space-size=12`, many objects of ~100 requests in flight outlive two
 * scavenges and are promoted). V8 collects it only when the old generation reaches its limit,
 * which a steady cycle reaches about once — so the mark-compact of the previous cycle's garbage
 * ran inside the next cycle: 50–300 ms of a W5 steady cycle (500 subscriptions, ~77 MB live
 * heap), in some cycles and not others. Collected once the cycle is done, it runs in the idle
 * minutes between cycles and the heap a reader sees between cycles is the live one.
 *
 * V8 offers the call only to a process started with `--expose-gc` (the image and `npm start`
 * are); without it this does nothing and V8 collects as it would anyway.
 */

/** The runtime's full collection, when the process was started with `--expose-gc`. */
export function exposedGc(): (() => void) | undefined {
  const gc: unknown = (globalThis as {gc?: unknown}).gc;
  return typeof gc === 'function' ? () => void (gc as () => unknown)() : undefined;
}

/**
 * A function to call when a cycle is done: it runs `gc` once the current task and its promise
 * continuations are over (never inside the caller's task), and several calls before then collect once.
 */
export function idleCollector(gc: (() => void) | undefined = exposedGc()): () => void {
  if (gc === undefined) return () => undefined;
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    setImmediate(() => {
      pending = false;
      gc();
    });
  };
}
