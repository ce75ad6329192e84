/**
 * The one events object of a service: everything discovery, the heartbeat and the registry
 * backend report goes to the metrics, the registry health, the cycle observer or the log.
 * Built once in startService and handed down once (runtime → discovery → sources).
 */
import type {AwsSdkClient, RuntimeEvents} from '../discovery/events.ts';
import type {HeartbeatFailureKind} from '../../heartbeats/heartbeat.ts';
import type {TagReadFallback} from '../clouds/aws/tag-reader.ts';
import type {SourceRef, SourceResult} from '../core/types.ts';
import type {Inventory} from '../inventory/inventory.ts';
import {instrumentAwsClient} from '../observability/aws-middleware.ts';
import {azureMetricsPolicies} from '../observability/azure-policy.ts';
import type {Logger} from '../observability/logger.ts';
import type {Metrics} from '../observability/metrics.ts';
import type {RegistryHealth} from '../registry/health.ts';
import type {CycleObserver} from './cycle-observer.ts';

/** What the events go to from the start. */
export interface ServiceEventsOptions {
  readonly metrics: Metrics;
  readonly registryHealth: RegistryHealth;
  /** The service's logger, once the runtime has opened it. */
  readonly log: () => Logger | undefined;
}

/** The service's RuntimeEvents; the cycle observer and the inventory join once they exist (after the runtime opened). */
export class ServiceEvents implements RuntimeEvents {
  /** Receives each source's outcome (status, metrics, log). */
  cycles: CycleObserver | undefined;
  /** Follows keepalives, so readers see the lease's new expiry. */
  inventory: Pick<Inventory, 'leaseKeptAlive'> | undefined;
  // Every ARM pipeline counts its HTTP attempts (retries included) in the metrics.
  readonly armPolicies: RuntimeEvents['armPolicies'];
  readonly #metrics: Metrics;
  readonly #health: RegistryHealth;
  readonly #log: () => Logger | undefined;

  constructor(options: ServiceEventsOptions) {
    this.#metrics = options.metrics;
    this.#health = options.registryHealth;
    this.#log = options.log;
    this.armPolicies = azureMetricsPolicies(options.metrics);
  }

  /** A source finished. */
  sourceDone(result: SourceResult, durationMs: number): void {
    this.cycles?.source(result, durationMs);
  }

  /** Every AWS SDK client counts its HTTP attempts (retries included) in the metrics. */
  awsClient(client: AwsSdkClient): void {
    instrumentAwsClient(client, this.#metrics);
  }

  /** Counted; logged once per source when denied (a standing permission gap), every time otherwise. */
  tagReadFallback(source: SourceRef, fallback: TagReadFallback): void {
    this.#metrics.tagReadFallback(source.region, fallback.reason);
    if (fallback.reason === 'access_denied' && !fallback.firstDenial) return;
    this.#log()?.warn(
      {source: source.id, region: source.region, operation: 'GetResources', code: fallback.code, reason: fallback.reason, error: fallback.message},
      fallback.reason === 'access_denied'
        ? 'tag reads denied (tag:GetResources): describing every cluster each cycle; grant tag:GetResources for incremental discovery'
        : 'tag read failed: described every cluster this cycle',
    );
  }

  /** A probe token was minted. */
  tokenMinted(cloud: 'AWS' | 'Azure'): void {
    this.#metrics.tokenMinted(cloud);
  }

  /** A probe token could not be minted. */
  tokenFailed(cloud: 'AWS' | 'Azure'): void {
    this.#metrics.tokenError(cloud);
  }

  /** Counted, and the registry health turns failing. */
  heartbeatFailed(kind: HeartbeatFailureKind, error: unknown): void {
    this.#metrics.heartbeatFailure(kind);
    this.#health.failed('write', error);
  }

  /** The registry health recovers. */
  heartbeatSucceeded(): void {
    this.#health.succeeded('write');
  }

  /** The inventory follows the lease. */
  keptAlive(lease: string, expiresMs: number): void {
    this.inventory?.leaseKeptAlive(lease, expiresMs);
  }

  /** A background failure of the backend fails registry writes' health. */
  backendFailed(error: Error): void {
    this.#health.failed('write', error);
  }
}
