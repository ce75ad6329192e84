/**
 * The long-running service: opens the registry, serves the last known inventory at once,
 * and — while it leads its discovery group — runs discovery cycles on schedule and keeps
 * entries alive. Every replica serves the HTTP API from its inventory cache.
 */
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import type {CliIo} from '../cli/io.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {DiscoveryOverrides} from '../discovery/options.ts';
import {DynamicLabels} from '../discovery/dynamic-labels.ts';
import {createAuthenticator, podTokenReviewer, readTokenFile, type TokenReviewer} from '../http/auth.ts';
import type {TokenSource} from '../probe/token-source.ts';
import {clusterReviewFor} from './cluster-auth.ts';
import {startHttpServer, type HttpServer, type Readiness} from '../http/server.ts';
import {Inventory} from '../inventory/inventory.ts';
import {RegistryHealth} from '../registry/health.ts';
import type {Logger} from '../observability/logger.ts';
import {Metrics} from '../observability/metrics.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import {cronSchedule, intervalSchedule} from '../scheduler/schedule.ts';
import {Scheduler} from '../scheduler/scheduler.ts';
import {readinessOf, statusBodyOf, type ServiceState} from '../status/service-status.ts';
import {StatusTracker} from '../status/status.ts';
import {VERSION} from '../version.ts';
import {createLeadership, type Role} from './leadership.ts';
import {createProbeStage} from './probes.ts';
import {accessSetupCounter} from '../access/setup-metrics.ts';
import {createAccessSetupSteps} from './access-setup.ts';
import {openRuntime, type Runtime, type Writer} from './runtime.ts';
import {CycleObserver} from './cycle-observer.ts';
import {LeadershipTerms} from './terms.ts';
import {ServiceEvents} from './service-events.ts';
import {idleCollector} from './idle-gc.ts';

/** Options of startService. */
export interface ServiceOptions {
  readonly config: Config;
  readonly io: CliIo;
  readonly clock: Clock;
  readonly logger?: Logger;
  readonly metrics?: Metrics;
  readonly backend?: RegistryBackend;
  /** Set on top of the runtime's discovery options, field by field (tests: fakes, fast retries). */
  readonly discovery?: DiscoveryOverrides;
  readonly tokenReviewer?: TokenReviewer;
  /** Tests: the credential for TokenReviews against discovered clusters (production mints it like probes). */
  readonly clusterCredential?: TokenSource;
  /** Overrides `http.listen_addr` (tests use port 0). */
  readonly listenAddr?: string;
  /** The full collection run after each cycle (idle-gc.ts); default the runtime's under `--expose-gc`, else none. */
  readonly gc?: () => void;
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
  // One events object for discovery, the heartbeat and the backend, handed down once; the cycle
  // observer and the inventory (built after the runtime) join it below.
  const events = new ServiceEvents({metrics, registryHealth, log: () => logger});
  // Heartbeats share the inventory's parsed documents (one copy of each), once it exists.
  let storedDocument: (name: string, revision: string) => KubeServer | undefined = () => undefined;
  let storedOnLease: (name: string, lease: string) => boolean | undefined = () => undefined;
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
    events,
    storedDocument: (name, revision) => storedDocument(name, revision),
    storedOnLease: (name, lease) => storedOnLease(name, lease),
    discovery: {
      dynamicLabels: () => dynamic.current(),
      ...options.discovery,
    },
  });
  logger = runtime.logger;
  const log = runtime.logger;
  const cycles = new CycleObserver({clock, status, metrics, log});
  events.cycles = cycles;
  await dynamic.start();

  // A cycle writes thousands of entries; recount the inventory once per burst, not once per event.
  // An inventory never read is not an empty one: until its first listing it is not counted at all,
  // or every dashboard would show 0 clusters (as /v1/kube_servers answers 503 not_synced meanwhile).
  let inventoryRecount: NodeJS.Timeout | undefined;
  let inventoryCounted = false;
  const recountInventory = (): void => {
    inventoryRecount ??= setTimeout(() => {
      inventoryRecount = undefined;
      if (!cache.synced) return;
      // The entries as stored: the count needs no sorted list of copies with their lease's expiry.
      metrics.observeInventory(Array.from(cache.storedEntries(), ([, server]) => server));
      inventoryCounted = true;
    }, 200).unref();
  };

  // Serve what the registry already holds (a restart shows the last inventory at once).
  const cache = new Inventory({
    backend: runtime.backend,
    group,
    clock,
    historySize: config.http.watch.history,
    // Another process's writes to the same SQLite file are seen only by re-listing: at least twice per
    // keepalive interval, so the heartbeat takes back what it moved (a keepalive later) well before
    // that process's lease, kept alive until it died, can lapse.
    ...(runtime.backend.name === 'sqlite' ? {resyncMs: Math.min(30_000, Math.max(1000, Math.floor(config.heartbeat.keepalive_interval / 2)))} : {}),
    onError: (error) => registryHealth.failed('read', error),
    onReadOk: () => {
      registryHealth.succeeded('read');
      // The first listing may change nothing (an empty registry) and so emit no event to recount on.
      if (!inventoryCounted) recountInventory();
    },
  });
  const inventory = cache;
  // Keepalives reach the inventory: readers follow the lease.
  events.inventory = cache;
  storedDocument = (name, revision) => cache.stored(name, revision);
  storedOnLease = (name, lease) => cache.storedOnLease(name, lease);
  await cache.start();
  if (inventory.synced) {
    metrics.observeInventory(inventory.list());
    inventoryCounted = true;
  }
  inventory.subscribe(recountInventory);

  // setup_access_for_arn, then setup_access_for_principal_id: named steps between registration and probes (src/service/access-setup.ts).
  const countAccessSetup = accessSetupCounter(metrics.registry);
  const accessSetup = createAccessSetupSteps({runtime, clock, logger: log, env: options.io.env, onOutcome: countAccessSetup});
  const probe = createProbeStage({
    adjustHealth: (server, health) => accessSetup.adjustHealth(server, health),
    config,
    clock,
    logger: log,
    metrics,
    env: options.io.env,
    credentials: runtime.credentials,
  });

  // Memory and SQLite deliver their own writes to the inventory synchronously, so a cycle reads the
  // group's entries from the inventory's parsed copy instead of listing and parsing every document
  // again (the largest allocation of a cycle at 10,000 entries). A shared backend (etcd) is listed.
  const localBackend = runtime.backend.name === 'memory' || runtime.backend.name === 'sqlite';
  const cycleRegistrar = (writer: Writer): Writer['registrar'] => ({
    ...writer.registrar,
    // As stored (no per-entry copy with the lease's latest expiry, which reconcile ignores).
    current: async () => (localBackend && inventory.synced && inventory.lastError === undefined ? Array.from(inventory.storedEntries(), ([, server]) => server) : writer.registrar.current()),
  });

  // The cycle's garbage is collected in the idle time after it, not by the next cycle (idle-gc.ts).
  const collectAfterCycle = idleCollector(options.gc);
  // Cycles running now: the HTTP server's memory reclaim waits for them to end (watch-reclaim.ts).
  let cyclesRunning = 0;
  const makeScheduler = (writer: Writer): Scheduler =>
    new Scheduler({
      clock,
      next: config.discovery_service.schedule ? cronSchedule(config.discovery_service.schedule) : intervalSchedule(config.discovery_service.poll_interval ?? 300_000),
      onOverrun: cycles.overrun,
      onError: cycles.failed,
      run: async (signal) => {
        cyclesRunning++;
        try {
          const report = await runtime.discovery.runCycle(cycleRegistrar(writer), signal);
          cycles.applied(report);
          // Access set-up, then probes, run after registration, inside the cycle's slot so their writes never race the next cycle.
          // Through the term's fenced view: a deposed leader's markers and records are refused like its entries.
          await accessSetup.run(report, signal, writer.backend);
          cycles.completed(report, await probe(report, writer.registrar, signal));
        } finally {
          cyclesRunning--;
        }
        collectAfterCycle();
      },
    });

  const terms = new LeadershipTerms({config, runtime, clock, log, metrics, makeScheduler, nextCycle: () => cycles.nextCycle()});

  const state: ServiceState = {
    group,
    replica: runtime.replica,
    hostId: runtime.hostId,
    backend: runtime.backend,
    inventory,
    registryHealth,
    status,
    role: () => terms.role,
    firstCycleDone: () => cycles.firstCycleDone,
    scheduler: () => terms.scheduler,
  };
  const readiness = (): Promise<Readiness> => readinessOf(state);

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
    ...clusterReviewFor({config, inventory, clock, env: options.io.env, credentials: runtime.credentials, ...(options.clusterCredential ? {credential: options.clusterCredential} : {})}),
  });

  const statusBody = (): unknown => statusBodyOf(state);

  const trigger = (): boolean => {
    const scheduler = terms.scheduler;
    if (!scheduler) return false;
    scheduler.trigger();
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
      cycleRunning: () => cyclesRunning > 0,
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
  if (config.discovery_service.enabled) await leadership.start(terms.onRole);
  else log.info({discovery_group: group}, 'discovery_service.enabled is false: serving the registry only, running no cycles');

  return {
    url: api.url,
    runtime,
    metrics,
    inventory,
    role: () => terms.role.role,
    trigger,
    nextCycle: () => cycles.nextCycle(),
    async stop({deregister, graceMs}) {
      log.info({deregister}, 'stopping');
      await terms.stop(graceMs ?? 10_000, deregister);
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

async function tokenReviewerFor(options: ServiceOptions): Promise<{tokenReview?: TokenReviewer}> {
  if (options.tokenReviewer) return {tokenReview: options.tokenReviewer};
  if (!options.config.http.auth?.allowed_service_accounts?.length) return {};
  const reviewer = await podTokenReviewer(options.io.env);
  return reviewer ? {tokenReview: reviewer} : {};
}
