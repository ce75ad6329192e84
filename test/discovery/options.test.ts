/** Discovery overrides merge field by field: setting one field of `aws` or `azure` keeps the block's other defaults. */
import {describe, expect, it} from 'vitest';
import {mergeDiscoveryOptions} from '../../src/discovery/options.ts';

describe('mergeDiscoveryOptions', () => {
  it('keeps the other aws and azure defaults when an override sets one field of each', () => {
    const onClient = (): void => undefined;
    const merged = mergeDiscoveryOptions(
      {aws: {perRegionConcurrency: 2, requestTimeoutMs: 5_000, onClient}, azure: {perSubscriptionConcurrency: 3, credentialMaxAgeMs: 60_000}},
      {aws: {perRegionConcurrency: 4}, azure: {credentialMaxAgeMs: 1_000}},
    );
    expect(merged.aws).toEqual({perRegionConcurrency: 4, requestTimeoutMs: 5_000, onClient});
    expect(merged.azure).toEqual({perSubscriptionConcurrency: 3, credentialMaxAgeMs: 1_000});
  });

  it('lets top-level fields of the override win, and leaves absent blocks absent', () => {
    const base = {dynamicLabels: () => ({a: {command: ['x'], period: '1m', result: 'base'}})};
    const override = {dynamicLabels: () => ({b: {command: ['y'], period: '1m', result: 'override'}})};
    const merged = mergeDiscoveryOptions(base, override);
    expect(merged.dynamicLabels).toBe(override.dynamicLabels);
    expect('aws' in merged).toBe(false);
    expect('azure' in merged).toBe(false);
    expect(mergeDiscoveryOptions({aws: {perRegionConcurrency: 2}})).toEqual({aws: {perRegionConcurrency: 2}});
  });

  it('merges each cloud\'s cloudOptions block per field, keyed by the module\'s cloud name', () => {
    const merged = mergeDiscoveryOptions({cloudOptions: {GCP: {projects: ['a'], timeoutMs: 5_000}}}, {cloudOptions: {GCP: {timeoutMs: 1_000}, OCI: {region: 'x'}}});
    expect(merged.cloudOptions).toEqual({GCP: {projects: ['a'], timeoutMs: 1_000}, OCI: {region: 'x'}});
  });
});
