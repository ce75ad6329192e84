/**
 * Typo checks of AWS region names: a region the partition does not list is kept (a region
 * launched after this release must still work) but named in a warning with the closest known
 * region, so `us-wset-1` does not surface only as "no credentials" much later.
 */
import {partitionOfRegion, regionsOfPartition} from '../clouds/aws/regions.ts';

/** undefined for a known region (or `*`), else the warning text, with a "did you mean" when one is close. */
export function unknownRegionHint(region: string): string | undefined {
  if (region === '*') return undefined;
  const partition = partitionOfRegion(region);
  const known = regionsOfPartition(partition);
  if (known.includes(region)) return undefined;
  const closest = closestRegion(region, known);
  return `${JSON.stringify(region)} is not a known region of partition ${partition}${closest ? `; did you mean ${JSON.stringify(closest)}?` : ''}`;
}

/** The known region at the smallest edit distance, when that distance is small (at most 3). */
function closestRegion(region: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 4;
  for (const candidate of known) {
    const d = distance(region, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Damerau-Levenshtein (optimal string alignment): a swap of two letters (`wset`) counts as one edit. */
function distance(a: string, b: string): number {
  const rows = Array.from({length: a.length + 1}, (_, i) => Array.from({length: b.length + 1}, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, at(i - 2, j - 2) + 1);
      (rows[i] as number[])[j] = d;
    }
  }
  return at(a.length, b.length);
}
