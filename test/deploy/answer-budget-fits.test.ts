// The process-wide budget of cloud answers being read at once (src/core/answer-budget.ts) bounds
// what a hostile or broken endpoint can make the service hold. It only protects the pod if it fits
// in the memory the shipped manifests leave above the service's own peak; otherwise the bound is an
// OOM kill (every heartbeat stops) instead of failed sources.
import {readFileSync} from 'node:fs';
import path from 'node:path';
import {describe, expect, it} from 'vitest';
import {parseAllDocuments} from 'yaml';
import {MAX_ANSWER_BYTES_IN_FLIGHT} from '../../src/core/answer-budget.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** Issue 15's ceiling for the service's peak RSS at 10,000 clusters (README "Sizing" measures under it). */
const PEAK_AT_10000_BYTES = 256 * 1000 * 1000;
const MANIFESTS = ['deploy/kubernetes/base/statefulset.yaml', 'deploy/kubernetes/overlays/kubernetes/deployment.yaml', 'deploy/kubernetes/overlays/ha-etcd/deployment.yaml'];

function bytesOf(quantity: string): number {
  const m = /^(\d+)(Mi|Gi|M|G)$/.exec(quantity);
  if (!m) throw new Error(`unexpected memory quantity ${quantity}`);
  const unit = {Mi: 1024 ** 2, Gi: 1024 ** 3, M: 1000 ** 2, G: 1000 ** 3}[m[2] as 'Mi' | 'Gi' | 'M' | 'G'];
  return Number(m[1]) * unit;
}

/** Every container memory limit a manifest file sets. */
function memoryLimits(file: string): number[] {
  const limits: number[] = [];
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    else if (node && typeof node === 'object') {
      const record = node as Record<string, unknown>;
      const memory = (record['limits'] as Record<string, unknown> | undefined)?.['memory'];
      if (typeof memory === 'string') limits.push(bytesOf(memory));
      Object.values(record).forEach(visit);
    }
  };
  for (const doc of parseAllDocuments(readFileSync(path.join(ROOT, file), 'utf8'))) visit(doc.toJS());
  return limits;
}

describe('the budget of answers being read at once', () => {
  it.each(MANIFESTS)('fits in %s between the peak at 10,000 clusters and the memory limit', (file) => {
    const limits = memoryLimits(file);
    expect(limits.length).toBeGreaterThan(0);
    for (const limit of limits) expect(PEAK_AT_10000_BYTES + MAX_ANSWER_BYTES_IN_FLIGHT).toBeLessThanOrEqual(limit);
  });
});
