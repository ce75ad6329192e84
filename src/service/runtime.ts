/** What `once` and `start` share: opening the logger, the registry, the heartbeat and discovery for a config. */
import os from 'node:os';
import {pino} from 'pino';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {loadOrCreateHostId} from '../../heartbeats/host-id.ts';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import type {Registrar} from '../discovery/cycle.ts';
import {Discovery} from '../discovery/discovery.ts';
import {builtInClouds} from '../clouds/index.ts';
import {DiscoveryConfigSource} from './config-source.ts';
import type {RuntimeEvents} from '../discovery/events.ts';
import {mergeDiscoveryOptions, type DiscoveryOverrides} from '../discovery/options.ts';
import {SharedCredentials} from '../credentials/shared.ts';
import {createRegistrar} from '../discovery/registrar.ts';
import {createLogger, type Logger} from '../observability/logger.ts';
import {registerSecretsFromEnv} from '../observability/redact.ts';
import type {Lease, RegistryBackend} from '../registry/backend.ts';
import {createBackend} from '../registry/index.ts';
import {VERSION} from '../version.ts';
import type {CliIo} from '../cli/io.ts';

/** The replica's name: `KUBE_DISCOVERY_REPLICA`, else the pod/host name. Stable across restarts of one pod. */
export function replicaName(env: Readonly<Record<string, string | undefined>>): string {
  return env['KUBE_DISCOVERY_REPLICA'] ?? env['HOSTNAME'] ?? os.hostname();
}

/** The writing side of one leadership term: a heartbeat on one lease and the registrar over it. */
export interface Writer {
  readonly heartbeat: Heartbeat;
  readonly registrar: Registrar;
  /** The view the term writes through (fenced while leading on etcd or a Lease): access set-up markers go there too. */
  readonly backend: RegistryBackend;
}

/** Everything a running discovery needs, opened from a config. */
export interface Runtime {
  readonly config: Config;
  readonly logger: Logger;
  readonly backend: RegistryBackend;
  /** Discovery for the current matchers; replaced by `reconfigure`. */
  readonly discovery: Discovery;
  readonly hostId: string;
  readonly replica: string;
  /** Credentials built once and shared by discovery, probes and token reviews of discovered clusters. */
  readonly credentials: SharedCredentials;
  /** What discovery, heartbeats and the backend report to (the service's metrics, status and logs). */
  readonly events: RuntimeEvents;
  /** Starts a heartbeat writing through `backend` (a fenced view while leading on etcd). */
  openWriter(backend?: RegistryBackend): Promise<Writer>;
  /** Rebuilds discovery for new matchers (DiscoveryConfig resources); the next cycle uses them. */
  reconfigure(next: Config): void;
  /** `storage: kubernetes`: the DiscoveryConfig list as a source of each cycle (failed while the leader cannot list them). */
  readonly discoveryConfigs?: DiscoveryConfigSource;
  /** Closes the backend (writers must be stopped first). */
  close(): Promise<void>;
}

/** Options of openRuntime. */
export interface RuntimeOptions {
  readonly clock: Clock;
  /** `stderr` keeps stdout free for a command's report. */
  readonly logTo: 'stdout' | 'stderr';
  readonly logger?: Logger;
  /** Set on top of what the runtime builds, field by field (see mergeDiscoveryOptions). */
  readonly discovery?: DiscoveryOverrides;
  readonly backend?: RegistryBackend;
  /** Everything the runtime reports, created once by the caller; default none. */
  readonly events?: RuntimeEvents;
  /** The inventory's parsed copy of an entry at a revision, which heartbeats share instead of keeping their own. */
  readonly storedDocument?: (name: string, revision: string) => KubeServer | undefined;
  /** Whether the inventory's copy of an entry hangs on a lease (undefined: no copy), so heartbeats see entries another writer moved. */
  readonly storedOnLease?: (name: string, lease: string) => boolean | undefined;
}

/** Whether the log stream is a terminal: then `start` (stdout) and `once` (stderr) both print human-readable lines. */
export function logsToTerminal(io: CliIo, logTo: 'stdout' | 'stderr'): boolean {
  return logTo === 'stdout' ? io.isTty : (io.isStderrTty ?? false);
}

/** Opens logger, backend, host id and discovery for a config. */
export async function openRuntime(config: Config, io: CliIo, options: RuntimeOptions): Promise<Runtime> {
  const logger =
    options.logger ??
    createLogger({
      level: config.log.level,
      format: config.log.format,
      isTty: logsToTerminal(io, options.logTo),
      ...(options.logTo === 'stderr' ? {destination: pino.destination(2)} : {}),
    });
  registerSecretsFromEnv(io.env);
  const events = options.events ?? {};
  const backendFailed = events.backendFailed?.bind(events);
  const backend = options.backend ?? (await createBackend(config.storage, {clock: options.clock, ...(backendFailed ? {onError: backendFailed} : {})}));
  try {
    const hostname = os.hostname();
    const replica = replicaName(io.env);
    const hostId = await loadOrCreateHostId(backend, replica);
    const group = config.discovery_service.discovery_group;
    const credentials = sharedCredentials(config, io, options, events);
    const discoveryConfigs = config.storage.type === 'kubernetes' ? new DiscoveryConfigSource(options.discovery?.clouds ?? builtInClouds) : undefined;
    const makeDiscovery = (forConfig: Config): Discovery => {
      const merged = mergeDiscoveryOptions({events, credentials, azure: {logger}}, options.discovery);
      // The DiscoveryConfig source outlives reconfigurations: it is planned into every cycle.
      return new Discovery({config: forConfig, clock: options.clock, ...merged, ...(discoveryConfigs ? {planners: [discoveryConfigs, ...(merged.planners ?? [])]} : {})});
    };
    let discovery = makeDiscovery(config);
    return {
      config,
      logger,
      backend,
      get discovery() {
        return discovery;
      },
      reconfigure(next) {
        discovery = makeDiscovery(next);
      },
      hostId,
      replica,
      credentials,
      ...(discoveryConfigs ? {discoveryConfigs} : {}),
      events,
      async openWriter(view = backend) {
        const heartbeat = new Heartbeat({
          backend: view,
          clock: options.clock,
          group,
          ttlMs: config.heartbeat.ttl,
          ...(config.heartbeat.keepalive_interval ? {keepaliveIntervalMs: config.heartbeat.keepalive_interval} : {}),
          hostId,
          hostname,
          version: VERSION,
          logger,
          ...(events.heartbeatFailed ? {onFailure: (kind, error) => events.heartbeatFailed?.(kind, error)} : {}),
          ...(events.heartbeatSucceeded ? {onSuccess: (kind) => events.heartbeatSucceeded?.(kind)} : {}),
          ...(events.keptAlive ? {onKeepAlive: (lease: Lease, expiresMs: number) => events.keptAlive?.(lease.id, expiresMs)} : {}),
          ...(options.storedDocument ? {stored: options.storedDocument} : {}),
          ...(options.storedOnLease ? {storedOnLease: options.storedOnLease} : {}),
        });
        await heartbeat.start();
        const registrar = createRegistrar(view, heartbeat, group, (key, error) => logger.warn({key, err: error}, 'skipping unreadable registry entry'));
        return {heartbeat, registrar, backend: view};
      },
      close: () => backend.close(),
    };
  } catch (error) {
    await backend.close();
    throw error;
  }
}

/**
 * The runtime's credentials: AWS providers on the runtime's clock and environment, and the Entra ID
 * identity of the first `azure:` matcher for probes (a test's injected credential when given).
 */
function sharedCredentials(config: Config, io: CliIo, options: RuntimeOptions, events: RuntimeEvents): SharedCredentials {
  const ds = config.discovery_service;
  const azure = options.discovery?.azure;
  const first = ds.azure[0];
  return new SharedCredentials({
    clock: options.clock,
    env: io.env,
    azure: {
      credential: azure?.credential,
      credentialFactory: azure?.credentialFactory,
      timeoutMs: azure?.policyOptions?.requestTimeoutMs ?? ds.request_timeout,
      probeIdentity: first ? {...(first.cloud ? {cloud: first.cloud} : {}), ...(first.client_id ? {clientId: first.client_id} : {})} : undefined,
    },
    ...(events.tokenMinted ? {onAksMint: () => events.tokenMinted?.('Azure')} : {}),
    ...(events.tokenFailed ? {onAksError: () => events.tokenFailed?.('Azure')} : {}),
  });
}
