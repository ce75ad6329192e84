/** The structured log lines operators grep for: one per source failure, one per cycle. */
import type {SourceResult} from '../core/types.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {Logger} from './logger.ts';

/** Logs a source outcome: one warn line per failure with cloud, account, region, operation, code and request id. */
export function logSourceResult(logger: Logger, result: SourceResult, durationMs: number): void {
  const {source} = result;
  if (!result.ok && result.error) {
    const e = result.error;
    logger.warn(
      {
        event: 'source_failed',
        source: source.id,
        cloud: source.cloud,
        account: source.account,
        region: source.region,
        operation: e.operation,
        code: e.code,
        reason: e.reason,
        request_id: e.requestId,
        duration_ms: durationMs,
      },
      `discovery source ${source.id} failed: ${e.operation}: ${e.code}: ${e.message}`,
    );
    return;
  }
  logger.debug({event: 'source_ok', source: source.id, clusters: result.clusters.length, skipped: result.skippedReason, duration_ms: durationMs}, 'source listed');
}

/** Logs the one summary line of a cycle. */
export function logCycleSummary(logger: Logger, report: CycleReport): void {
  const c = report.counts;
  const failed = report.sources.filter((s) => !s.ok).map((s) => s.id);
  const found = report.results.reduce((n, r) => n + r.clusters.length, 0);
  logger[report.result === 'success' ? 'info' : 'warn'](
    {
      event: 'cycle',
      result: report.result,
      found,
      registered: c.create,
      updated: c.update,
      deregistered: c.delete,
      unchanged: c.unchanged,
      stale: c.stale,
      skipped: c.skip,
      failed_sources: failed,
      duration_ms: report.durationMs,
    },
    `discovery cycle ${report.result}: ${found} found, ${c.create} registered, ${c.update} updated, ${c.delete} deregistered, ${c.stale} stale, ${failed.length} failed sources`,
  );
}
