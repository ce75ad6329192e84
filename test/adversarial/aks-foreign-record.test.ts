/**
 * Adversarial: an ARM managedClusters listing of one subscription whose records are clusters of
 * another subscription — a page that is not the list asked for (a cache or proxy that mixed
 * lists up, a nextLink into another subscription's list). Read as a good listing with a
 * malformed record, it deregistered the subscription's own clusters it no longer showed. It
 * fails the source: nothing is deleted, every entry is kept (stale). Runs `once` and `start` on
 * SQLite with the real Azure SDK pipeline talking to the ARM fake through the fault proxy.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {mutateJson, when} from '../fakes/faults.ts';
import {ALL_NAMES, goldenRegistry, once, start, SUBSCRIPTION, startHarness, type Harness} from '../reliability/cloud-fault-harness.ts';

const AKS = `aks:${SUBSCRIPTION}`;
const OTHER = '00000000-0000-0000-0000-0000000000bb';
const firstPage = {operation: 'managedClusters.list', page: 'first' as const};

let h: Harness;
/** A fresh registry holding every cluster of the clean world: the config file and its text. */
let filledRegistry: () => Promise<{file: string; text: string}>;

beforeAll(async () => {
  h = await startHarness();
  filledRegistry = await goldenRegistry(h, 'foreign');
}, 60_000);
afterAll(() => h.close());

/** The record `r` moved to subscription OTHER (and, with `name`, renamed there). */
const foreign = (r: Record<string, unknown>, name?: string): Record<string, unknown> => {
  const id = String(r['id']).replace(SUBSCRIPTION, OTHER);
  return name === undefined ? {...r, id} : {...r, name, id: id.replace(/\/[^/]+$/, `/${name}`)};
};

const cases: [string, (records: Record<string, unknown>[]) => Record<string, unknown>[]][] = [
  ["a1's record replaced by another subscription's cluster b9", (records) => records.map((r) => (r['name'] === 'a1' ? foreign(r, 'b9') : r))],
  ["every record another subscription's (that subscription's list)", (records) => records.map((r) => foreign(r))],
];

describe("a managedClusters page holding another subscription's clusters", () => {
  for (const [what, edit] of cases) {
    it(`(${what}) fails the source and deregisters nothing`, async () => {
      const {file, text} = await filledRegistry();
      h.armProxy.fault = when(firstPage, mutateJson((body) => ({...body, value: edit(body['value'] as Record<string, unknown>[])})));
      try {
        const {code, json} = await once(file);
        expect(json.clusters.filter((c) => c.action === 'delete')).toEqual([]);
        expect(code).toBe(1);
        expect(json.sources.find((s) => s.id === AKS)?.error?.reason).toBe('invalid_response');

        const service = await start(file, text);
        try {
          expect((await service.servers()).map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
          expect((await service.status()).sources.find((s) => s.id === AKS)).toMatchObject({ok: false, last_error: {reason: 'invalid_response'}});
        } finally {
          await service.stop();
        }
      } finally {
        h.armProxy.fault = undefined;
      }
    }, 90_000);
  }
});

describe('a managedClusters nextLink into another list on the same host', () => {
  // A 200 `{"value":[]}` of the ARM fake: read as the list's last page, the clusters of the real
  // next page looked gone.
  const elsewhere: [string, string][] = [["the subscription's role assignments", `/subscriptions/${SUBSCRIPTION}/providers/Microsoft.Authorization/roleAssignments`]];
  for (const [what, path] of elsewhere) {
    it(`(${what}) fails the source and deregisters nothing`, async () => {
      const {file} = await filledRegistry();
      h.armProxy.fault = when(firstPage, mutateJson((body) => {
        const link = new URL(String(body['nextLink']));
        return {...body, nextLink: `${link.origin}${path}?api-version=2022-04-01`};
      }));
      try {
        const {code, json} = await once(file);
        expect(json.clusters.filter((c) => c.action === 'delete')).toEqual([]);
        expect(code).toBe(1);
        expect(json.sources.find((s) => s.id === AKS)?.error?.reason).toBe('invalid_response');
      } finally {
        h.armProxy.fault = undefined;
      }
    }, 90_000);
  }
});
