/**
 * Prometheus metrics of the service. The service calls the hooks; every label
 * value is bounded: cloud, region, a reason or code from a fixed vocabulary, an SDK
 * operation name. Account ids, cluster names and error messages never become labels.
 */
import {collectDefaultMetrics, Counter, Gauge, Histogram, Registry} from 'prom-client';
import {HEARTBEAT_FAILURE_KINDS, type HeartbeatFailureKind} from '../../heartbeats/heartbeat.ts';
import type {KubeServer, TargetHealth} from '../../heartbeats/kube-server.ts';
import {builtInClouds} from '../clouds/index.ts';
import type {Clouds} from '../clouds/cloud.ts';
import type {FailureReason, SourceResult} from '../core/types.ts';
import type {CycleReport, SourceReport} from '../discovery/cycle.ts';
import {LABEL} from '../discovery/labels.ts';
import type {SkipKind} from '../discovery/evaluate.ts';
import type {Action} from '../discovery/reconcile.ts';
import {VERSION} from '../version.ts';

/** Every metric name starts with this. */
export const METRIC_PREFIX = 'kube_discovery_';

/** The bounded failure reasons, in the order dashboards list them. */
export const FAILURE_REASONS: readonly FailureReason[] = ['throttled', 'access_denied', 'timeout', 'not_found', 'invalid_response', 'other'];

/** State of a source in its last cycle, as in `kube_discovery_sources{state}` and `/v1/status`. */
export type SourceState = 'ok' | 'failed' | 'skipped';

/** State of a cluster in `kube_discovery_clusters{state}`. */
export type ClusterState = 'registered' | 'stale' | 'filtered' | 'skipped_status' | 'skipped_invalid';

/** One HTTP attempt against a cloud API, as the SDK middleware / pipeline policy saw it. */
export interface CloudApiCall {
  /** `eks`, `sts`, `containerservice` ... */
  readonly service: string;
  /** SDK operation name: `ListClusters`, `ManagedClusters_List` ... */
  readonly operation: string;
  /** `OK`, or the cloud's error code (`ThrottlingException`), or a transport code (`ECONNREFUSED`). */
  readonly code: string;
  readonly durationSeconds: number;
  readonly throttled: boolean;
}

/** Options of Metrics. */
export interface MetricsOptions {
  /** Node.js process metrics (`process_*`, `nodejs_*`); default true. */
  readonly defaultMetrics?: boolean;
  /** Reported by `kube_discovery_build_info`; default package.json's. */
  readonly version?: string;
  /** The clouds whose names are `cloud` label values (others read `other`); default the built-in ones. */
  readonly clouds?: Clouds;
}

const HEALTHS = ['healthy', 'unhealthy', 'unknown'] as const;
const CYCLE_RESULTS = ['success', 'partial', 'failure', 'error'] as const;
const CHANGE_ACTIONS = ['create', 'update', 'delete'] as const;

/** A region as a label value: region names pass unchanged (they are bounded by the clouds); anything else is `other`. */
export function metricRegion(region: string): string {
  // Read for every entry and plan item of a cycle (W5: ~10,000): the check is made once per region seen.
  let label = regionLabels.get(region);
  if (label === undefined) {
    label = /^(?:\*|[a-z0-9][a-z0-9-]{0,39})$/.test(region) ? region : 'other';
    // Regions are few; whatever else reaches here (a label someone edited) must not grow the map for good.
    if (regionLabels.size >= 1024) regionLabels.clear();
    regionLabels.set(region, label);
  }
  return label;
}

const regionLabels = new Map<string, string>();

/**
 * Distinct error codes the cloud API metrics label on their own; later new ones count as `other`.
 * The codes come from the answers (a misbehaving endpoint can name a new one each time), and each
 * would be a series kept for the process's life. The clouds' documented codes for the calls the
 * service makes are a few dozen.
 */
export const MAX_API_CODES = 64;

/** A cloud error code or short reason as a label value: identifier-like values pass, free text becomes `other`. */
export function metricCode(code: string | undefined): string {
  if (code === undefined || code === '') return 'none';
  return /^[A-Za-z][A-Za-z0-9_.:-]{0,63}$/.test(code) ? code : 'other';
}

/** A cloud name as a label value: a registered cloud's name (`AWS`, `Azure`), else `other`. */
export function metricCloud(cloud: string | undefined, clouds: Clouds = builtInClouds): string {
  return clouds.find(cloud)?.cloud ?? 'other';
}

/** The state a source reports in metrics and `/v1/status`; both use this so they always agree. */
export function sourceState(source: Pick<SourceReport, 'ok' | 'skipped'>): SourceState {
  if (!source.ok) return 'failed';
  return source.skipped ? 'skipped' : 'ok';
}

/** The bounded reason of a failed source (`other` when it carries none). */
export function sourceReason(source: Pick<SourceReport, 'error'>): FailureReason {
  const reason = source.error?.reason;
  return reason && FAILURE_REASONS.includes(reason) ? reason : 'other';
}

const SKIP_STATES: Readonly<Record<SkipKind, ClusterState>> = {
  filtered: 'filtered',
  status: 'skipped_status',
  malformed: 'skipped_invalid',
  invalid_name: 'skipped_invalid',
  collision: 'skipped_invalid',
};

function clusterStateOf(action: Action, skipKind: SkipKind | undefined): ClusterState | undefined {
  switch (action) {
    case 'create':
    case 'update':
    case 'unchanged':
      return 'registered';
    case 'stale':
      return 'stale';
    case 'skip':
      return skipKind ? SKIP_STATES[skipKind] : 'skipped_invalid';
    case 'delete':
      return undefined;
  }
}

type StateCounts = Map<string, {cloud: string; region: string; state: ClusterState; count: number}>;

function countState(counts: StateCounts, cloud: string, region: string, state: ClusterState): void {
  const key = `${cloud}\u0000${region}\u0000${state}`;
  const entry = counts.get(key);
  if (entry) entry.count++;
  else counts.set(key, {cloud, region, state, count: 1});
}

/** The checked label objects of one kind of cloud call. */
interface ApiCallLabels {
  readonly call: {readonly service: string; readonly operation: string};
  readonly request: {readonly service: string; readonly operation: string; readonly code: string};
  /** The throttled counter of (service, operation) was given this series (at 0 or more). */
  throttledShown: boolean;
}

/** The service's metrics registry and the hooks that feed it. */
export class Metrics {
  /** The prom-client registry served on /metrics. */
  readonly registry = new Registry();

  readonly #cycleDuration: Histogram<never>;
  readonly #cycles: Counter<'result'>;
  readonly #lastSuccess: Gauge<never>;
  readonly #lastCompleted: Gauge<never>;
  readonly #overruns: Counter<never>;
  readonly #tagReadFallbacks: Counter<'region' | 'reason'>;
  readonly #sourceErrors: Counter<'cloud' | 'region' | 'reason'>;
  readonly #sources: Gauge<'cloud' | 'region' | 'state'>;
  readonly #sourceDuration: Histogram<'cloud'>;
  readonly #apiRequests: Counter<'service' | 'operation' | 'code'>;
  readonly #apiDuration: Histogram<'service' | 'operation'>;
  readonly #apiThrottled: Counter<'service' | 'operation'>;
  readonly #changes: Counter<'action'>;
  readonly #writeErrors: Counter<'action'>;
  readonly #heartbeatFailures: Counter<'kind'>;
  readonly #tokensMinted: Counter<'cloud'>;
  readonly #tokenErrors: Counter<'cloud'>;
  readonly #probes: Counter<'health' | 'reason'>;
  readonly #byHealth: Gauge<'cloud' | 'health'>;
  readonly #leader: Gauge<never>;
  /** Cluster states from the last cycle's plan. */
  #cycleStates: StateCounts = new Map();
  /** Registered/stale counts from the registry itself, once the service reports it; they win over the plan's. */
  #inventoryStates: StateCounts | undefined;
  readonly #seenSourceRegions = new Set<string>();
  /** Codes with series of their own in the cloud API request counter (at most MAX_API_CODES). */
  readonly #apiCodes = new Set<string>();
  /** Label objects per (service, operation, code) of cloud calls (see #apiLabels). */
  readonly #apiCallLabels = new Map<string, Map<string, Map<string, ApiCallLabels>>>();
  /** Entries in #apiCallLabels (all levels' leaves). */
  #apiCallLabelCount = 0;
  readonly #clouds: Clouds;

  constructor(options: MetricsOptions = {}) {
    this.#clouds = options.clouds ?? builtInClouds;
    // Process metrics keep their standard names (process_start_time_seconds, nodejs_*), so stock
    // dashboards and restart alerts work; `job`/`instance` already tell this service apart.
    if (options.defaultMetrics ?? true) {
      collectDefaultMetrics({register: this.registry});
      // These gauges end in `_total`, which `promtool check metrics` rejects; the `{type}`
      // gauges of the same name without the suffix carry the same numbers.
      for (const lint of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
        this.registry.removeSingleMetric(lint);
      }
    }
    const registers = [this.registry];
    const name = (n: string): string => `${METRIC_PREFIX}${n}`;

    this.#cycleDuration = new Histogram({
      name: name('cycle_duration_seconds'),
      help: 'Wall time of discovery cycles, from planning sources to the last registry write.',
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800],
      registers,
    });
    this.#cycles = new Counter({
      name: name('cycles_total'),
      help: 'Discovery cycles by result: success (every source listed), partial (some failed), failure (all failed), error (registry unreadable).',
      labelNames: ['result'],
      registers,
    });
    this.#lastSuccess = new Gauge({
      name: name('last_successful_cycle_timestamp_seconds'),
      help: 'Unix time at which the last cycle in which every source succeeded finished (last_success of /v1/status); 0 = none yet.',
      registers,
    });
    this.#lastCompleted = new Gauge({
      name: name('last_completed_cycle_timestamp_seconds'),
      help: 'Unix time at which the last cycle that listed at least one source and applied its plan (success or partial) finished; 0 = none yet.',
      registers,
    });
    this.#overruns = new Counter({
      name: name('cycle_overruns_total'),
      help: 'Scheduled cycles that started late because the previous cycle was still running.',
      registers,
    });
    this.#tagReadFallbacks = new Counter({
      name: name('tag_read_fallbacks_total'),
      help: 'EKS sources whose tag read (Resource Groups Tagging API GetResources) failed, so the cycle described every cluster, by region and bounded reason.',
      labelNames: ['region', 'reason'],
      registers,
    });
    this.#sourceErrors = new Counter({
      name: name('source_errors_total'),
      help: 'Sources (matcher x region x account) whose listing failed, by cloud, region and bounded reason.',
      labelNames: ['cloud', 'region', 'reason'],
      registers,
    });
    this.#sources = new Gauge({
      name: name('sources'),
      help: 'Sources of the last cycle by cloud, region and state (ok, failed, skipped).',
      labelNames: ['cloud', 'region', 'state'],
      registers,
    });
    this.#sourceDuration = new Histogram({
      name: name('source_duration_seconds'),
      help: 'Time to list one source, including every page and DescribeCluster call.',
      labelNames: ['cloud'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.#apiRequests = new Counter({
      name: name('cloud_api_requests_total'),
      help: 'HTTP attempts against cloud APIs (retries included), by service, operation and code (OK or the error code).',
      labelNames: ['service', 'operation', 'code'],
      registers,
    });
    this.#apiDuration = new Histogram({
      name: name('cloud_api_request_duration_seconds'),
      help: 'Duration of single HTTP attempts against cloud APIs.',
      labelNames: ['service', 'operation'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.#apiThrottled = new Counter({
      name: name('cloud_api_throttled_total'),
      help: 'HTTP attempts the cloud answered with a throttling error.',
      labelNames: ['service', 'operation'],
      registers,
    });
    this.#changes = new Counter({
      name: name('registry_changes_total'),
      help: 'kube_server entries written by discovery, by action (create, update, delete).',
      labelNames: ['action'],
      registers,
    });
    this.#writeErrors = new Counter({
      name: name('registry_write_errors_total'),
      help: 'Registry writes of a cycle that failed after retries, by action; the entry is retried next cycle.',
      labelNames: ['action'],
      registers,
    });
    this.#heartbeatFailures = new Counter({
      name: name('heartbeat_failures_total'),
      help: 'Failed heartbeat writes by kind (announce, keepalive, delete).',
      labelNames: ['kind'],
      registers,
    });
    this.#tokensMinted = new Counter({
      name: name('tokens_minted_total'),
      help: 'Cluster credentials minted (EKS presigned tokens, Entra ID access tokens).',
      labelNames: ['cloud'],
      registers,
    });
    this.#tokenErrors = new Counter({
      name: name('token_errors_total'),
      help: 'Cluster credentials that failed to mint.',
      labelNames: ['cloud'],
      registers,
    });
    this.#probes = new Counter({
      name: name('probes_total'),
      help: 'Cluster API probes by resulting health and reason.',
      labelNames: ['health', 'reason'],
      registers,
    });
    this.#byHealth = new Gauge({
      name: name('clusters_by_health'),
      help: 'Registered clusters by cloud and target health (healthy, unhealthy, unknown = not probed yet).',
      labelNames: ['cloud', 'health'],
      registers,
    });
    this.#leader = new Gauge({
      name: name('leader'),
      help: '1 while this replica is the leader that polls and writes for its discovery group, else 0.',
      registers,
    });
    const states = (): StateCounts => this.#clusterStates();
    new Gauge({
      name: name('clusters'),
      help: 'Clusters by cloud, region and state: registered, stale (source failing), filtered (tags), skipped_status, skipped_invalid.',
      labelNames: ['cloud', 'region', 'state'],
      registers,
      collect() {
        this.reset();
        for (const s of states().values()) this.set({cloud: s.cloud, region: s.region, state: s.state}, s.count);
      },
    });
    new Gauge({
      name: name('build_info'),
      help: 'Always 1; the labels tell the running version.',
      labelNames: ['version', 'nodejs_version'],
      registers,
    }).set({version: options.version ?? VERSION, nodejs_version: process.versions.node}, 1);

    // Zero-initialise bounded series so rate() and increase() see the first event.
    for (const result of CYCLE_RESULTS) this.#cycles.inc({result}, 0);
    for (const action of CHANGE_ACTIONS) this.#changes.inc({action}, 0);
    for (const action of CHANGE_ACTIONS) this.#writeErrors.inc({action}, 0);
    for (const kind of HEARTBEAT_FAILURE_KINDS) this.#heartbeatFailures.inc({kind}, 0);
    const clouds = this.#clouds.all.map((c) => c.cloud);
    for (const cloud of clouds) {
      this.#tokensMinted.inc({cloud}, 0);
      this.#tokenErrors.inc({cloud}, 0);
    }
    // kube_discovery_clusters_by_health is not zero-initialised: an inventory not read yet is no empty one (observeInventory).
    this.#leader.set(0);
  }

  /** A cycle finished: result, duration, per-source outcome, registry changes and cluster states. */
  observeCycle(report: CycleReport): void {
    this.#cycles.inc({result: report.result});
    this.#cycleDuration.observe(report.durationMs / 1000);
    const finished = (report.startedAt + report.durationMs) / 1000;
    if (report.result === 'success') this.#lastSuccess.set(finished);
    // A partial cycle still keeps the inventory moving; failing sources have their own series and alert.
    if (report.result !== 'failure') this.#lastCompleted.set(finished);

    this.#sources.reset();
    const byId = new Map<string, SourceReport>();
    // Counted per series first, then given to prom-client once each: a labelled inc() hashes its
    // labels, and four per source (W5: 500 sources) were most of this function's time.
    const perRegion = new Map<string, {cloud: string; region: string; states: Record<SourceState, number>; reasons: Map<FailureReason, number>}>();
    for (const source of report.sources) {
      byId.set(source.id, source);
      const cloud = metricCloud(source.cloud, this.#clouds);
      const region = metricRegion(source.region);
      const key = `${cloud}\u0000${region}`;
      let counts = perRegion.get(key);
      if (counts === undefined) perRegion.set(key, (counts = {cloud, region, states: {ok: 0, failed: 0, skipped: 0}, reasons: new Map()}));
      counts.states[sourceState(source)]++;
      if (!source.ok) {
        const reason = sourceReason(source);
        counts.reasons.set(reason, (counts.reasons.get(reason) ?? 0) + 1);
      }
    }
    for (const {cloud, region, states, reasons} of perRegion.values()) {
      this.#initSourceErrors(cloud, region);
      for (const state of ['ok', 'failed', 'skipped'] as const) this.#sources.inc({cloud, region, state}, states[state]);
      for (const [reason, n] of reasons) this.#sourceErrors.inc({cloud, region, reason}, n);
    }

    const failedWrites = new Map<Action, number>();
    for (const e of report.applyErrors) {
      failedWrites.set(e.action, (failedWrites.get(e.action) ?? 0) + 1);
      this.#writeErrors.inc({action: e.action});
    }
    for (const action of CHANGE_ACTIONS) {
      const written = report.counts[action] - (failedWrites.get(action) ?? 0);
      if (written > 0) this.#changes.inc({action}, written);
    }

    const states: StateCounts = new Map();
    for (const item of report.items) {
      const state = clusterStateOf(item.action, item.skipKind);
      if (!state) continue;
      const source = byId.get(item.source);
      const cloud = metricCloud(item.labels[LABEL.cloud] ?? source?.cloud, this.#clouds);
      const region = metricRegion(item.labels[LABEL.region] ?? source?.region ?? 'unknown');
      countState(states, cloud, region, state);
    }
    this.#cycleStates = states;
  }

  /** A cycle could not run at all (the registry was unreadable); counted as result `error`. */
  cycleError(): void {
    this.#cycles.inc({result: 'error'});
  }

  /** A scheduled cycle started late because the previous one overran. */
  cycleOverrun(): void {
    this.#overruns.inc();
  }

  /** A source described every cluster because its tag read failed. */
  tagReadFallback(region: string, reason: string): void {
    this.#tagReadFallbacks.inc({region, reason});
  }

  /** A source finished fetching: its duration. (Its failure is counted by observeCycle, which sees every source once.) */
  observeSource(result: SourceResult, durationMs: number): void {
    this.#sourceDuration.observe({cloud: metricCloud(result.source.cloud, this.#clouds)}, durationMs / 1000);
  }

  /** The registered inventory as stored (after a cycle, or on a watch event): registered/stale counts and health. */
  observeInventory(servers: readonly KubeServer[]): void {
    const states: StateCounts = new Map();
    // Counted here and set once per series: a labelled inc() per entry (label hashing) made each
    // recount during a first cycle's 10,000 writes cost tens of milliseconds.
    const byHealth = new Map<string, Map<string, number>>();
    for (const {cloud} of this.#clouds.all) byHealth.set(cloud, new Map(HEALTHS.map((health) => [health, 0])));
    for (const server of servers) {
      const cluster = server.spec.cluster;
      const labels = cluster.metadata.labels;
      // An entry without the cloud or region label is placed by its document's cloud block.
      const registered = labels[LABEL.cloud] === undefined || labels[LABEL.region] === undefined ? this.#clouds.registeredCluster(server) : undefined;
      const cloud = metricCloud(labels[LABEL.cloud] ?? registered?.module.cloud, this.#clouds);
      const region = metricRegion(labels[LABEL.region] ?? registered?.cluster.region ?? 'unknown');
      countState(states, cloud, region, server.status?.stale ? 'stale' : 'registered');
      const health = server.status?.target_health?.status ?? 'unknown';
      let counts = byHealth.get(cloud);
      if (!counts) byHealth.set(cloud, (counts = new Map()));
      const key = HEALTHS.includes(health) ? health : 'unknown';
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    this.#byHealth.reset();
    for (const [cloud, counts] of byHealth) for (const [health, n] of counts) this.#byHealth.set({cloud, health}, n);
    this.#inventoryStates = states;
  }

  /** A heartbeat write failed (after retries for announce/delete; each failed keepalive). */
  heartbeatFailure(kind: HeartbeatFailureKind): void {
    this.#heartbeatFailures.inc({kind});
  }

  /** A cluster token was minted. */
  tokenMinted(cloud: string): void {
    this.#tokensMinted.inc({cloud: metricCloud(cloud, this.#clouds)});
  }

  /** A cluster token failed to mint. */
  tokenError(cloud: string): void {
    this.#tokenErrors.inc({cloud: metricCloud(cloud, this.#clouds)});
  }

  /** A probe finished with this health; the reason is kept only when it is a short identifier. */
  probeResult(health: TargetHealth): void {
    this.#probes.inc({health: HEALTHS.includes(health.status) ? health.status : 'unknown', reason: probeReason(health.reason)});
  }

  /** This replica became leader (true) or follower (false). */
  setLeader(leader: boolean): void {
    this.#leader.set(leader ? 1 : 0);
    if (!leader) {
      // A follower runs no cycles: the last cycle's source and skip states are another replica's news now.
      this.#sources.reset();
      this.#cycleStates = new Map();
    }
  }

  /** One HTTP attempt against a cloud API (called by the AWS middleware and the Azure pipeline policy). */
  cloudApiCall(call: CloudApiCall): void {
    const labels = this.#apiLabels(call.service, call.operation, call.code);
    this.#apiRequests.inc(labels.request);
    this.#apiDuration.observe(labels.call, Math.max(0, call.durationSeconds));
    if (call.throttled) this.#apiThrottled.inc(labels.call);
    else if (!labels.throttledShown) {
      // The series is shown at 0 from the first call on; adding 0 again changes nothing.
      this.#apiThrottled.inc(labels.call, 0);
      labels.throttledShown = true;
    }
  }

  /**
   * The label objects of one (service, operation, code), checked once: every cloud call (2,000 in
   * a W0 first cycle) otherwise ran three label checks and built three objects.
   */
  #apiLabels(service: string, operation: string, code: string): ApiCallLabels {
    // By service, then operation, then code: a lookup builds no key string (this runs on every cloud call).
    let byOperation = this.#apiCallLabels.get(service);
    if (byOperation === undefined) this.#apiCallLabels.set(service, (byOperation = new Map()));
    let byCode = byOperation.get(operation);
    if (byCode === undefined) byOperation.set(operation, (byCode = new Map()));
    let labels = byCode.get(code);
    if (labels === undefined) {
      const call = {service: metricCode(service), operation: metricCode(operation)};
      labels = {call, request: {...call, code: this.#boundedCode(metricCode(code))}, throttledShown: false};
      // Codes are bounded by metricCode's rule but not few: start over rather than grow without bound.
      if (this.#apiCallLabelCount >= 4_096) {
        this.#apiCallLabels.clear();
        this.#apiCallLabelCount = 0;
        this.#apiCallLabels.set(service, (byOperation = new Map()));
        byOperation.set(operation, (byCode = new Map()));
      }
      byCode.set(code, labels);
      this.#apiCallLabelCount++;
    }
    return labels;
  }

  /** `code`, or `other` once MAX_API_CODES distinct codes have their own series. */
  #boundedCode(code: string): string {
    if (this.#apiCodes.has(code)) return code;
    if (this.#apiCodes.size >= MAX_API_CODES) return 'other';
    this.#apiCodes.add(code);
    return code;
  }

  /** The /metrics body and its content type. */
  async render(): Promise<{contentType: string; body: string}> {
    return {contentType: this.registry.contentType, body: await this.registry.metrics()};
  }

  #initSourceErrors(cloud: string, region: string): void {
    const key = `${cloud}\u0000${region}`;
    if (this.#seenSourceRegions.has(key)) return;
    this.#seenSourceRegions.add(key);
    for (const reason of FAILURE_REASONS) this.#sourceErrors.inc({cloud, region, reason}, 0);
  }

  #clusterStates(): StateCounts {
    const inventory = this.#inventoryStates;
    if (!inventory) return this.#cycleStates;
    const merged: StateCounts = new Map(inventory);
    for (const [key, entry] of this.#cycleStates) {
      if (entry.state !== 'registered' && entry.state !== 'stale') merged.set(key, entry);
    }
    return merged;
  }
}

function probeReason(reason: string | undefined): string {
  if (reason === undefined || reason === '') return 'none';
  return /^[a-z][a-z0-9_]{0,31}$/.test(reason) ? reason : 'other';
}
