/** An Entra ID token request that never answers fails the Azure sources as `timeout` instead of stalling the cycle. */
import {afterAll, beforeAll, expect, it} from 'vitest';
import type {TokenCredential} from '../../src/credentials/aks-credential.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {fakeSources, matcher, runPlan, SUB_A, TENANT} from './aks-helpers.ts';

let arm: FakeArm;
beforeAll(async () => {
  const world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a1'});
  arm = await startFakeArm({world});
});
afterAll(() => arm.close());

it('fails the source as timeout when the identity never hands out a token', async () => {
  // Like IMDS or the token endpoint holding the connection open.
  const hanging: TokenCredential = {getToken: () => new Promise(() => undefined)};
  const {sources} = fakeSources(arm, {credential: undefined, credentialFactory: () => hanging, policyOptions: {requestTimeoutMs: 300}});
  const results = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));
  expect(results).toEqual([expect.objectContaining({ok: false, error: expect.objectContaining({reason: 'timeout'})})]);
});
