/** What `once` and `start` share: opening the logger, the registry, the heartbeat and discovery for a config. */
import os from 'node:os';
import {pino} from 'pino';
import {Heartbeat, type HeartbeatFailureKind} from '../../heartbeats/heartbeat.ts';
import {loadOrCreateHostId} from '../../heartbeats/host-id.ts';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import type {Registrar} from '../discovery/cycle.ts';
import {Discovery, type DiscoveryOptions} from '../discovery/discovery.ts';
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
  /** Starts a heartbeat writing through `backend` (a fenced view while leading on etcd). */
  openWriter(backend?: RegistryBackend): Promise<Writer>;
  /** Rebuilds discovery for new matchers (DiscoveryConfig resources); the next cycle uses them. */
  reconfigure(next: Config): void;
  /** Closes the backend (writers must be stopped first). */
  close(): Promise<void>;
}

/** Options of openRuntime. */
export interface RuntimeOptions {
  readonly clock: Clock;
  /** `stderr` keeps stdout free for a command's report. */
  readonly logTo: 'stdout' | 'stderr';
  readonly logger?: Logger;
  readonly discovery?: Partial<DiscoveryOptions>;
  readonly backend?: RegistryBackend;
  /** Counts failed registry writes of the heartbeat. */
  readonly onHeartbeatFailure?: (kind: HeartbeatFailureKind, error: unknown) => void;
  /** A heartbeat write succeeded (recovery of a failing registry). */
  readonly onHeartbeatSuccess?: (kind: HeartbeatFailureKind) => void;
  /** A keepalive extended a lease to `expiresMs`. */
  readonly onKeepAlive?: (lease: string, expiresMs: number) => void;
  /** Background failures of the backend (purge, a deleted database file). */
  readonly onBackendError?: (error: Error) => void;
  /** The inventory's parsed copy of an entry at a revision, which heartbeats share instead of keeping their own. */
  readonly storedDocument?: (name: string, revision: string) => KubeServer | undefined;
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
  const backend =
    options.backend ?? (await createBackend(config.storage, {clock: options.clock, ...(options.onBackendError ? {onError: options.onBackendError} : {})}));
  try {
    const hostname = os.hostname();
    const replica = replicaName(io.env);
    const hostId = await loadOrCreateHostId(backend, replica);
    const group = config.discovery_service.discovery_group;
    const makeDiscovery = (forConfig: Config): Discovery => new Discovery({
      config: forConfig,
      clock: options.clock,
      hostId,
      hostname,
      version: VERSION,
      ...options.discovery,
      azure: {logger, ...options.discovery?.azure},
    });
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
          ...(options.onHeartbeatFailure ? {onFailure: options.onHeartbeatFailure} : {}),
          ...(options.onHeartbeatSuccess ? {onSuccess: options.onHeartbeatSuccess} : {}),
          ...(options.onKeepAlive ? {onKeepAlive: (lease: Lease, expiresMs: number) => options.onKeepAlive?.(lease.id, expiresMs)} : {}),
          ...(options.storedDocument ? {stored: options.storedDocument} : {}),
        });
        await heartbeat.start();
        const registrar = createRegistrar(view, heartbeat, group, (key, error) => logger.warn({key, err: error}, 'skipping unreadable registry entry'));
        return {heartbeat, registrar};
      },
      close: () => backend.close(),
    };
  } catch (error) {
    await backend.close();
    throw error;
  }
}
