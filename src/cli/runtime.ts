/** What `once` and `start` share: loading the config, opening the registry, the heartbeat and discovery. */
import os from 'node:os';
import {pino} from 'pino';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {loadOrCreateHostId} from '../../heartbeats/host-id.ts';
import type {Clock} from '../core/clock.ts';
import {InputError} from '../core/errors.ts';
import {ConfigError, loadConfigFile} from '../config/load.ts';
import type {Config} from '../config/schema.ts';
import type {Registrar} from '../discovery/cycle.ts';
import {Discovery, type DiscoveryOptions} from '../discovery/discovery.ts';
import {createRegistrar} from '../discovery/registrar.ts';
import {createLogger, type Logger} from '../observability/logger.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import {createBackend} from '../registry/index.ts';
import {VERSION} from '../version.ts';
import type {CliIo} from './io.ts';

/** Prints a usage problem and returns exit code 2. */
export function usageError(io: CliIo, command: string, message: string): number {
  io.stderr(`kube-discovery ${command}: ${message}\n`);
  return 2;
}

/** Loads the config named by `-c`; prints every problem and returns 2 when it is missing or invalid. */
export async function withConfig(io: CliIo, command: string, path: string | undefined, run: (config: Config) => Promise<number>): Promise<number> {
  if (!path) return usageError(io, command, 'missing -c FILE (the config file)');
  let config: Config;
  try {
    config = await loadConfigFile(path);
  } catch (error) {
    if (error instanceof ConfigError) {
      io.stderr(`${error.message}\n`);
      return 2;
    }
    throw error;
  }
  try {
    return await run(config);
  } catch (error) {
    if (error instanceof InputError) return usageError(io, command, error.message);
    throw error;
  }
}

/** The replica's name: `KUBE_DISCOVERY_REPLICA`, else the pod/host name. Stable across restarts of one pod. */
export function replicaName(env: Readonly<Record<string, string | undefined>>): string {
  return env['KUBE_DISCOVERY_REPLICA'] ?? env['HOSTNAME'] ?? os.hostname();
}

/** Everything a running discovery needs, opened from a config. */
export interface Runtime {
  readonly config: Config;
  readonly logger: Logger;
  readonly backend: RegistryBackend;
  readonly heartbeat: Heartbeat;
  readonly discovery: Discovery;
  readonly registrar: Registrar;
  readonly hostId: string;
  close(options: {deregister: boolean}): Promise<void>;
}

/** Options of openRuntime. */
export interface RuntimeOptions {
  readonly clock: Clock;
  /** `stderr` keeps stdout free for a command's report. */
  readonly logTo: 'stdout' | 'stderr';
  readonly logger?: Logger;
  readonly discovery?: Partial<DiscoveryOptions>;
  readonly backend?: RegistryBackend;
}

/** Opens logger, backend, host id, heartbeat and discovery for a config. */
export async function openRuntime(config: Config, io: CliIo, options: RuntimeOptions): Promise<Runtime> {
  const logger =
    options.logger ??
    createLogger({
      level: config.log.level,
      format: config.log.format,
      isTty: options.logTo === 'stdout' && io.isTty,
      ...(options.logTo === 'stderr' ? {destination: pino.destination(2)} : {}),
    });
  const backend = options.backend ?? (await createBackend(config.storage, {clock: options.clock}));
  try {
    const hostname = os.hostname();
    const hostId = await loadOrCreateHostId(backend, replicaName(io.env));
    const group = config.discovery_service.discovery_group;
    const heartbeat = new Heartbeat({
      backend,
      clock: options.clock,
      group,
      ttlMs: config.heartbeat.ttl,
      ...(config.heartbeat.keepalive_interval ? {keepaliveIntervalMs: config.heartbeat.keepalive_interval} : {}),
      hostId,
      hostname,
      version: VERSION,
      logger,
    });
    await heartbeat.start();
    const discovery = new Discovery({config, clock: options.clock, hostId, hostname, version: VERSION, ...options.discovery});
    const registrar = createRegistrar(backend, heartbeat, group, (key, error) => logger.warn({key, err: error}, 'skipping unreadable registry entry'));
    return {
      config,
      logger,
      backend,
      heartbeat,
      discovery,
      registrar,
      hostId,
      async close({deregister}) {
        await heartbeat.stop({deregister});
        await backend.close();
      },
    };
  } catch (error) {
    await backend.close();
    throw error;
  }
}
