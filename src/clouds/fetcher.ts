/** The one contract every cloud fetcher implements. */
import type {SourceRef, SourceResult} from '../core/types.ts';

/** Lists the clusters of one source. Never throws for cloud errors: failures come back as `ok: false`. */
export interface ClusterFetcher {
  readonly source: SourceRef;
  fetch(signal: AbortSignal): Promise<SourceResult>;
}

/** Sources of one cycle: fetchers to run, and sources that already failed while being planned. */
export interface PlannedSources {
  readonly fetchers: ClusterFetcher[];
  readonly failed: SourceResult[];
}
