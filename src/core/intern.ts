/**
 * One shared copy of short strings that repeat across thousands of entries (EKS statuses,
 * authentication modes, Kubernetes versions, lease ids, expiry times): every parse of a cloud
 * answer or a registry row makes a fresh copy of each, ~30–50 bytes apiece per entry.
 */

/** A bounded table of shared strings: past `limit` distinct values it starts over rather than grow. */
export class StringTable {
  readonly #limit: number;
  #table = new Map<string, string>();

  constructor(limit = 1024) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`Expected limit to be an integer >= 1, got ${limit}`);
    this.#limit = limit;
  }

  /** The shared copy of `value` (the first one seen). */
  intern(value: string): string {
    const held = this.#table.get(value);
    if (held !== undefined) return held;
    // Many distinct values mean the values are not repetitive: start over instead of holding them all.
    if (this.#table.size >= this.#limit) this.#table = new Map();
    this.#table.set(value, value);
    return value;
  }
}

const shared = new StringTable();

/** The process-wide shared copy of a short, repetitive string (statuses, modes, versions). */
export function intern<T extends string | undefined>(value: T): T {
  return (value === undefined ? value : shared.intern(value)) as T;
}

/**
 * A copy of `value` in one piece. A string built with `+` or a template literal is a tree of its
 * parts (a 32-byte node per join); one kept for long, once per source or cluster, is smaller flat.
 */
export function flatString(value: string): string {
  return JSON.parse(JSON.stringify(value)) as string;
}
