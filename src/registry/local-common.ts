/** Helpers shared by the local (memory, sqlite) backends: key order matching etcd's byte order, option checks. */

/** Maps a UTF-16 code unit so that plain comparison orders strings by code point (= UTF-8 byte order). */
function codePointRank(unit: number): number {
  if (unit < 0xd800) return unit;
  // Surrogates (supplementary code points) sort after the rest of the BMP in UTF-8.
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}

/** Compares keys by code point, the order SQLite's BINARY collation and etcd (bytes) use. */
export function compareKeys(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

/**
 * The smallest string greater than every string that starts with `prefix`, or undefined when
 * no such bound exists (empty prefix, or only U+10FFFF characters). Keys k with
 * `prefix <= k < prefixEnd(prefix)` are exactly the keys starting with `prefix`.
 */
export function prefixEnd(prefix: string): string | undefined {
  const points = Array.from(prefix, (c) => c.codePointAt(0) ?? 0);
  while (points.length > 0) {
    const last = points.pop() ?? 0;
    if (last < 0x10ffff) {
      // Skip the surrogate range: those are not characters.
      points.push(last === 0xd7ff ? 0xe000 : last + 1);
      return String.fromCodePoint(...points);
    }
  }
  return undefined;
}

/** Default period of the background purge of expired leases. */
export const DEFAULT_PURGE_INTERVAL_MS = 1000;

/** Rejects TTLs a lease cannot have. */
export function checkTtl(ttlMs: number): void {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new RangeError(`Expected lease ttlMs to be a finite number > 0, got ${ttlMs}`);
  }
}

/** Validates the purge interval option, defaulting to DEFAULT_PURGE_INTERVAL_MS. */
export function checkInterval(ms: number | undefined): number {
  if (ms === undefined) return DEFAULT_PURGE_INTERVAL_MS;
  if (!Number.isFinite(ms) || ms <= 0) throw new RangeError(`Expected purgeIntervalMs to be a finite number > 0, got ${ms}`);
  return ms;
}
