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
import type {SourceRef, SourceResult} from '../core/types.ts';
import type {Config} from '../config/schema.ts';
import {cronSchedule} from '../scheduler/schedule.ts';
import {runCycle, type CycleReport, type Registrar, type SourcePlanner} from './cycle.ts';
import type {KubeServerDraft} from '../../heartbeats/kube-server.ts';

/** What discovery needs besides the config. */
export interface DiscoveryOptions {
  readonly config: Config;
  readonly clock: Clock;
  readonly hostId: string;
  readonly hostname: string;
  readonly version: string;
  readonly aws?: AwsSourcesOptions;
  readonly azure?: AzureSourcesOptions;
  /** Extra planners (Azure, or tests). */
  readonly planners?: readonly SourcePlanner[];
  readonly onSource?: (result: SourceResult, durationMs: number) => void;
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
    const aws = new AwsSources({perRegionConcurrency: ds.concurrency.per_region, requestTimeoutMs: ds.request_timeout, refreshMs: ds.refresh_interval, clock: options.clock, ...(rateShaper ? {rateShaper} : {}), ...options.aws});
    this.azure =
      ds.azure.length > 0
        ? lazyAzurePlanner(ds.azure, {
            clock: options.clock,
            perSubscriptionConcurrency: ds.concurrency.per_region,
            policyOptions: {requestTimeoutMs: ds.request_timeout},
            credentialMaxAgeMs: ds.refresh_interval,
            ...options.azure,
          })
        : undefined;
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
        hostId: this.#options.hostId,
        hostname: this.#options.hostname,
        version: this.#options.version,
        ...(dynamic ? {dynamicLabels: dynamic} : {}),
      },
      deadlineMs: cycleDeadline(config),
      ...(signal ? {signal} : {}),
      ...(this.#options.onSource ? {onSource: this.#options.onSource} : {}),
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

/** The Azure planner, loaded on first use: the Azure SDKs cost tens of MB that AWS-only deployments don't need. */
/** The Azure planner, loaded on first use, plus a matcher's ARM credential and client options (AKS access set-up). */
export type LazyAzurePlanner = Pick<AzurePlanner, 'plan' | 'tokenSource'> & {armAccess(matcher: AzureSourceMatcher): Promise<ReturnType<AzurePlanner['sources']['armAccess']>>};

function lazyAzurePlanner(matchers: readonly AzureSourceMatcher[], options: AzureSourcesOptions): LazyAzurePlanner {
  let planner: Promise<AzurePlanner> | undefined;
  const load = (): Promise<AzurePlanner> => (planner ??= import('../clouds/azure/sources.ts').then((m) => m.azurePlanner(matchers, options)));
  return {
    plan: async () => (await load()).plan(),
    tokenSource: async (access, request) => (await load()).tokenSource(access, request),
    armAccess: async (matcher) => (await load()).sources.armAccess(matcher),
  };
}
