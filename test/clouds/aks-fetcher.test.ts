// The AKS fetcher against the fake ARM, through the real @azure/arm-containerservice client:
// paging, conversion, region and status filters, endpoint and CA from the user kubeconfig.
import {getEventListeners} from 'node:events';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {AKS_SERVER_ID} from '../../src/credentials/aks-token.ts';
import type {DiscoveredCluster} from '../../src/core/types.ts';
import {aksOidcIssuer} from '../fakes/arm-json.ts';
import {ARM_API_VERSIONS, FAKE_ARM_TOKEN, startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld, type ManagedClusterInput} from '../fakes/arm-world.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {answer, armClassifier, startFaultProxy, when} from '../fakes/faults.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';
import {SUB_A, SUB_B, TENANT, fakeSources, matcher, resultOf, runPlan} from './aks-helpers.ts';

let world: ArmWorld;
let arm: FakeArm;
let kube: FakeKubeApi;

beforeAll(async () => {
  kube = await startFakeKubeApi({authenticate: () => undefined});
});

afterAll(async () => {
  await arm.close();
  await kube.close();
});

beforeEach(async () => {
  await arm?.close();
  world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  world.addSubscription({subscriptionId: SUB_B, tenantId: TENANT});
  arm = await startFakeArm({world});
});

function addRunning(name: string, resourceGroup = 'rg-a', extra: Partial<ManagedClusterInput> = {}) {
  return world.addCluster({subscriptionId: SUB_A, resourceGroup, name, server: kube.url, caPem: kube.caPem, ...extra});
}

const names = (clusters: readonly DiscoveredCluster[]) => clusters.map((c) => c.name);

describe('listing', () => {
  it('reads every page of the subscription-wide list, with the bearer token and api-version the fake checks', async () => {
    for (const n of ['c1', 'c2', 'c3', 'c4', 'c5']) addRunning(n, n === 'c5' ? 'rg-b' : 'rg-a');
    const {sources, credential} = fakeSources(arm);

    const result = resultOf(await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})])), `aks:${SUB_A}`);

    expect(result.ok).toBe(true);
    expect(names(result.clusters)).toEqual(['c1', 'c2', 'c3', 'c4', 'c5']);
    expect(arm.stats.count({operation: 'managedClusters.list', status: 200})).toBe(3);
    expect(arm.stats.count({status: 401})).toBe(0);
    expect(arm.stats.apiVersionsSeen()).toEqual([...ARM_API_VERSIONS.containerService]);
    expect(credential.scopesRequested.every(([s]) => s === 'https://management.azure.com/.default')).toBe(true);
    expect(result.clusters[4]).toMatchObject({cloud: 'Azure', type: 'aks', account: SUB_A, resourceGroup: 'rg-b', tenantId: TENANT, region: 'eastus'});
  });

  it('leaves no abort listener on the cycle signal once its sources end, however many clusters they described', async () => {
    for (const n of ['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9', 'c10', 'c11', 'c12']) addRunning(n);
    const {sources} = fakeSources(arm);
    const cycle = new AbortController();
    const planned = await sources.plan([matcher(arm, {subscriptions: [SUB_A, SUB_B]})]);
    const results = await Promise.all(planned.fetchers.map((f) => f.fetch(cycle.signal)));
    expect(results.map((r) => [r.ok, r.clusters.length])).toEqual([[true, 12], [true, 0]]);
    expect(arm.stats.count({operation: 'managedClusters.listClusterUserCredentials', status: 200})).toBe(12);
    expect(getEventListeners(cycle.signal, 'abort')).toHaveLength(0);
  });

  it('is refused by ARM when the credential hands out another token (the fake really checks it)', async () => {
    addRunning('c1');
    const {sources} = fakeSources(arm, {credential: {getToken: () => Promise.resolve({token: 'not-' + FAKE_ARM_TOKEN, expiresOnTimestamp: Date.now() + 3_600_000})}});
    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));
    expect(result).toMatchObject({ok: false, error: {reason: 'access_denied', code: 'InvalidAuthenticationToken'}});
  });

  it('lists per resource group to the last page when resource groups are named', async () => {
    for (const n of ['a1', 'a2', 'a3']) addRunning(n, 'rg-a');
    addRunning('b1', 'rg-b');
    addRunning('other', 'rg-other');
    const {sources} = fakeSources(arm);

    const results = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A], resource_groups: ['rg-a', 'RG-B']})]));

    expect(results.map((r) => [r.source.id, r.source.resourceGroup, r.ok, names(r.clusters)])).toEqual([
      [`aks:${SUB_A}:rg-a`, 'rg-a', true, ['a1', 'a2', 'a3']],
      [`aks:${SUB_A}:RG-B`, 'RG-B', true, ['b1']],
    ]);
    expect(arm.stats.count({operation: 'managedClusters.listByResourceGroup', resourceGroup: 'rg-a', status: 200})).toBe(2);
    expect(arm.stats.count({operation: 'managedClusters.list'})).toBe(0);
  });

  it('treats a resource group that does not exist as empty, so its clusters can be deregistered', async () => {
    addRunning('a1', 'rg-a');
    const {sources} = fakeSources(arm);
    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A], resource_groups: ['rg-gone']})]));
    expect(result).toMatchObject({ok: true, clusters: [], skippedReason: 'resource group rg-gone not found'});
  });
});

describe('conversion and filters', () => {
  it('normalises locations and returns only clusters in the listed regions', async () => {
    addRunning('west', 'rg-a', {location: 'westeurope'});
    addRunning('east', 'rg-a', {location: 'East US', fqdn: 'east.hcp.eastus.azmk8s.io'});
    addRunning('east2', 'rg-a', {location: 'eastus'});
    const {sources} = fakeSources(arm);

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A], regions: ['eastus']})]));

    expect(result?.clusters.map((c) => [c.name, c.region])).toEqual([['east', 'eastus'], ['east2', 'eastus']]);
    // Clusters outside the filter cost no credential call either.
    expect(arm.stats.count({operation: 'managedClusters.listClusterUserCredentials'})).toBe(2);
  });

  it('keeps running clusters whatever their last operation did, and reports stopped or creating ones as not kept, without asking for credentials', async () => {
    addRunning('running');
    addRunning('stopped', 'rg-a', {powerState: 'Stopped'});
    addRunning('failed', 'rg-a', {provisioningState: 'Failed'});
    addRunning('upgrading', 'rg-a', {provisioningState: 'Upgrading'});
    addRunning('creating', 'rg-a', {provisioningState: 'Creating'});
    const {sources} = fakeSources(arm);

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));

    expect(result?.clusters.map((c) => [c.name, c.status, c.statusOk, c.endpoint !== undefined])).toEqual([
      ['creating', 'Creating/Running', false, false],
      ['failed', 'Failed/Running', true, true],
      ['running', 'Succeeded/Running', true, true],
      ['stopped', 'Succeeded/Stopped', false, false],
      ['upgrading', 'Upgrading/Running', true, true],
    ]);
    expect(arm.stats.count({operation: 'managedClusters.listClusterUserCredentials'})).toBe(3);
  });

  it('skips a record without a location as malformed and keeps the rest', async () => {
    addRunning('good');
    addRunning('broken', 'rg-a', {location: '', fqdn: 'broken.hcp.azmk8s.io'});
    const {sources} = fakeSources(arm);

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));

    expect(result?.ok).toBe(true);
    expect(names(result?.clusters ?? [])).toEqual(['good']);
    expect(result?.malformed).toEqual([{name: 'broken', sourceId: `aks:${SUB_A}`, reason: 'location is missing'}]);
  });
});

describe('endpoint, CA and access', () => {
  it('takes server and CA from the user kubeconfig; Entra ID clusters get the AKS server id, others the local account', async () => {
    addRunning('aad', 'rg-a', {aadProfile: {managed: true, enableAzureRBAC: true}, disableLocalAccounts: true});
    addRunning('local');
    const {sources} = fakeSources(arm);

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));

    const ca = Buffer.from(kube.caPem).toString('base64');
    expect(result?.clusters).toMatchObject([
      {name: 'aad', endpoint: kube.url, caData: ca, access: {kind: 'aks-entra', serverId: AKS_SERVER_ID}, authMode: 'EntraID+AzureRBAC'},
      {name: 'local', endpoint: kube.url, caData: ca, access: {kind: 'aks-local'}, authMode: 'LocalAccounts'},
    ]);
    const token = world.getCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'local'})?.localAccountToken ?? '';
    // The static token stays in the credential module's memory, never in what discovery returns.
    expect(JSON.stringify(result)).not.toContain(token);
    expect(await sources.localAccounts.token({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'local'})).toBe(token);
  });

  it('records the issuer of a cluster\'s service-account tokens when its OIDC issuer is enabled, and none otherwise', async () => {
    const withIssuer = addRunning('issuer', 'rg-a', {oidcIssuer: true});
    addRunning('plain');
    const {sources} = fakeSources(arm);

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));

    const byName = new Map(result?.clusters.map((c) => [c.name, c]));
    expect(byName.get('issuer')?.oidcIssuer).toBe(aksOidcIssuer(withIssuer, TENANT));
    expect(byName.get('issuer')?.oidcIssuer).toMatch(/^https:\/\/.*\.oic\.prod-aks\.azure\.com\/.*\/$/);
    expect(byName.get('plain')).toBeDefined();
    expect(byName.get('plain')?.oidcIssuer).toBeUndefined();
  });

  it('never publishes a cluster without its endpoint because its credential call failed', async () => {
    addRunning('ok');
    addRunning('broken');
    const {sources} = fakeSources(arm);
    const m = [matcher(arm, {subscriptions: [SUB_A]})];
    const failBroken = (): void =>
      arm.setFault((c) => (c.operation === 'managedClusters.listClusterUserCredentials' && c.clusterName === 'broken' ? {status: 403} : undefined));

    // Never seen before: the record is reported unusable (which keeps a registered entry as it is).
    failBroken();
    const [first] = await runPlan(await sources.plan(m));
    expect(first?.ok).toBe(true);
    expect(first?.clusters.map((c) => [c.name, c.endpoint])).toEqual([['ok', kube.url]]);
    expect(first?.malformed).toMatchObject([{name: 'broken', reason: expect.stringContaining('user credential unavailable')}]);

    // Seen before: the last credential is used even after the record changed.
    arm.setFault(undefined);
    await runPlan(await sources.plan(m));
    world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'broken'}, {fqdn: 'broken-moved.hcp.eastus.azmk8s.io'});
    failBroken();
    const [again] = await runPlan(await sources.plan(m));
    expect(again?.clusters.map((c) => [c.name, c.endpoint])).toEqual([['broken', kube.url], ['ok', kube.url]]);
  });

  it('asks ARM for a kubeconfig again only when the cluster record changed', async () => {
    addRunning('c1');
    addRunning('c2');
    const {sources} = fakeSources(arm);
    const m = [matcher(arm, {subscriptions: [SUB_A]})];
    const count = () => arm.stats.count({operation: 'managedClusters.listClusterUserCredentials'});

    await runPlan(await sources.plan(m));
    expect(count()).toBe(2);
    await runPlan(await sources.plan(m));
    expect(count()).toBe(2);

    world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'c2'}, {fqdn: 'c2-moved.hcp.eastus.azmk8s.io'});
    const [result] = await runPlan(await sources.plan(m));
    expect(count()).toBe(3);
    expect(result?.clusters.every((c) => c.endpoint === kube.url)).toBe(true);
  });

  it('hands on the same cluster object while its record is unchanged, a new one once it changes, and remembers only good listings', async () => {
    addRunning('c1');
    addRunning('c2');
    const {sources} = fakeSources(arm);
    const m = [matcher(arm, {subscriptions: [SUB_A]})];
    const byName = (r: Awaited<ReturnType<typeof runPlan>>) => new Map((r[0]?.clusters ?? []).map((c) => [c.name, c]));

    const first = byName(await runPlan(await sources.plan(m)));
    const second = byName(await runPlan(await sources.plan(m)));
    expect(second.get('c1')).toBe(first.get('c1'));
    expect(second.get('c2')).toBe(first.get('c2'));

    world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'c2'}, {tags: {team: 'b'}});
    const third = byName(await runPlan(await sources.plan(m)));
    expect(third.get('c1')).toBe(first.get('c1'));
    expect(third.get('c2')).not.toBe(first.get('c2'));
    expect(third.get('c2')?.tags).toEqual({team: 'b'});

    // A failed listing changes nothing: the next good one is compared with the last good one.
    const proxy = await startFaultProxy({upstream: arm.url, upstreamCa: arm.caPem, tls: await sharedServerTls(), classify: armClassifier()});
    try {
      const {sources: proxied} = fakeSources(arm);
      const pm = [matcher(arm, {subscriptions: [SUB_A], resource_manager_endpoint: proxy.url})];
      const good = byName(await runPlan(await proxied.plan(pm)));
      proxy.fault = when({operation: 'managedClusters.list'}, answer(200, '{"value":"x"}'));
      expect((await runPlan(await proxied.plan(pm)))[0]).toMatchObject({ok: false, clusters: []});
      proxy.fault = undefined;
      const after = byName(await runPlan(await proxied.plan(pm)));
      expect(after.get('c1')).toBe(good.get('c1'));
    } finally {
      await proxy.close();
    }
  });

  it('reports a cluster with local accounts disabled and no Entra ID without asking ARM for a credential it refuses', async () => {
    addRunning('locked', 'rg-a', {disableLocalAccounts: true, fqdn: 'locked.hcp.eastus.azmk8s.io'});
    const {sources} = fakeSources(arm);

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));

    expect(result?.clusters).toMatchObject([{name: 'locked', statusOk: true, endpoint: 'https://locked.hcp.eastus.azmk8s.io:443', access: {kind: 'aks-local'}}]);
    expect(arm.stats.count({operation: 'managedClusters.listClusterUserCredentials'})).toBe(0);
    await expect(sources.localAccounts.token({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'locked'}))
      .rejects.toMatchObject({name: 'AksLocalAccountsDisabledError', message: expect.stringContaining('local accounts are disabled and the cluster has no Entra ID integration: enable AKS-managed Entra ID') as unknown});
  });
});
