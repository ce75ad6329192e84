/**
 * The long-running service: opens the registry, serves the last known inventory at once,
 * and — while it leads its discovery group — runs discovery cycles on schedule and keeps
 * entries alive. Every replica serves the HTTP API from its inventory cache.
 */
import PQueue from 'p-queue';
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import type {CliIo} from '../cli/io.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {DiscoveryOptions} from '../discovery/discovery.ts';
import {DynamicLabels} from '../discovery/dynamic-labels.ts';
import {createAuthenticator, podTokenReviewer, readTokenFile, type TokenReviewer} from '../http/auth.ts';
import type {TokenSource} from '../probe/token-source.ts';
import {clusterReviewFor} from './cluster-auth.ts';
import {startHttpServer, type HttpServer, type Readiness} from '../http/server.ts';
import {Inventory} from '../inventory/inventory.ts';
import {RegistryHealth} from '../registry/health.ts';
import {instrumentAwsClient} from '../observability/aws-middleware.ts';
import {azureMetricsPolicies} from '../observability/azure-policy.ts';
import {logCycleSummary, logSourceResult} from '../observability/log-events.ts';
import type {Logger} from '../observability/logger.ts';
import {Metrics} from '../observability/metrics.ts';
import {redact} from '../observability/redact.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import {cronSchedule, intervalSchedule} from '../scheduler/schedule.ts';
import {Scheduler} from '../scheduler/scheduler.ts';
import {StatusTracker} from '../status/status.ts';
import {VERSION} from '../version.ts';
import {createLeadership, type Role} from './leadership.ts';
import {noSourceSucceeded, summaryLine} from '../status/summary.ts';
import {createProbeStage} from './probes.ts';
import {createAccessSetupStep} from '../access/setup-step.ts';
import {accessSetupCounter} from '../access/setup-metrics.ts';
import {claimWriter, releaseWriter} from './writer-claim.ts';
import {openRuntime, type Runtime, type Writer} from './runtime.ts';

/** Options of startService. */
export interface ServiceOptions {
  readonly config: Config;
  readonly io: CliIo;
  readonly clock: Clock;
  readonly logger?: Logger;
  readonly metrics?: Metrics;
  readonly backend?: RegistryBackend;
  readonly discovery?: Partial<DiscoveryOptions>;
  readonly tokenReviewer?: TokenReviewer;
  /** Tests: the credential for TokenReviews against discovered clusters (production mints it like probes). */
  readonly clusterCredential?: TokenSource;
  /** Overrides `http.listen_addr` (tests use port 0). */
  readonly listenAddr?: string;
}

/** A running service. */
export interface RunningService {
  readonly url: string;
  readonly runtime: Runtime;
  readonly metrics: Metrics;
  readonly inventory: Inventory;
  /** `leader` or `follower`. */
  role(): Role['role'];
  /** Runs a cycle now (SIGHUP, POST /v1/discover); false on a follower. */
  trigger(): boolean;
  /** Resolves with the report of the next completed cycle. */
  nextCycle(): Promise<CycleReport>;
  /** Stops scheduling, lets a running cycle finish (bounded), stops heartbeats and closes everything. */
  stop(options: {deregister: boolean; graceMs?: number}): Promise<void>;
}

const NO_CREDENTIALS = /CredentialsProviderError|Could not load credentials|no AWS credentials/i;
// Re-announcing on promotion: enough parallelism to move 10,000 entries in seconds, few enough to stay under request deadlines.
const REANNOUNCE_CONCURRENCY = 32;
// Pause before a leader that failed to take over tries again.
const TERM_RETRY_MS = 5_000;

/** One leadership term: the heartbeat and the scheduler that only a leader runs. */
interface Term {
  readonly writer: Writer;
  readonly scheduler: Scheduler;
  /** storage kubernetes: DiscoveryConfig resources, reconciled while leading. */
  dynamic?: {start(): void; stop(): void};
}

/** Starts the service. */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const {config, clock} = options;
  const metrics = options.metrics ?? new Metrics();
  const status = new StatusTracker();
  const group = config.discovery_service.discovery_group;
  let logger: Logger | undefined = options.logger;
  // Registry failures are logged once per state change (JSON, through the service logger) and counted.
  const registryHealth = new RegistryHealth({
    backend: config.storage.type,
    clock,
    registry: metrics.registry,
    logger: {error: (fields, message) => logger?.error(fields, message), info: (fields, message) => logger?.info(fields, message)},
  });
  // Keepalives reach the inventory built after the runtime: readers follow the lease.
  let keptAlive: (lease: string, expiresMs: number) => void = () => undefined;
  const dynamic = new DynamicLabels({
    commands: config.kubernetes_service.commands,
    clock,
    onError: (name, error) => logger?.warn({label: name, err: error}, `dynamic label ${name}: command failed; keeping the last result`),
  });

  const runtime = await openRuntime(config, options.io, {
    clock,
    logTo: 'stdout',
    ...(options.logger ? {logger: options.logger} : {}),
    ...(options.backend ? {backend: options.backend} : {}),
    onHeartbeatFailure: (kind, error) => {
      metrics.heartbeatFailure(kind);
      registryHealth.failed('write', error);
    },
    onHeartbeatSuccess: () => registryHealth.succeeded('write'),
    onKeepAlive: (lease, expiresMs) => keptAlive(lease, expiresMs),
    onBackendError: (error) => registryHealth.failed('write', error),
    discovery: {
      // Every SDK client and ARM pipeline counts its HTTP attempts (retries included) in the metrics.
      aws: {
        perRegionConcurrency: config.discovery_service.concurrency.per_region,
        onClient: (client) => instrumentAwsClient(client, metrics),
        onTagFallback: (source, fallback) => {
          metrics.tagReadFallback(source.region, fallback.reason);
          // Denied is a standing permission gap: say it once per source, not every cycle.
          if (fallback.reason !== 'access_denied' || fallback.firstDenial) {
            runtime.logger.warn(
              {source: source.id, region: source.region, operation: 'GetResources', code: fallback.code, reason: fallback.reason, error: fallback.message},
              fallback.reason === 'access_denied'
                ? 'tag reads denied (tag:GetResources): describing every cluster each cycle; grant tag:GetResources for incremental discovery'
                : 'tag read failed: described every cluster this cycle',
            );
          }
        },
      },
      azure: {
        clientOptions: {additionalPolicies: azureMetricsPolicies(metrics)},
        onTokenMint: () => metrics.tokenMinted('Azure'),
        onTokenError: () => metrics.tokenError('Azure'),
      },
      dynamicLabels: () => dynamic.current(),
      onSource: (result, durationMs) => {
        status.recordSource(result, clock.now());
        metrics.observeSource(result, durationMs);
        logSourceResult(runtime.logger, result, durationMs);
      },
      ...options.discovery,
    },
  });
  logger = runtime.logger;
  const log = runtime.logger;
  await dynamic.start();

  // Serve what the registry already holds (a restart shows the last inventory at once).
  const cache = new Inventory({
    backend: runtime.backend,
    group,
    clock,
    historySize: config.http.watch.history,
    onError: (error) => registryHealth.failed('read', error),
    onReadOk: () => registryHealth.succeeded('read'),
  });
  const inventory = cache;
  keptAlive = (lease, expiresMs) => cache.leaseKeptAlive(lease, expiresMs);
  await cache.start();
  metrics.observeInventory(inventory.list());
  // A cycle writes thousands of entries; recount the inventory once per burst, not once per event.
  let inventoryRecount: NodeJS.Timeout | undefined;
  inventory.subscribe(() => {
    inventoryRecount ??= setTimeout(() => {
      inventoryRecount = undefined;
      metrics.observeInventory(inventory.list());
    }, 200).unref();
  });

  // setup_access_for_arn: a named step between registration and probes (src/access/setup-step.ts).
  const accessSetup = createAccessSetupStep({
    config,
    clock,
    backend: runtime.backend,
    logger: log,
    env: options.io.env,
    timeoutMs: config.probe.timeout,
    onOutcome: accessSetupCounter(metrics.registry),
  });
  const aks = runtime.discovery.azure;
  const probe = createProbeStage({
    adjustHealth: accessSetup.adjustHealth,
    config,
    clock,
    logger: log,
    metrics,
    env: options.io.env,
    ...(aks
      ? {
          aks: {
            token: async (access) => {
              if (access.kind !== 'aks') throw new Error(`expected AKS access, got ${access.kind}`);
              return aks.tokenSource(access);
            },
          },
        }
      : {}),
  });
  let firstCycleDone = false;
  const waiters: ((report: CycleReport) => void)[] = [];

  // Memory and SQLite deliver their own writes to the inventory synchronously, so a cycle reads the
  // group's entries from the inventory's parsed copy instead of listing and parsing every document
  // again (the largest allocation of a cycle at 10,000 entries). A shared backend (etcd) is listed.
  const localBackend = runtime.backend.name === 'memory' || runtime.backend.name === 'sqlite';
  const cycleRegistrar = (writer: Writer): Writer['registrar'] => ({
    ...writer.registrar,
    current: async () => (localBackend && inventory.synced && inventory.lastError === undefined ? inventory.list() : writer.registrar.current()),
  });

  const makeScheduler = (writer: Writer): Scheduler =>
    new Scheduler({
      clock,
      next: config.discovery_service.schedule ? cronSchedule(config.discovery_service.schedule) : intervalSchedule(config.discovery_service.poll_interval ?? 300_000),
      onOverrun: (lateByMs) => {
        metrics.cycleOverrun();
        log.warn({late_ms: lateByMs}, 'discovery cycle overran its schedule; the next cycle starts now');
      },
      onError: (error) => {
        metrics.cycleError();
        log.error({err: error}, 'discovery cycle failed; the registry was left as it was');
      },
      run: async (signal) => {
        const report = await runtime.discovery.runCycle(cycleRegistrar(writer), signal);
        if (report.deadlineExceeded) {
          metrics.cycleOverrun();
          log.warn({event: 'cycle_deadline', failed_sources: report.sources.filter((r) => r.error?.code === 'CycleDeadline').map((r) => r.id)}, 'discovery cycle reached its deadline; sources still running were cut off and keep their entries');
        }
        status.recordCycle(report);
        metrics.observeCycle(report);
        logCycleSummary(log, report);
        warnIfNoCredentials(log, report);
        firstCycleDone = true;
        // Access set-up, then probes, run after registration, inside the cycle's slot so their writes never race the next cycle.
        await accessSetup.run(report, signal);
        const changed = await probe(report, writer.registrar, signal);
        if (changed > 0) log.info({event: 'probe', changed}, `probes changed the health of ${changed} clusters`);
        for (const waiter of waiters.splice(0)) waiter(report);
      },
    });

  // Role changes are applied one at a time, in order.
  let term: Term | undefined;
  let transitions: Promise<void> = Promise.resolve();
  let role: Role = {role: 'follower'};
  let stopping = false;

  let termFailures = 0;
  // Stops a leader waiting for its first DiscoveryConfig list when the service stops.
  const priming = new AbortController();
  const beginTerm = async (backend: RegistryBackend): Promise<void> => {
    let writer: Writer | undefined;
    try {
      writer = await runtime.openWriter(backend);
      // Move every entry onto our own lease before the previous leader's lease can lapse.
      const moved = await reannounce(writer);
      if (moved > 0) log.info({entries: moved}, 'took over the registry entries of the previous leader');
    } catch (error) {
      // A leader that cannot write must not sit idle while the old lease lapses: clean up and try again.
      await writer?.heartbeat.stop({deregister: false}).catch(() => undefined);
      // Once per streak: the registry health already logs the backend's state changes.
      log[termFailures++ === 0 ? 'error' : 'debug']({err: error, retry_in_ms: TERM_RETRY_MS, attempts: termFailures}, 'could not take over as leader; retrying');
      clock.setTimeout(() => {
        if (!stopping && !term && role.role === 'leader') onRole(role);
      }, TERM_RETRY_MS);
      return;
    }
    // On an embedded registry, say who writes: `once` refuses to take over a running service's lease.
    // Etcd and Kubernetes elect a leader; only the embedded registries need a writer record (on Kubernetes it would show up as a KubeServer).
    if ((config.storage.type === 'sqlite' || config.storage.type === 'memory') && writer.heartbeat.lease) {
      await claimWriter(backend, group, writer.heartbeat.lease, runtime.replica, clock.now()).catch((error: unknown) => log.warn({err: error}, 'could not record this process as the registry writer'));
    }
    if (termFailures > 0) log.info({attempts: termFailures}, 'took over as leader after failed attempts');
    termFailures = 0;
    const scheduler = makeScheduler(writer);
    const begun: Term = {writer, scheduler};
    if (config.storage.type === 'kubernetes') {
      // DiscoveryConfig matchers are applied before the first cycle, which must not deregister their clusters.
      const {startDiscoveryConfigs} = await import('./kube-dynamic.ts');
      begun.dynamic = await startDiscoveryConfigs({runtime, clock, log, signal: priming.signal, runCycle: () => new Promise<CycleReport>((resolve) => {
        waiters.push(resolve);
        scheduler.trigger();
      })});
    }
    term = begun;
    scheduler.start();
    begun.dynamic?.start();
  };
  const endTerm = async (graceMs: number, deregister: boolean): Promise<void> => {
    const ending = term;
    term = undefined;
    if (!ending) return;
    ending.dynamic?.stop();
    await ending.scheduler.stop(graceMs);
    if (config.storage.type === 'sqlite' || config.storage.type === 'memory') await releaseWriter(runtime.backend, group).catch(() => undefined);
    await ending.writer.heartbeat.stop({deregister}).catch((error: unknown) => log.warn({err: error}, 'heartbeat did not stop cleanly'));
  };
  const onRole = (next: Role): void => {
    role = next;
    metrics.setLeader(next.role === 'leader');
    log.info({role: next.role, ...(next.role === 'follower' && next.leader ? {leader: next.leader} : {})}, next.role === 'leader' ? 'leading discovery group' : 'following');
    transitions = transitions
      .then(async () => {
        if (stopping) return;
        // A deposed leader stops at once: its writes would be fenced anyway.
        if (next.role === 'leader') await beginTerm(next.backend);
        else await endTerm(0, false);
      })
      .catch((error: unknown) => log.error({err: error}, 'could not change role'));
  };

  const readiness = async (): Promise<Readiness> => {
    let pingFailed = false;
    try {
      await runtime.backend.ping();
      // Reachable again after failed reads: re-list now rather than stay degraded until the next resync.
      if (registryHealth.faults().some((f) => f.operation === 'read')) await cache.resync();
    } catch (error) {
      pingFailed = true;
      registryHealth.failed('read', error);
    }
    const fault = registryHealth.faults()[0];
    if (pingFailed || fault) {
      // Only the reason class here: /readyz is unauthenticated; the error text is in /v1/status and the log.
      const what = fault ? `registry ${fault.operation}s failing (${fault.reason})` : `registry backend ${runtime.backend.name} unreachable`;
      // After a good start, serve the cached inventory and say so rather than drop out of the load balancer.
      // A first listing that succeeded is enough: the backend worked, and what it gave is served.
      return cache.synced
        ? {ready: true, status: 'degraded', reason: `${what}; serving the last known inventory`}
        : {ready: false, status: 'not_ready', reason: what};
    }
    if (role.role === 'follower') return inventory.synced ? {ready: true, status: 'ready'} : {ready: false, status: 'not_ready', reason: 'the registry has not been read yet'};
    if (!firstCycleDone) return {ready: false, status: 'not_ready', reason: 'the first discovery cycle has not completed yet'};
    // Up and serving, but not discovering anything (e.g. no cloud credentials): say so, stay in rotation.
    const idle = noSourceSucceeded(status.sources());
    if (idle) return {ready: true, status: 'degraded', reason: idle};
    return {ready: true, status: 'ready'};
  };

  // Read now: tokens are registered for redaction before any message could echo one, and a missing file fails start.
  if (config.http.auth?.token_file) await readTokenFile(config.http.auth.token_file);
  const auth = createAuthenticator({
    clock,
    onTokenFileChange: (error) =>
      error
        ? log.error({event: 'token_file_unreadable', file: config.http.auth?.token_file, err: error}, 'http.auth.token_file cannot be read; bearer tokens from it are refused (401) until it is back')
        : log.info({event: 'token_file_readable', file: config.http.auth?.token_file}, 'http.auth.token_file is readable again'),
    ...(config.http.auth?.token_file ? {tokenFile: config.http.auth.token_file} : {}),
    ...(config.http.auth?.allowed_service_accounts ? {allowedServiceAccounts: config.http.auth.allowed_service_accounts} : {}),
    ...(await tokenReviewerFor(options)),
    ...clusterReviewFor({config, inventory, clock, env: options.io.env, ...(aks ? {aks: {token: async (access) => {
      if (access.kind !== 'aks') throw new Error(`expected AKS access, got ${access.kind}`);
      return aks.tokenSource(access);
    }}} : {}), ...(options.clusterCredential ? {credential: options.clusterCredential} : {})}),
  });

  // Error texts in the status come from clouds and backends: redacted like the log.
  const statusBody = (): unknown => redact(statusFields());
  const statusFields = (): unknown => ({
    summary: summaryLine({role: role.role, ...(role.role === 'follower' && role.leader ? {leader: role.leader} : {}), clusters: inventory.list().length, sources: status.sources(), ...(status.lastCycle ? {lastCycle: status.lastCycle} : {})}),
    discovery_group: group,
    version: VERSION,
    replica: runtime.replica,
    host_id: runtime.hostId,
    role: role.role,
    ...(role.role === 'follower' && role.leader ? {leader: role.leader} : {}),
    backend: {
      type: runtime.backend.name,
      synced: cache.synced,
      ...(cache.lastError ? {error: cache.lastError} : {}),
      faults: registryHealth.faults(),
    },
    inventory: {
      count: cache.list().length,
      // Stale: reads are failing and this is the last inventory read, served as it was.
      stale: cache.staleSince !== undefined,
      ...(cache.staleSince !== undefined ? {stale_since: new Date(cache.staleSince).toISOString()} : {}),
      ...(cache.unreadable > 0 ? {unreadable_entries: cache.unreadable} : {}),
    },
    last_cycle: status.lastCycle ?? null,
    last_success: status.lastSuccess ?? null,
    next_cycle: term?.scheduler.nextDue ? new Date(term.scheduler.nextDue).toISOString() : null,
    cycle_running: term?.scheduler.busy ?? false,
    sources: status.sources(),
  });

  const trigger = (): boolean => {
    if (!term) return false;
    term.scheduler.trigger();
    return true;
  };

  const leadership = createLeadership({
    backend: runtime.backend,
    storageType: config.storage.type,
    group,
    replica: runtime.replica,
    clock,
    logger: log,
    ...(config.storage.type === 'etcd' || config.storage.type === 'kubernetes' ? {sessionTtlMs: config.storage.session_ttl} : {}),
    leaderElection: config.leader_election,
  });

  let http: HttpServer | undefined;
  let metricsHttp: HttpServer | undefined;
  try {
    http = await startHttpServer({
      listenAddr: options.listenAddr ?? config.http.listen_addr,
      inventory,
      readiness,
      status: statusBody,
      metrics: () => metrics.render(),
      trigger: () => (trigger() ? {accepted: true} : {accepted: false, reason: 'this replica does not lead its discovery group; send the request to the leader'}),
      ...(auth ? {auth} : {}),
      logger: log,
      watch: {maxWatchers: config.http.watch.max_watchers, maxBufferedBytes: config.http.watch.max_buffered_bytes},
    });
    if (config.metrics.listen_addr) {
      metricsHttp = await startHttpServer({listenAddr: config.metrics.listen_addr, inventory, readiness, status: () => ({}), metrics: () => metrics.render(), logger: log, metricsOnly: true});
    }
  } catch (error) {
    await http?.close();
    await inventory.stop();
    await runtime.close();
    throw error;
  }
  const api = http;
  log.info({url: api.url, discovery_group: group, backend: runtime.backend.name, entries: inventory.list().length}, `kube-discovery ${VERSION} serving on ${api.url}`);
  // `enabled: false` makes a read-only replica: it serves the registry and never writes.
  if (config.discovery_service.enabled) await leadership.start(onRole);
  else log.info({discovery_group: group}, 'discovery_service.enabled is false: serving the registry only, running no cycles');

  return {
    url: api.url,
    runtime,
    metrics,
    inventory,
    role: () => role.role,
    trigger,
    nextCycle: () => new Promise((resolve) => waiters.push(resolve)),
    async stop({deregister, graceMs}) {
      log.info({deregister}, 'stopping');
      stopping = true;
      priming.abort();
      await transitions;
      await endTerm(graceMs ?? 10_000, deregister);
      await leadership.stop().catch((error: unknown) => log.warn({err: error}, 'could not resign leadership'));
      dynamic.stop();
      accessSetup.close();
      clearTimeout(inventoryRecount);
      await api.close();
      await metricsHttp?.close();
      await inventory.stop();
      await runtime.close();
      log.info('stopped');
    },
  };
}

/** Re-puts every entry of the group under this writer's lease; returns how many were written. */
async function reannounce(writer: Writer): Promise<number> {
  const current = await writer.registrar.current();
  const queue = new PQueue({concurrency: REANNOUNCE_CONCURRENCY});
  let moved = 0;
  await Promise.all(
    current.map((server) =>
      queue.add(async () => {
        const stored = await writer.heartbeat.announce(server);
        if (stored.metadata.revision !== server.metadata.revision) moved++;
      }),
    ),
  );
  return moved;
}

async function tokenReviewerFor(options: ServiceOptions): Promise<{tokenReview?: TokenReviewer}> {
  if (options.tokenReviewer) return {tokenReview: options.tokenReviewer};
  if (!options.config.http.auth?.allowed_service_accounts?.length) return {};
  const reviewer = await podTokenReviewer(options.io.env);
  return reviewer ? {tokenReview: reviewer} : {};
}

/** Says plainly when discovery cannot run at all for lack of credentials, instead of only failing sources. */
function warnIfNoCredentials(log: Logger, report: CycleReport): void {
  const aws = report.sources.filter((s) => s.cloud === 'AWS');
  if (aws.length > 0 && aws.every((s) => !s.ok && NO_CREDENTIALS.test(`${s.error?.code} ${s.error?.message}`))) {
    log.warn(
      {event: 'no_credentials', cloud: 'AWS'},
      'no AWS credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or run with an IAM role (IRSA, EKS Pod Identity, instance profile). The service keeps serving the registry and retries every cycle.',
    );
  }
  const azure = report.sources.filter((s) => s.cloud === 'Azure');
  const plain = azure[0]?.error?.message;
  if (plain && azure.every((s) => !s.ok && s.error?.message.startsWith('no Azure credentials found'))) {
    log.warn({event: 'no_credentials', cloud: 'Azure'}, `${plain}. The service keeps serving the registry and retries every cycle.`);
  }
}
