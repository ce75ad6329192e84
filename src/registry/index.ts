/** Backend registration: `storage.type` picks a factory; an unknown type fails with the list of known ones. */
import type {Clock} from '../core/clock.ts';
import {InputError} from '../core/errors.ts';
import type {RegistryBackend} from './backend.ts';
import type {EtcdStorageConfig, KubernetesStorageConfig, SqliteStorageConfig} from '../config/schema.ts';
import {MemoryBackend} from './memory.ts';
import {SqliteBackend} from './sqlite.ts';

/** What every backend factory gets besides its config. */
export interface BackendDeps {
  readonly clock: Clock;
  /** Background failures (no call to throw them to), for the service's registry health. */
  readonly onError?: (error: Error) => void;
}

/** Builds one backend from its `storage` config section. */
export type BackendFactory<C extends {readonly type: string}> = (config: C, deps: BackendDeps) => Promise<RegistryBackend>;

/** `storage: {type: memory}` (structural: the config schema owns the full type). */
export interface MemoryStorageConfig {
  readonly type: 'memory';
}

/** The registered backends, explicitly: nothing registers itself on import. */
export const backends = {
  memory: (_config: MemoryStorageConfig, deps: BackendDeps) => Promise.resolve(new MemoryBackend({clock: deps.clock})),
  // The service's own file: leases that lapsed while it was down get one TTL to be resumed (sqlite.ts).
  sqlite: (config: SqliteStorageConfig, deps: BackendDeps) => SqliteBackend.open({path: config.path, clock: deps.clock, graceOnOpen: true, ...(deps.onError ? {onError: deps.onError} : {})}),
  // Loaded on use: the etcd client (gRPC) costs tens of MB that embedded deployments don't need.
  etcd: async (config: EtcdStorageConfig, deps: BackendDeps) => (await import('./etcd.ts')).etcdBackendFromConfig(config, deps),
  // Loaded on use as well: @kubernetes/client-node costs ~80 MB RSS (measured, see README).
  kubernetes: async (config: KubernetesStorageConfig, deps: BackendDeps) => (await import('./kubernetes.ts')).kubernetesBackendFromConfig(config, deps),
} as const satisfies Record<string, BackendFactory<never>>;

/** Names of the registered backends (`memory`, `sqlite`, ...). */
export type BackendName = keyof typeof backends;

/** Builds the backend named by `config.type`; throws an InputError listing the known types otherwise. */
export async function createBackend(config: {readonly type: string}, deps: BackendDeps): Promise<RegistryBackend> {
  if (!Object.hasOwn(backends, config.type)) {
    throw new InputError(`unknown storage type "${config.type}"; expected one of: ${Object.keys(backends).join(', ')}`);
  }
  // The config schema validated the section for this type; the factory reads only its own keys.
  const factory = backends[config.type as BackendName] as unknown as BackendFactory<{readonly type: string}>;
  return factory(config, deps);
}
