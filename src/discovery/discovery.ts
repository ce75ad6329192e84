/** Assembles discovery from the config: source planners per cloud, compiled matchers, and the cycle. */
import {compileTagMatcher, type TagMatcher} from '../../matchers/index.ts';
import {AwsSources, type AwsSourcesOptions} from '../clouds/aws/sources.ts';
import {awsCloud} from '../clouds/aws/cloud-module.ts';
import {azureCloud} from '../clouds/azure/cloud-module.ts';
import type {CloudModule} from '../clouds/cloud.ts';
import {builtInClouds} from '../clouds/index.ts';
import type {AzurePlanner, AzureSourceMatcher, AzureSourcesOptions} from '../clouds/azure/sources.ts';
import {systemClock, type Clock} from '../core/clock.ts';
import {RateShaper, awsRateLimits} from '../clouds/aws/rate-shaper.ts';
import type {SourceRef} from '../core/types.ts';
import type {Config} from '../config/schema.ts';
import {cronSchedule} from '../scheduler/schedule.ts';
import {runCycle, type CycleReport, type Registrar, type SourcePlanner} from './cycle.ts';
import type {KubeServerDraft} from '../../heartbeats/kube-server.ts';
import type {SharedCredentials} from '../credentials/shared.ts';
import type {DiscoveryEvents} from './events.ts';

/** What discovery needs besides the config. */
export interface DiscoveryOptions {
  readonly config: Config;
  readonly clock: Clock;
  readonly aws?: AwsSourcesOptions;
  readonly azure?: AzureSourcesOptions;
  /** Extra planners (Azure, or tests). */
  readonly planners?: readonly SourcePlanner[];
  /** What discovery reports (sources, SDK clients, tag reads), built once by the service. */
  readonly events?: DiscoveryEvents;
  /** Credentials shared with the probes (the runtime's); default discovery's own. */
  readonly credentials?: SharedCredentials;
  /** Dynamic labels as of now. */
  readonly dynamicLabels?: () => KubeServerDraft['spec']['cluster']['spec']['dynamic_labels'];
}

/** Runs discovery cycles for one config; planners, SDK clients and credentials live as long as it does. */
export class Discovery {
  readonly #options: DiscoveryOptions;
  readonly #planners: SourcePlanner[];
  /** The Azure planner when the config has `azure:` matchers (its token source serves AKS probes). */
  readonly azure: LazyAzurePlanner | undefined;
  /** Compiled matchers by cloud name, in config order. */
  readonly #matchers = new Map<string, TagMatcher[]>();

  constructor(options: DiscoveryOptions) {
    this.#options = options;
    const ds = options.config.discovery_service;
    for (const cloud of builtInClouds.all) this.#matchers.set(cloud.cloud, cloud.matchers(ds).map((m) => compileTagMatcher(m.tags)));
    const rateShaper = ds.aws_rate_limits ? new RateShaper({clock: systemClock, limits: awsRateLimits(ds.aws_rate_limits)}) : undefined;
    const {events, credentials} = options;
    const aws = new AwsSources({
      perRegionConcurrency: ds.concurrency.per_region,
      requestTimeoutMs: ds.request_timeout,
      refreshMs: ds.refresh_interval,
      clock: options.clock,
      ...(rateShaper ? {rateShaper} : {}),
      ...(credentials ? {credentialProvider: (role) => credentials.aws.provider(role)} : {}),
      ...(events?.awsClient ? {onClient: (client) => events.awsClient?.(client)} : {}),
      ...(events?.tagReadFallback ? {onTagFallback: (source, fallback) => events.tagReadFallback?.(source, fallback)} : {}),
      ...options.aws,
    });
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
    this.azure = ds.azure.length > 0 ? lazyAzurePlanner(ds.azure, withPolicies, credentials) : undefined;
    this.#planners = [
      ...(ds.aws.length > 0 ? [{plan: () => aws.plan(ds.aws), coversAll: everySource(awsCloud)}] : []),
      ...(this.azure ? [{plan: () => this.azure!.plan(), coversAll: everySource(azureCloud)}] : []),
      ...(options.planners ?? []),
    ];
  }

  /** The compiled matcher a source's clusters are judged by. */
  matcherFor(source: SourceRef): TagMatcher {
    const matcher = this.#matchers.get(source.cloud)?.[source.matcherIndex];
    if (!matcher) throw new Error(`no ${source.cloud} matcher #${source.matcherIndex} for source ${source.id}`);
    return matcher;
  }

  /** One cycle against the registrar. */
  runCycle(registrar: Registrar, signal?: AbortSignal): Promise<CycleReport> {
    const {config, clock} = this.#options;
    const dynamic = this.#options.dynamicLabels?.();
    return runCycle({
      planners: this.#planners,
      registrar,
      clock,
      discoveryGroup: config.discovery_service.discovery_group,
      matcherFor: (s) => this.matcherFor(s),
      sourceConcurrency: config.discovery_service.concurrency.sources,
      evaluateContext: {
        staticLabels: config.kubernetes_service.labels,
        ...(dynamic ? {dynamicLabels: dynamic} : {}),
      },
      deadlineMs: cycleDeadline(config),
      ...(signal ? {signal} : {}),
      ...(this.#options.events ? {events: this.#options.events} : {}),
    });
  }
}

/** The catch-all source of a cloud (`eks:*`): region '*' and account '' cover every entry of the cloud, so a planning failure protects them all. */
export function everySource(cloud: CloudModule): SourceRef {
  return {id: `${cloud.type}:*`, cloud: cloud.cloud, type: cloud.type, region: '*', account: '', matcherIndex: 0};
}

/**
 * How long a cycle's sources may run: `cycle_timeout`, else 80 % of the time between two
 * scheduled cycles, so a stuck source ends before the next cycle is due.
 */
export function cycleDeadline(config: Config): number {
  const ds = config.discovery_service;
  if (ds.cycle_timeout !== undefined) return ds.cycle_timeout;
  let interval = ds.poll_interval ?? 300_000;
  if (ds.schedule) {
    const next = cronSchedule(ds.schedule);
    const first = next(0, Date.UTC(2025, 0, 6));
    interval = next(first, first) - first;
  }
  return Math.max(1000, Math.floor(interval * 0.8));
}

/**
 * The Azure planner, loaded on first use (the Azure SDKs cost tens of MB that AWS-only deployments
 * don't need), plus a matcher's ARM credential and client options (AKS access set-up).
 */
export type LazyAzurePlanner = Pick<AzurePlanner, 'plan'> & {armAccess(matcher: AzureSourceMatcher): Promise<ReturnType<AzurePlanner['sources']['armAccess']>>};

function lazyAzurePlanner(matchers: readonly AzureSourceMatcher[], options: AzureSourcesOptions, credentials: SharedCredentials | undefined): LazyAzurePlanner {
  let planner: Promise<AzurePlanner> | undefined;
  const load = (): Promise<AzurePlanner> =>
    (planner ??= Promise.all([import('../clouds/azure/sources.ts'), credentials?.azure()]).then(([m, identities]) =>
      m.azurePlanner(matchers, {...options, ...(identities && !options.identities ? {identities} : {})}),
    ));
  return {
    plan: async () => (await load()).plan(),
    armAccess: async (matcher) => (await load()).sources.armAccess(matcher),
  };
}
