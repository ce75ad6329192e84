/** The one contract every cloud fetcher implements. */
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import type {SourceRef, SourceResult} from '../core/types.ts';

/** Lists the clusters of one source. Never throws for cloud errors: failures come back as `ok: false`. */
export interface ClusterFetcher {
  readonly source: SourceRef;
  fetch(signal: AbortSignal): Promise<SourceResult>;
  /**
   * When its listing began (the cycle's clock), for a listing started before the plan handed it
   * on (early-listings.ts): the source's duration counts from then, not from when the cycle asked.
   */
  readonly startedAt?: () => number | undefined;
}

/** Sources of one cycle: fetchers to run, and sources that already failed while being planned. */
export interface PlannedSources {
  readonly fetchers: ClusterFetcher[];
  readonly failed: SourceResult[];
}

/**
 * What a cycle lends its planners. A walk (organization, management groups) or a region list that
 * lacks a member cannot tell "moved while it ran" from "gone" on its own; the registry says what
 * the previous walk left behind, also after a restart, a leader change or in `once`.
 */
export interface PlanContext {
  /** This discovery group's registered entries; read from the registry at most once a cycle, and only when asked. */
  registered(): Promise<readonly KubeServer[]>;
  /** The cycle's signal (deadline, shutdown): listings a planner starts before its plan is final stop with it. */
  readonly signal?: AbortSignal;
  /** The cycle's bound on sources in flight, which listings a planner starts early stay within. */
  readonly sourceConcurrency?: number;
  /** The cycle's clock, which a listing started early records its start on. */
  readonly now: () => number;
}
