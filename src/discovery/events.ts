/**
 * What discovery reports while it runs, as one object: the service builds it once (metrics,
 * status, logs) and hands it down once, the way Prometheus hands `DiscovererOptions.Metrics`
 * to each discoverer, instead of threading one callback per layer. Every member is optional.
 */
import type {AwsSourcesOptions} from '../clouds/aws/sources.ts';
import type {AzureClientOptions} from '../clouds/azure/pipeline.ts';
import type {TagReadFallback} from '../clouds/aws/tag-reader.ts';
import type {SourceRef, SourceResult} from '../core/types.ts';
import type {HeartbeatFailureKind} from '../../heartbeats/heartbeat.ts';

/** An AWS SDK client discovery built (EKS, STS, tagging, Organizations, Account). */
export type AwsSdkClient = Parameters<NonNullable<AwsSourcesOptions['onClient']>>[0];

/** A pipeline policy added to every ARM client (structurally `@azure/core-rest-pipeline`'s AdditionalPolicyConfig). */
export type ArmPolicy = NonNullable<AzureClientOptions['additionalPolicies']>[number];

/** Events of one discovery: sources, SDK clients, tag reads and minted tokens. */
export interface DiscoveryEvents {
  /** A source finished (a planner that failed reports its catch-all source with 0 ms). */
  sourceDone?(result: SourceResult, durationMs: number): void;
  /** An AWS SDK client was built: observability adds its middleware once per client. */
  awsClient?(client: AwsSdkClient): void;
  /** A cycle's tag read failed and the source described every cluster instead. */
  tagReadFallback?(source: SourceRef, fallback: TagReadFallback): void;
  /** A bearer token was minted for a probe; never passed the token. */
  tokenMinted?(cloud: 'AWS' | 'Azure'): void;
  /** Minting a probe's bearer token failed. */
  tokenFailed?(cloud: 'AWS' | 'Azure'): void;
  /** Policies added to every ARM pipeline (metrics count each HTTP attempt, retries included). */
  readonly armPolicies?: readonly ArmPolicy[];
}

/** Events of a runtime: discovery's, plus its heartbeat's and its registry backend's. */
export interface RuntimeEvents extends DiscoveryEvents {
  /** A heartbeat write to the registry failed. */
  heartbeatFailed?(kind: HeartbeatFailureKind, error: unknown): void;
  /** A heartbeat write succeeded (recovery of a failing registry). */
  heartbeatSucceeded?(kind: HeartbeatFailureKind): void;
  /** A keepalive extended lease `lease` to `expiresMs`. */
  keptAlive?(lease: string, expiresMs: number): void;
  /** A background failure of the backend (purge, a deleted database file). */
  backendFailed?(error: Error): void;
}
