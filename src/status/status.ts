/** Per-source health across cycles, served by /v1/status (same ids and reasons as the metrics). */
import type {SourceFailure, SourceResult} from '../core/types.ts';
import type {CycleReport, CycleResult} from '../discovery/cycle.ts';

/** What /v1/status says about one source. */
export interface SourceStatus {
  readonly id: string;
  readonly cloud: string;
  readonly region: string;
  readonly account: string;
  readonly ok: boolean;
  /** RFC 3339 of the last successful listing. */
  readonly last_success?: string;
  readonly last_error?: SourceFailure & {readonly at: string};
  /** Clusters listed by the last successful listing. */
  readonly clusters: number;
  /** Entries kept registered only because this source is failing. */
  readonly stale: boolean;
  readonly consecutive_failures: number;
  readonly skipped?: string;
}

/** The last cycle, summarised. */
export interface CycleStatus {
  readonly started_at: string;
  readonly duration_ms: number;
  readonly result: CycleResult;
  readonly counts: CycleReport['counts'];
  /** Sources were cut off at the cycle deadline (an overrun). */
  readonly deadline_exceeded?: boolean;
}

/** Tracks source health and cycle outcomes. */
export class StatusTracker {
  readonly #sources = new Map<string, SourceStatus>();
  #lastCycle: CycleStatus | undefined;
  #lastSuccess: string | undefined;

  /** Records one source's outcome at `now`. */
  recordSource(result: SourceResult, now: number): void {
    const at = new Date(now).toISOString();
    const prev = this.#sources.get(result.source.id);
    const base = {id: result.source.id, cloud: result.source.cloud, region: result.source.region, account: result.source.account};
    if (result.ok) {
      this.#sources.set(result.source.id, {
        ...base,
        ok: true,
        last_success: at,
        ...(prev?.last_error ? {last_error: prev.last_error} : {}),
        clusters: result.clusters.length,
        stale: false,
        consecutive_failures: 0,
        ...(result.skippedReason ? {skipped: result.skippedReason} : {}),
      });
      return;
    }
    this.#sources.set(result.source.id, {
      ...base,
      ok: false,
      ...(prev?.last_success ? {last_success: prev.last_success} : {}),
      ...(result.error ? {last_error: {...result.error, at}} : {}),
      clusters: prev?.clusters ?? 0,
      stale: true,
      consecutive_failures: (prev?.consecutive_failures ?? 0) + 1,
    });
  }

  /** Records a finished cycle; sources not seen in it (config changed) are forgotten. */
  recordCycle(report: CycleReport): void {
    const seen = new Set(report.sources.map((s) => s.id));
    for (const id of this.#sources.keys()) if (!seen.has(id)) this.#sources.delete(id);
    this.#lastCycle = {started_at: new Date(report.startedAt).toISOString(), duration_ms: report.durationMs, result: report.result, counts: report.counts, ...(report.deadlineExceeded ? {deadline_exceeded: true} : {})};
    if (report.result === 'success') this.#lastSuccess = new Date(report.startedAt + report.durationMs).toISOString();
  }

  /** The last finished cycle, if any. */
  get lastCycle(): CycleStatus | undefined {
    return this.#lastCycle;
  }

  /** RFC 3339 end of the last fully successful cycle. */
  get lastSuccess(): string | undefined {
    return this.#lastSuccess;
  }

  /** Every known source, sorted by id. */
  sources(): SourceStatus[] {
    return [...this.#sources.values()].sort((a, b) => a.id.localeCompare(b.id));
  }
}
