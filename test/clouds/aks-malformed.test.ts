/**
 * Malformed is not empty, on ARM: the real Azure SDK clients, through the fault proxy, in
 * front of the ARM fake. A subscriptions or managedClusters page without a `value` list
 * fails its source (the SDK alone reads it as an empty page); a bad state is malformed.
 */
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {ArmWorld} from '../fakes/arm-world.ts';
import {answer, mutateJson, when, type FaultProxy, type ProxyFault} from '../fakes/faults.ts';
import {resultOf, runThroughProxy, startProxiedArm, SUB_A, TENANT, type ProxiedArm} from './aks-helpers.ts';

let armp: ProxiedArm;
let proxy: FaultProxy;

beforeAll(async () => {
  const world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  for (const name of ['a1', 'a2', 'a3']) world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name});
  armp = await startProxiedArm(world);
  ({proxy} = armp);
});
afterAll(() => armp.close());
beforeEach(() => {
  proxy.fault = undefined;
});

const run = () => runThroughProxy(armp);

const shapes: [string, ProxyFault][] = [
  ['{}', answer(200, '{}')],
  ['[]', answer(200, '[]')],
  ['an empty body', answer(200, '')],
  ['{"value":null}', answer(200, '{"value":null}')],
  ['{"value":"x"}', answer(200, '{"value":"x"}')],
  ['a 204', {kind: 'answer', status: 204, body: ''}],
];

describe('ARM list pages of the wrong shape', () => {
  for (const page of ['first', 'later'] as const) {
    for (const [label, fault] of shapes) {
      it(`managedClusters ${label} on the ${page} page fails the subscription's source as invalid_response`, async () => {
        proxy.fault = when({operation: 'managedClusters.list', page}, fault);
        const result = resultOf(await run(), `aks:${SUB_A}`);
        expect(result).toMatchObject({ok: false, clusters: [], error: {reason: 'invalid_response'}});
      });
    }
  }

  for (const [label, fault] of shapes) {
    it(`a subscriptions list ${label} fails the source covering every subscription`, async () => {
      proxy.fault = when({operation: 'subscriptions.list'}, fault);
      const results = await run();
      expect(results).toEqual([expect.objectContaining({ok: false, error: expect.objectContaining({reason: 'invalid_response'})})]);
    });
  }

  // The subscriptions list is read as ARM's JSON too: a record it cannot judge fails the listing, never drops a subscription.
  const subscriptionFields: [string, Record<string, unknown>][] = [
    ['subscriptionId a number', {subscriptionId: 42}],
    ['state null', {state: null}],
    ['state an object', {state: {code: 'Enabled'}}],
    ['tenantId a number', {tenantId: 7}],
  ];
  for (const [label, patch] of subscriptionFields) {
    it(`a subscriptions record with ${label} fails the source covering every subscription`, async () => {
      proxy.fault = when({operation: 'subscriptions.list'}, mutateJson((body) => {
        const [first, ...rest] = body['value'] as Record<string, unknown>[];
        return {...body, value: [{...first, ...patch}, ...rest]};
      }));
      const results = await run();
      expect(results).toEqual([expect.objectContaining({ok: false, clusters: [], error: expect.objectContaining({reason: 'invalid_response', code: 'InvalidResponse'})})]);
    });
  }
});

// The managed clusters list is parsed once, by discovery itself (src/clouds/azure/arm-list.ts): every
// way a page can be unusable must still fail the source, never read as fewer clusters.
const pages: [string, ProxyFault][] = [
  ['an item that is a number', mutateJson((body) => ({...body, value: [1, ...(body['value'] as unknown[])]}))],
  ['an item that is null', mutateJson((body) => ({...body, value: [...(body['value'] as unknown[]), null]}))],
  ['an item that is an array', mutateJson((body) => ({...body, value: [[], ...(body['value'] as unknown[])]}))],
  ['a body cut off mid-JSON (status 200)', answer(200, `{"value":[{"id":"/subscriptions/${SUB_A}/resourceGroups/rg-a/providers/Microsoft.ContainerService/managedClusters/a1","name":"a1"`)],
  ['a nextLink that is a number', mutateJson((body) => ({...body, nextLink: 5}))],
  ['a body that is JSON null', answer(200, 'null')],
];

describe('managed cluster pages that cannot be read', () => {
  for (const page of ['first', 'later'] as const) {
    for (const [label, fault] of pages) {
      it(`${label} on the ${page} page fails the subscription's source as invalid_response, listing nothing`, async () => {
        proxy.fault = when({operation: 'managedClusters.list', page}, fault);
        const result = resultOf(await run(), `aks:${SUB_A}`);
        expect(result).toMatchObject({ok: false, clusters: [], malformed: [], error: {reason: 'invalid_response', code: 'InvalidResponse', operation: 'ManagedClusters.List'}});
      });
    }
  }

  it('a nextLink that comes back again fails the source instead of paging forever', async () => {
    // The first page links to offset 2; the later page links there again.
    const token = Buffer.from(JSON.stringify({o: 2}), 'utf8').toString('base64url');
    const again = `${proxy.url}/subscriptions/${SUB_A}/providers/Microsoft.ContainerService/managedClusters?api-version=2026-04-01&$skipToken=${token}`;
    proxy.fault = when({operation: 'managedClusters.list', page: 'later'}, mutateJson((body) => ({...body, nextLink: again})));
    const result = resultOf(await run(), `aks:${SUB_A}`);
    expect(result).toMatchObject({ok: false, clusters: [], error: {reason: 'invalid_response', message: expect.stringContaining('nextLink it had already returned')}});
  });

  it("an error answer carries ARM's code and message, as the SDK's pager did", async () => {
    proxy.fault = when({operation: 'managedClusters.list', page: 'later'}, answer(403, '{"error":{"code":"AuthorizationFailed","message":"no read on managedClusters"}}'));
    const result = resultOf(await run(), `aks:${SUB_A}`);
    expect(result).toMatchObject({ok: false, clusters: [], error: {reason: 'access_denied', code: 'AuthorizationFailed', message: 'no read on managedClusters'}});
  });
});

describe('managed cluster fields of the wrong JSON type', () => {
  const fields: [string, (cluster: Record<string, unknown>) => Record<string, unknown>, RegExp][] = [
    ['tags a string', (c) => ({...c, tags: 'env=prod'}), /tags is a string, not an object/],
    ['tags an array', (c) => ({...c, tags: [['env', 'prod']]}), /tags is an array/],
    ['properties a string', (c) => ({...c, properties: 'Succeeded'}), /properties is a string/],
    ['powerState a string', (c) => ({...c, properties: {...(c['properties'] as object), powerState: 'Running'}}), /properties\.powerState is a string/],
    ['aadProfile a number', (c) => ({...c, properties: {...(c['properties'] as object), aadProfile: 1}}), /properties\.aadProfile is a number/],
    ['enableAzureRBAC a string', (c) => ({...c, properties: {...(c['properties'] as object), aadProfile: {managed: true, enableAzureRBAC: 'true'}}}), /enableAzureRBAC is a string, not a boolean/],
    ['fqdn a number', (c) => ({...c, properties: {...(c['properties'] as object), fqdn: 42}}), /properties\.fqdn is a number, not a string/],
    ['disableLocalAccounts a string', (c) => ({...c, properties: {...(c['properties'] as object), disableLocalAccounts: 'yes'}}), /disableLocalAccounts is a string, not a boolean/],
    ['eTag an object', (c) => ({...c, eTag: {}}), /eTag is an object, not a string/],
  ];
  for (const [label, edit, reason] of fields) {
    it(`${label} makes that cluster malformed (its entry kept), the rest of the source listed`, async () => {
      proxy.fault = when({operation: 'managedClusters.list', page: 'first'}, mutateJson((body) => {
        const [first, ...rest] = body['value'] as Record<string, unknown>[];
        return {...body, value: [edit(first ?? {}), ...rest]};
      }));
      const result = resultOf(await run(), `aks:${SUB_A}`);
      expect(result.ok).toBe(true);
      expect(result.clusters.map((c) => c.name)).toEqual(['a2', 'a3']);
      expect(result.malformed).toEqual([{name: 'a1', sourceId: `aks:${SUB_A}`, reason: expect.stringMatching(reason)}]);
    });
  }

  it('reads null for an optional field as absent, as ARM sends it', async () => {
    proxy.fault = when({operation: 'managedClusters.list', page: 'first'}, mutateJson((body) => {
      const [first, ...rest] = body['value'] as Record<string, unknown>[];
      return {...body, value: [{...first, tags: null, properties: {...(first?.['properties'] as object), privateFQDN: null, aadProfile: null}}, ...rest]};
    }));
    const result = resultOf(await run(), `aks:${SUB_A}`);
    expect(result.malformed).toEqual([]);
    expect(result.clusters.find((c) => c.name === 'a1')).toMatchObject({tags: {}, authMode: 'LocalAccounts', endpoint: expect.stringMatching(/^https:\/\//)});
  });
});

describe('managed cluster states of the wrong shape', () => {
  const states: [string, Record<string, unknown>][] = [
    ['provisioningState lower case', {provisioningState: 'succeeded'}],
    ['provisioningState an object', {provisioningState: {x: 1}}],
    ['powerState code with a space', {powerState: {code: 'Running '}}],
    ['powerState code a number', {powerState: {code: 5}}],
  ];
  for (const [label, patch] of states) {
    it(`${label} makes the cluster malformed, not gone`, async () => {
      proxy.fault = when({operation: 'managedClusters.list', page: 'first'}, mutateJson((body) => {
        const [first, ...rest] = body['value'] as Record<string, unknown>[];
        const properties = {...(first?.['properties'] as object), ...patch};
        return {...body, value: [{...first, properties}, ...rest]};
      }));
      const result = resultOf(await run(), `aks:${SUB_A}`);
      expect(result.ok).toBe(true);
      expect(result.clusters.map((c) => c.name)).toEqual(['a2', 'a3']);
      expect(result.malformed).toEqual([expect.objectContaining({name: 'a1', reason: expect.stringContaining('state')})]);
    });
  }
});

describe('clusters whose user kubeconfig cannot be used', () => {
  it('registers the cluster, marked invalid_ca with what ARM returned, when the kubeconfig is unusable', async () => {
    const broken = Buffer.from('apiVersion: v1\nclusters: [').toString('base64');
    proxy.fault = when({operation: 'managedClusters.listClusterUserCredentials', cluster: 'a2'}, answer(200, JSON.stringify({kubeconfigs: [{name: 'clusterUser', value: broken}]})));
    const result = resultOf(await run(), `aks:${SUB_A}`);
    expect(result.malformed).toEqual([]);
    expect(result.clusters.find((c) => c.name === 'a2')).toMatchObject({
      unreachable: {reason: 'invalid_ca', message: expect.stringContaining('kubeconfig')},
      endpoint: expect.stringMatching(/^https:\/\//),
    });
    expect(result.clusters.find((c) => c.name === 'a1')?.unreachable).toBeUndefined();
  });

  it('keeps a never-seen cluster out (entry untouched) when the credential call itself fails', async () => {
    proxy.fault = when({operation: 'managedClusters.listClusterUserCredentials', cluster: 'a2'}, answer(500, '{"error":{"code":"InternalServerError","message":"boom"}}'));
    const result = resultOf(await run(), `aks:${SUB_A}`);
    expect(result.malformed).toEqual([expect.objectContaining({name: 'a2'})]);
  });
});
