/**
 * The AKS source planner, built from discovery's options and loaded on first use: the Azure SDKs
 * cost tens of MB that AWS-only deployments don't need, so nothing here imports them statically.
 */
import type {SharedCredentials} from '../../credentials/shared.ts';
import type {SourcePlanner} from '../../discovery/cycle.ts';
import type {DiscoveryOptions} from '../../discovery/discovery.ts';
import type {AzurePlanner, AzureSourceMatcher, AzureSourcesOptions} from './sources.ts';

/** The Azure planner plus a matcher's ARM credential and client options (AKS access set-up). */
export type LazyAzurePlanner = SourcePlanner & {armAccess(matcher: AzureSourceMatcher): Promise<ReturnType<AzurePlanner['sources']['armAccess']>>};

/** Plans the config's `azure:` matchers, or undefined when there are none: the runtime's credentials and ARM policies, then the caller's `azure` overrides on top. */
export function azurePlanner(options: DiscoveryOptions): LazyAzurePlanner | undefined {
  const ds = options.config.discovery_service;
  if (ds.azure.length === 0) return undefined;
  const {events, credentials} = options;
  const azure: AzureSourcesOptions = {
    clock: options.clock,
    perSubscriptionConcurrency: ds.concurrency.per_region,
    policyOptions: {requestTimeoutMs: ds.request_timeout},
    credentialMaxAgeMs: ds.refresh_interval,
    ...(credentials ? {localAccounts: credentials.aksLocalAccounts} : {}),
    ...options.azure,
  };
  // The metrics policies join whatever client options were given, rather than being replaced by them.
  const armPolicies = events?.armPolicies ?? [];
  const withPolicies: AzureSourcesOptions =
    armPolicies.length > 0 ? {...azure, clientOptions: {...azure.clientOptions, additionalPolicies: [...armPolicies, ...(azure.clientOptions?.additionalPolicies ?? [])]}} : azure;
  return lazyAzurePlanner(ds.azure, withPolicies, credentials);
}

function lazyAzurePlanner(matchers: readonly AzureSourceMatcher[], options: AzureSourcesOptions, credentials: SharedCredentials | undefined): LazyAzurePlanner {
  let planner: Promise<AzurePlanner> | undefined;
  const load = (): Promise<AzurePlanner> =>
    (planner ??= Promise.all([import('./sources.ts'), credentials?.azure()]).then(([m, identities]) =>
      m.azurePlanner(matchers, {...options, ...(identities && !options.identities ? {identities} : {})}),
    ));
  return {
    plan: async (context) => (await load()).plan(context),
    armAccess: async (matcher) => (await load()).sources.armAccess(matcher),
  };
}
