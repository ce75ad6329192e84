/**
 * The simulator's management groups (`azure.management_groups` in a scenario): subscriptions in
 * nested groups under `sim-root`, a matcher naming that group, and real discovery through it —
 * AzureSources signing in at the simulator's managed-identity endpoint.
 */
import {readFile} from 'node:fs/promises';
import type {TokenCredential} from '@azure/core-auth';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {parseScenario} from '../../bench/scenario.ts';
import {serviceConfig, startSimulator, type Simulator} from '../../bench/sim.ts';
import {AzureSources, type AzureSourceMatcher} from '../../src/clouds/azure/sources.ts';
import {parseConfig} from '../../src/config/load.ts';
import {runPlan} from '../clouds/aks-helpers.ts';

let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator(parseScenario({name: 'sim-mg', seed: 7, azure: {subscriptions: 5, clusters_per_resource_group: 2, management_groups: 3}}, 'inline'));
});

afterAll(async () => {
  await sim.close();
});

/** A TokenCredential asking the simulator's managed-identity endpoint, as DefaultAzureCredential would. */
function simCredential(): TokenCredential {
  const env = sim.description.env;
  return {
    async getToken(scopes) {
      const resource = (Array.isArray(scopes) ? scopes[0] : scopes)?.replace(/\/\.default$/, '') ?? '';
      const res = await fetch(`${env['IDENTITY_ENDPOINT']}?resource=${encodeURIComponent(resource)}&api-version=2019-08-01`, {headers: {'x-identity-header': env['IDENTITY_HEADER'] ?? ''}});
      const body = (await res.json()) as {access_token: string; expires_on: string};
      return {token: body.access_token, expiresOnTimestamp: Number(body.expires_on) * 1000};
    },
  };
}

describe('simulator management groups', () => {
  it('hands the service a matcher naming the root group, which config check accepts', () => {
    const azure = sim.description.matchers.azure;
    expect(azure).toEqual([expect.objectContaining({subscriptions: ['*'], management_groups: ['sim-root']})]);
    const text = serviceConfig(sim.description, {group: 'sim', pollInterval: '1m', storage: {type: 'memory'}});
    expect(parseConfig(text, 'sim.yaml').discovery_service.azure[0]?.management_groups).toEqual(['sim-root']);
  });

  it('discovers every cluster of the subscriptions spread over its nested groups', async () => {
    const ca = await readFile(sim.description.ca_file ?? '', 'utf8');
    const sources = new AzureSources({credential: simCredential(), clientOptions: {tlsOptions: {ca}, retryOptions: {maxRetries: 1, retryDelayInMs: 1, maxRetryDelayInMs: 5}}});
    const results = await runPlan(await sources.plan(sim.description.matchers.azure as unknown as AzureSourceMatcher[]));

    expect(results.map((r) => r.source.account)).toEqual(sim.description.azure?.subscriptions);
    expect(results.every((r) => r.ok)).toBe(true);
    expect(results.reduce((n, r) => n + r.clusters.length, 0)).toBe(sim.description.clusters.expected);
    // sim-group-1 sits under sim-group-0: the walk reached it through the nesting.
    expect(sim.arm?.stats.count({operation: 'managementGroups.descendants', status: 200})).toBeGreaterThanOrEqual(1);
    expect(sim.arm?.world.managementGroups.descendants('sim-group-0')?.map((d) => d.name)).toContain('sim-group-1');
  });
});
