/** Assembles discovery from the config: each registered cloud's source planner, compiled matchers, and the cycle. */
import {compileTagMatcher, type TagMatcher} from '../../matchers/index.ts';
import type {AwsSourcesOptions} from '../clouds/aws/sources.ts';
import {everySource, type Clouds, type CloudModule} from '../clouds/cloud.ts';
import {builtInClouds} from '../clouds/index.ts';
import type {AzureSourcesOptions} from '../clouds/azure/sources.ts';
import type {Clock} from '../core/clock.ts';
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
  /** Overrides of the EKS planner's options (read by `awsCloud.planner`). */
  readonly aws?: AwsSourcesOptions;
  /** Overrides of the AKS planner's options (read by `azureCloud.planner`). */
  readonly azure?: AzureSourcesOptions;
  /** Overrides for other clouds' planners, keyed by the module's `cloud` name; each module reads its own. */
  readonly cloudOptions?: Readonly<Record<string, object>>;
  /** The clouds to plan, evaluate and reconcile with; default `builtInClouds` (a test registers a third one). */
  readonly clouds?: Clouds;
  /** Extra planners (tests). */
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
  readonly #clouds: Clouds;
  /** Each cloud's planner, when the config has matchers for it. */
  readonly #byCloud = new Map<CloudModule, SourcePlanner>();
  readonly #planners: SourcePlanner[];
  /** Compiled matchers by cloud name, in config order. */
  readonly #matchers = new Map<string, TagMatcher[]>();

  constructor(options: DiscoveryOptions) {
    this.#options = options;
    this.#clouds = options.clouds ?? builtInClouds;
    const ds = options.config.discovery_service;
    const planners: SourcePlanner[] = [];
    for (const cloud of this.#clouds.all) {
      this.#matchers.set(cloud.cloud, cloud.matchers(ds).map((m) => compileTagMatcher(m.tags)));
      const planner = cloud.planner?.(options);
      if (!planner) continue;
      this.#byCloud.set(cloud, planner);
      planners.push(planner.coversAll ? planner : {plan: (context) => planner.plan(context), coversAll: everySource(cloud)});
    }
    this.#planners = [...planners, ...(options.planners ?? [])];
  }

  /** The planner a cloud's module built for this config (the Azure one also serves AKS access set-up); undefined without its matchers. */
  planner<P extends SourcePlanner>(cloud: CloudModule<P>): P | undefined {
    // The map holds what `cloud.planner` returned, so it is a `P`.
    return this.#byCloud.get(cloud as CloudModule) as P | undefined;
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
        clouds: this.#clouds,
        ...(dynamic ? {dynamicLabels: dynamic} : {}),
      },
      deadlineMs: cycleDeadline(config),
      ...(signal ? {signal} : {}),
      ...(this.#options.events ? {events: this.#options.events} : {}),
    });
  }
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
