/** Starts the DiscoveryConfig controller of a leader on `storage: kubernetes` (loaded only there). */
import type {Clock} from '../core/clock.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {Logger} from '../observability/logger.ts';
import type {KubernetesBackend} from '../registry/kubernetes.ts';
import {DiscoveryConfigController} from './discovery-configs.ts';
import type {Runtime} from './runtime.ts';

/** What the service hands over. */
export interface DynamicOptions {
  readonly runtime: Runtime;
  readonly clock: Clock;
  readonly log: Logger;
  readonly runCycle: () => Promise<CycleReport>;
  /** Aborts the first list's retries (the service stops). */
  readonly signal?: AbortSignal;
}

/**
 * Reconciles DiscoveryConfigs in the registry's namespace. Call before the scheduler starts and
 * `start()` the result after: the first cycle then already has their matchers.
 */
export async function startDiscoveryConfigs(options: DynamicOptions): Promise<{start(): void; stop(): void}> {
  const backend = options.runtime.backend as KubernetesBackend;
  const controller = new DiscoveryConfigController({
    client: backend.client,
    namespace: backend.namespace,
    base: options.runtime.config,
    clock: options.clock,
    logger: options.log,
    apply: (config) => options.runtime.reconfigure(config),
    runCycle: options.runCycle,
    ...(options.runtime.discoveryConfigs ? {source: options.runtime.discoveryConfigs} : {}),
  });
  // A failing first list fails the runtime's DiscoveryConfig source, which keeps every entry until a list succeeds.
  await controller.prime(options.signal);
  return controller;
}
