/**
 * Adversarial: ARM names a resource group without regard to case, and its answers do not always
 * spell a group the same way (the subscription-wide managed clusters list has been seen to give a
 * group in lower case that was created in upper case: Azure/azure-sdk-for-python#31466; a cache or
 * another ARM front end may too). The kube_server name keeps the group's case (Teleport's rule), so
 * an answer spelling `rg-a` as `RG-A` gave every cluster of the group a new name: its entry was
 * deleted and another created — readers, kubeconfig contexts and the access proxy lost the name
 * they knew, and lost it again when the spelling came back. The cluster is the same (its identity
 * ignores the group's case): its entry keeps its name and document. `once` on SQLite with the real
 * Azure SDK pipeline talking to the ARM fake through the fault proxy.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {mutateJson, when} from '../fakes/faults.ts';
import {ALL_NAMES, goldenRegistry, once, startHarness, type Harness} from '../reliability/cloud-fault-harness.ts';

let h: Harness;
let filledRegistry: () => Promise<{file: string; text: string}>;

beforeAll(async () => {
  h = await startHarness();
  filledRegistry = await goldenRegistry(h, 'rg-case');
}, 60_000);
afterAll(() => h.close());

const respell = (spelling: string) =>
  when({operation: 'managedClusters.list'}, mutateJson((body) => ({
    ...body,
    value: (body['value'] as Record<string, unknown>[]).map((r) => ({...r, id: String(r['id']).replace(/\/resourcegroups\/rg-a\//i, `/resourceGroups/${spelling}/`)})),
  })));

describe("a managed clusters answer that spells a cluster's resource group in another case", () => {
  it('keeps every entry under its name and unchanged, however often the spelling changes', async () => {
    const {file} = await filledRegistry();
    try {
      for (const spelling of ['RG-A', 'Rg-A', 'rg-a']) {
        h.armProxy.fault = respell(spelling);
        const {code, json} = await once(file);
        expect(code).toBe(0);
        expect(json.clusters.filter((c) => c.action !== 'unchanged').map((c) => [c.name, c.action, c.reason])).toEqual([]);
        expect(json.clusters.map((c) => c.name).sort()).toEqual(ALL_NAMES);
      }
    } finally {
      h.armProxy.fault = undefined;
    }
  }, 90_000);
});
