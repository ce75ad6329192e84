// AKS tokens for the probe: Entra ID tokens on the shared cache (half-life renewal, one
// in-flight mint, stale-while-failing, no wedge), and local-account tokens that discovery
// recorded from listClusterUserCredential, accepted by a Kubernetes API.
import type {AccessToken, GetTokenOptions, TokenCredential} from '@azure/core-auth';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {AKS_SERVER_ID, aksTokenSource, type AksKubeAccess} from '../../src/credentials/aks-token.ts';
import {SUB_A, TENANT, fakeSources, matcher, runPlan} from '../clouds/aks-helpers.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {httpsRequest} from '../fakes/http-client.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';

const HOUR = 3_600_000;

/** A credential that counts calls; tokens live `ttlMs` on the fake clock; `next` decides each answer. */
function countingCredential(clock: FakeClock, ttlMs = HOUR) {
  const calls: {scopes: string[]; tenantId?: string}[] = [];
  let behaviour: 'ok' | 'fail' | 'wait' = 'ok';
  const waiting: (() => void)[] = [];
  const credential: TokenCredential = {
    async getToken(scopes: string | string[], options?: GetTokenOptions): Promise<AccessToken> {
      calls.push({scopes: [scopes].flat(), ...(options?.tenantId ? {tenantId: options.tenantId} : {})});
      const n = calls.length;
      if (behaviour === 'fail') throw new Error('ManagedIdentityCredential: IMDS unreachable\n  at somewhere');
      if (behaviour === 'wait') await new Promise<void>((resolve) => waiting.push(resolve));
      return {token: `entra-token-${n}`, expiresOnTimestamp: clock.now() + ttlMs};
    },
  };
  return {
    credential,
    calls,
    set(next: typeof behaviour) {
      behaviour = next;
    },
    release() {
      for (const r of waiting.splice(0)) r();
    },
  };
}

const entra = (serverId = AKS_SERVER_ID): AksKubeAccess => ({kind: 'aks', server_id: serverId, subscription_id: SUB_A, resource_group: 'rg-a', resource_name: 'c1'});

describe('Entra ID tokens', () => {
  it('asks for <server-id>/.default once, serves it from memory, and renews at half-life', async () => {
    const clock = new FakeClock();
    const cred = countingCredential(clock);
    const token = aksTokenSource({credential: cred.credential, clock});

    expect(await token(entra())).toBe('entra-token-1');
    expect(await token({...entra(), resource_name: 'another-cluster'})).toBe('entra-token-1');
    expect(cred.calls).toEqual([{scopes: [`${AKS_SERVER_ID}/.default`]}]);

    await clock.advance(HOUR / 2 - 1000);
    expect(await token(entra())).toBe('entra-token-1');
    expect(cred.calls).toHaveLength(1);

    await clock.advance(2000);
    // Past half-life: the caller still gets the valid token while one renewal runs.
    expect(await token(entra())).toBe('entra-token-1');
    await clock.advance(0);
    expect(cred.calls).toHaveLength(2);
    expect(await token(entra())).toBe('entra-token-2');
  });

  it('shares one in-flight mint between concurrent callers', async () => {
    const clock = new FakeClock();
    const cred = countingCredential(clock);
    cred.set('wait');
    const token = aksTokenSource({credential: cred.credential, clock});

    const pending = Promise.all([token(entra()), token(entra()), token(entra())]);
    await clock.advance(0);
    cred.release();

    expect(await pending).toEqual(['entra-token-1', 'entra-token-1', 'entra-token-1']);
    expect(cred.calls).toHaveLength(1);
  });

  it('keeps serving the valid token when a renewal fails, and recovers once the credential works again', async () => {
    const clock = new FakeClock();
    const cred = countingCredential(clock);
    const token = aksTokenSource({credential: cred.credential, clock});
    expect(await token(entra())).toBe('entra-token-1');

    cred.set('fail');
    await clock.advance(HOUR / 2 + 1);
    expect(await token(entra())).toBe('entra-token-1');
    await clock.advance(0);
    expect(cred.calls).toHaveLength(2);

    // The token expires while Entra ID is still unreachable: a one-line error, no stack.
    await clock.advance(HOUR);
    const error = (await token(entra()).then(() => new Error('expected a failure'), (e: unknown) => e)) as Error;
    expect(error).toMatchObject({name: 'EntraTokenError'});
    expect(error.message).toMatch(new RegExp(`^could not get an Entra ID token for ${AKS_SERVER_ID}/\\.default: ManagedIdentityCredential: IMDS unreachable`));
    expect(error.message).not.toContain('\n');

    // No wedge: the next call mints again and succeeds.
    cred.set('ok');
    expect(await token(entra())).toMatch(/^entra-token-\d+$/);
  });

  it('keeps tokens apart per server application and tenant, and asks for the cluster tenant', async () => {
    const clock = new FakeClock();
    const cred = countingCredential(clock);
    const token = aksTokenSource({credential: cred.credential, clock});
    const legacy = '11111111-2222-3333-4444-555555555555';

    await token(entra());
    await token(entra(legacy));
    await token(entra(), {tenantId: TENANT});

    expect(cred.calls).toEqual([
      {scopes: [`${AKS_SERVER_ID}/.default`]},
      {scopes: [`${legacy}/.default`]},
      {scopes: [`${AKS_SERVER_ID}/.default`], tenantId: TENANT},
    ]);
  });
});

describe('local accounts', () => {
  let world: ArmWorld;
  let arm: FakeArm;
  let kube: FakeKubeApi;
  const local: AksKubeAccess = {kind: 'aks', subscription_id: SUB_A, resource_group: 'rg-a', resource_name: 'local-1'};

  beforeAll(async () => {
    world = new ArmWorld();
    kube = await startFakeKubeApi({authenticate: (t) => world.localAccountIdentity(t)});
    world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
    world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'local-1', server: kube.url, caPem: kube.caPem});
    world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'locked', disableLocalAccounts: true});
    arm = await startFakeArm({world});
  });

  afterAll(async () => {
    await arm.close();
    await kube.close();
  });

  async function version(token: string): Promise<number> {
    return (await httpsRequest(`${kube.url}/version`, {ca: kube.caPem, headers: {authorization: `Bearer ${token}`}})).status;
  }

  it('returns the static token discovery got from listClusterUserCredential, which the cluster accepts', async () => {
    const {sources, clock} = fakeSources(arm);
    await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));
    const calls = arm.stats.count({operation: 'managedClusters.listClusterUserCredentials'});
    const token = aksTokenSource({credential: countingCredential(clock).credential, clock, localAccounts: sources.localAccounts});

    expect(await version(await token(local))).toBe(200);
    // Served from what discovery recorded: no extra ARM call.
    expect(arm.stats.count({operation: 'managedClusters.listClusterUserCredentials'})).toBe(calls);
  });

  it('loads the credential from ARM when discovery has not listed the cluster yet (after a restart)', async () => {
    const {sources, clock} = fakeSources(arm);
    await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]);
    const before = arm.stats.count({operation: 'managedClusters.listClusterUserCredentials'});
    const token = aksTokenSource({credential: countingCredential(clock).credential, clock, localAccounts: sources.localAccounts});

    const [t1, t2] = await Promise.all([token(local), token(local)]);
    expect(t1).toBe(t2);
    expect(await version(t1)).toBe(200);
    expect(arm.stats.count({operation: 'managedClusters.listClusterUserCredentials'})).toBe(before + 1);
  });

  it('switches to a rotated token as soon as discovery sees it', async () => {
    const {sources, clock} = fakeSources(arm);
    const m = [matcher(arm, {subscriptions: [SUB_A]})];
    await runPlan(await sources.plan(m));
    const token = aksTokenSource({credential: countingCredential(clock).credential, clock, localAccounts: sources.localAccounts});
    const old = await token(local);

    // A credential reset re-issues the token; the cluster record changes with it.
    world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'local-1', server: kube.url, caPem: kube.caPem, fqdn: 'local-1-reset.hcp.eastus.azmk8s.io'});
    await runPlan(await sources.plan(m));

    const fresh = await token(local);
    expect(fresh).not.toBe(old);
    expect(await version(fresh)).toBe(200);
    expect(await version(old)).toBe(401);
  });

  it('fails with a typed, explanatory error for a cluster with local accounts disabled and no Entra ID', async () => {
    const {sources, clock} = fakeSources(arm);
    await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));
    const token = aksTokenSource({credential: countingCredential(clock).credential, clock, localAccounts: sources.localAccounts});

    await expect(token({...local, resource_name: 'locked'})).rejects.toMatchObject({
      name: 'AksLocalAccountsDisabledError',
      reason: 'local_accounts_disabled',
      message: expect.stringMatching(/^AKS cluster locked \(resource group rg-a\): local accounts are disabled and the cluster has no Entra ID integration: enable AKS-managed Entra ID/) as unknown,
    });
  });
});
