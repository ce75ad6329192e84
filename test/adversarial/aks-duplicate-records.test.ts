/**
 * Adversarial: ARM managedClusters pages that list a cluster twice (the same record again) or
 * with `properties: null`. Neither may deregister or rename a cluster that is still there. Runs `once` and `start` on SQLite with the real Azure SDK
 * pipeline talking to the ARM fake through the fault proxy.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {mutateJson, when} from '../fakes/faults.ts';
import {ALL_NAMES, goldenRegistry, once, start, startHarness, type Harness} from '../reliability/cloud-fault-harness.ts';

const firstPage = {operation: 'managedClusters.list', page: 'first' as const};

let h: Harness;
/** A fresh registry holding every cluster of the clean world: the config file and its text. */
let filledRegistry: () => Promise<{file: string; text: string}>;

beforeAll(async () => {
  h = await startHarness();
  filledRegistry = await goldenRegistry(h, 'dup');
}, 60_000);
afterAll(() => h.close());

const a1 = (records: Record<string, unknown>[]): Record<string, unknown> => records.find((r) => r['name'] === 'a1') ?? {};

const cases: [string, (records: Record<string, unknown>[]) => Record<string, unknown>[]][] = [
  ["a1's record twice", (records) => [...records, a1(records)]],
  ["a1's properties null", (records) => records.map((r) => (r['name'] === 'a1' ? {...r, properties: null} : r))],
];

describe('a managedClusters page listing a cluster twice or without properties', () => {
  for (const [what, edit] of cases) {
    it(`(${what}) deregisters and renames nothing`, async () => {
      const {file, text} = await filledRegistry();
      h.armProxy.fault = when(firstPage, mutateJson((body) => ({...body, value: edit(body['value'] as Record<string, unknown>[])})));
      try {
        const {json} = await once(file);
        expect(json.clusters.filter((c) => c.action === 'delete' || c.action === 'create')).toEqual([]);

        const service = await start(file, text);
        try {
          expect((await service.servers()).map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
        } finally {
          await service.stop();
        }
      } finally {
        h.armProxy.fault = undefined;
      }
    }, 90_000);
  }
});
