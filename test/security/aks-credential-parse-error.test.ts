/**
 * Security: a `listClusterUserCredential` answer cut off mid-JSON (a 200 whose body ends early) made
 * the Azure SDK's parse error quote the body — the base64 kubeconfig of the cluster's user, whose
 * local account token is in it — and discovery put that error into the cluster's
 * `target_health.message`: stored in the registry and served by `/v1/kube_servers` and
 * `/v1/watch`, which are not passed through the log's redaction (and base64 kubeconfig text matches
 * none of its patterns anyway). No part of the credential answer may reach a document or a message.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import type {FaultProxy} from '../fakes/faults.ts';
import {resultOf, runThroughProxy, startProxiedArm, SUB_A, TENANT, type ProxiedArm} from '../clouds/aks-helpers.ts';
import {context} from '../discovery/builders.ts';

let armp: ProxiedArm;
let proxy: FaultProxy;
const world = new ArmWorld();

beforeAll(async () => {
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a1'});
  armp = await startProxiedArm(world);
  ({proxy} = armp);
});
afterAll(() => armp.close());

describe('a user credential answer cut off mid-JSON', () => {
  it('leaves no part of the kubeconfig in the cluster document or the source result', async () => {
    const bodies: string[] = [];
    proxy.fault = (req) =>
      req.operation === 'managedClusters.listClusterUserCredentials'
        ? {
            kind: 'mutate',
            rewrite: (body) => {
              bodies.push(body);
              // Cut just after the kubeconfig's value begins: what a parse error quotes of it is all credential.
              const at = body.indexOf('"value"');
              return body.slice(0, at + 200);
            },
          }
        : undefined;
    try {
      const results = await runThroughProxy(armp);
      expect(bodies.length).toBeGreaterThan(0);
      const value = (JSON.parse(bodies[0] as string) as {kubeconfigs: {value: string}[]}).kubeconfigs[0]?.value ?? '';
      expect(value.length).toBeGreaterThan(100);
      const kubeconfig = Buffer.from(value, 'base64').toString('utf8');
      const token = world.listClusters(SUB_A).find((c) => c.name === 'a1')?.localAccountToken ?? '';

      const printed = JSON.stringify([results, [...evaluate(results, context('g1')).candidates.values()].map((c) => c.server)]);
      // No 24-character run of the kubeconfig's base64, of the kubeconfig itself, or the token.
      for (let i = 0; i + 24 <= 200; i += 8) expect(printed).not.toContain(value.slice(i, i + 24));
      expect(printed).not.toContain(kubeconfig.slice(0, 40));
      expect(token.length).toBeGreaterThan(8);
      expect(printed).not.toContain(token);
      // The cluster still shows what happened.
      expect(resultOf(results, `aks:${SUB_A}`).ok).toBe(true);
      expect(printed).toContain('listClusterUserCredential');
    } finally {
      proxy.fault = undefined;
    }
  });
});
