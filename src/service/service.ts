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
import {createAuthenticator, podTokenReviewer, type TokenReviewer} from '../http/auth.ts';
import {startHttpServer, type HttpServer, type Readiness} from '../http/server.ts';
import {Inventory} from '../inventory/inventory.ts';
import {instrumentAwsClient} from '../observability/aws-middleware.ts';
import {azureMetricsPolicies} from '../observability/azure-policy.ts';
import {logCycleSummary, logSourceResult} from '../observability/log-events.ts';
import type {Logger} from '../observability/logger.ts';
import {Metrics} from '../observability/metrics.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import {cronSchedule, intervalSchedule} from '../scheduler/schedule.ts';
import {Scheduler} from '../scheduler/scheduler.ts';
import {StatusTracker} from '../status/status.ts';
import {VERSION} from '../version.ts';
import {createLeadership, type Role} from './leadership.ts';
import {createProbeStage} from './probes.ts';
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
}

/** Starts the service. */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const {config, clock} = options;
  const metrics = options.metrics ?? new Metrics();
  const status = new StatusTracker();
  const group = config.discovery_service.discovery_group;
  let logger: Logger | undefined = options.logger;
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
    onHeartbeatFailure: (kind) => metrics.heartbeatFailure(kind),
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
  const inventory = new Inventory({backend: runtime.backend, group, clock, historySize: config.http.watch.history, onError: (error) => log.warn({err: error}, 'registry read failed; serving the last known inventory')});
  await inventory.start();
  metrics.observeInventory(inventory.list());
  // A cycle writes thousands of entries; recount the inventory once per burst, not once per event.
  let inventoryRecount: NodeJS.Timeout | undefined;
  inventory.subscribe(() => {
    inventoryRecount ??= setTimeout(() => {
      inventoryRecount = undefined;
      metrics.observeInventory(inventory.list());
    }, 200).unref();
  });

  const aks = runtime.discovery.azure;
  const probe = createProbeStage({
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
  let backendEverOk = false;
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
        status.recordCycle(report);
        metrics.observeCycle(report);
        logCycleSummary(log, report);
        warnIfNoCredentials(log, report);
        firstCycleDone = true;
        // Probes run after registration, inside the cycle's slot so their writes never race the next cycle.
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
      log.error({err: error, retry_in_ms: TERM_RETRY_MS}, 'could not take over as leader; retrying');
      clock.setTimeout(() => {
        if (!stopping && !term && role.role === 'leader') onRole(role);
      }, TERM_RETRY_MS);
      return;
    }
    const scheduler = makeScheduler(writer);
    term = {writer, scheduler};
    scheduler.start();
  };
  const endTerm = async (graceMs: number, deregister: boolean): Promise<void> => {
    const ending = term;
    term = undefined;
    if (!ending) return;
    await ending.scheduler.stop(graceMs);
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
    try {
      await runtime.backend.ping();
      backendEverOk = true;
    } catch (error) {
      const reason = `registry backend ${runtime.backend.name} unreachable: ${(error as Error).message}`;
      // After a good start, serve the cached inventory and say so rather than drop out of the load balancer.
      return inventory.synced && backendEverOk ? {ready: true, status: 'degraded', reason: `${reason}; serving the last known inventory`} : {ready: false, status: 'not_ready', reason};
    }
    if (role.role === 'follower') return inventory.synced ? {ready: true, status: 'ready'} : {ready: false, status: 'not_ready', reason: 'the registry has not been read yet'};
    if (!firstCycleDone) return {ready: false, status: 'not_ready', reason: 'the first discovery cycle has not completed yet'};
    return {ready: true, status: 'ready'};
  };

  const auth = createAuthenticator({
    clock,
    ...(config.http.auth?.token_file ? {tokenFile: config.http.auth.token_file} : {}),
    ...(config.http.auth?.allowed_service_accounts ? {allowedServiceAccounts: config.http.auth.allowed_service_accounts} : {}),
    ...(await tokenReviewerFor(options)),
  });

  const statusBody = (): unknown => ({
    discovery_group: group,
    version: VERSION,
    replica: runtime.replica,
    host_id: runtime.hostId,
    role: role.role,
    ...(role.role === 'follower' && role.leader ? {leader: role.leader} : {}),
    backend: {type: runtime.backend.name, synced: inventory.synced, ...(inventory.lastError ? {error: inventory.lastError} : {})},
    inventory: {count: inventory.list().length},
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
    ...(config.storage.type === 'etcd' ? {sessionTtlMs: config.storage.session_ttl} : {}),
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
      await transitions;
      await endTerm(graceMs ?? 10_000, deregister);
      await leadership.stop().catch((error: unknown) => log.warn({err: error}, 'could not resign leadership'));
      dynamic.stop();
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
}
