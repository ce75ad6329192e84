/**
 * The order `a.localeCompare(b)` gives, from one collator made once. `localeCompare` without
 * arguments is specified as comparing with a new `Intl.Collator()` (ECMA-402), and V8 pays much
 * of that per call: sorting a first cycle's 2,000 plan items and its sources' clusters with it
 * cost ~10–20 ms of a cold process; the shared collator's `compare` gives the same order.
 */
const collator = new Intl.Collator();

/** Compares two strings exactly as `a.localeCompare(b)` does (the process's default locale). */
export const compareText: (a: string, b: string) => number = collator.compare;
