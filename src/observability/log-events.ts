/** The structured log lines operators grep for: one per source failure, one per cycle. */
import {builtInClouds} from '../clouds/index.ts';
import type {Clouds} from '../clouds/cloud.ts';
import type {FailureReason, SourceResult} from '../core/types.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {Logger} from './logger.ts';

/** How many source ids / cluster names one line lists before it only counts the rest. */
const LIST_LIMIT = 20;

function capped(items: readonly string[]): {items: string[]; more?: number} {
  return items.length > LIST_LIMIT ? {items: items.slice(0, LIST_LIMIT), more: items.length - LIST_LIMIT} : {items: [...items]};
}

/**
 * Logs a source outcome: exactly one warn line per failure, with cloud, account, region,
 * operation, code, reason and request id as fields (`event: source_failed`); a debug line
 * otherwise, and one warn line listing cluster records the source could not use.
 */
export function logSourceResult(logger: Logger, result: SourceResult, durationMs: number): void {
  const {source} = result;
  const where = {source: source.id, cloud: source.cloud, account: source.account, region: source.region};
  if (!result.ok) {
    const e = result.error;
    logger.warn(
      {
        event: 'source_failed',
        ...where,
        ...(source.resourceGroup ? {resource_group: source.resourceGroup} : {}),
        operation: e?.operation ?? 'unknown',
        code: e?.code ?? 'Unknown',
        reason: e?.reason ?? 'other',
        request_id: e?.requestId ?? null,
        duration_ms: durationMs,
      },
      `discovery source ${source.id} failed: ${e ? `${e.operation}: ${e.code}: ${e.message}` : 'no error detail'}; its clusters are kept and marked stale`,
    );
    return;
  }
  if (result.malformed.length > 0) {
    const {items, more} = capped(result.malformed.map((m) => `${m.name}: ${m.reason}`));
    logger.warn(
      {event: 'source_malformed_clusters', ...where, count: result.malformed.length, clusters: items, ...(more ? {more} : {})},
      `discovery source ${source.id} returned ${result.malformed.length} unusable cluster record(s); skipped`,
    );
  }
  const unreachable = result.clusters.filter((c) => c.unreachable);
  if (unreachable.length > 0) {
    const {items, more} = capped(unreachable.map((c) => `${c.name}: ${c.unreachable?.reason ?? ''}: ${c.unreachable?.message ?? ''}`));
    logger.warn(
      {event: 'source_unreachable_clusters', ...where, count: unreachable.length, clusters: items, ...(more ? {more} : {})},
      `discovery source ${source.id} reported ${unreachable.length} cluster(s) without a usable endpoint or CA; registered as unhealthy`,
    );
  }
  if (result.skippedReason) {
    logger.debug({event: 'source_skipped', ...where, skipped: result.skippedReason, duration_ms: durationMs}, `source ${source.id} skipped: ${result.skippedReason}`);
    return;
  }
  logger.debug({event: 'source_ok', ...where, clusters: result.clusters.length, duration_ms: durationMs}, `source ${source.id} listed ${result.clusters.length} cluster(s)`);
}

/** Logs the one summary line of a cycle (info when every source succeeded, warn otherwise), then one line per renamed entry. */
export function logCycleSummary(logger: Logger, report: CycleReport): void {
  const c = report.counts;
  const failed = report.sources.filter((s) => !s.ok);
  const byReason: Partial<Record<FailureReason, number>> = {};
  for (const s of failed) {
    const reason = s.error?.reason ?? 'other';
    byReason[reason] = (byReason[reason] ?? 0) + 1;
  }
  const found = report.results.reduce((n, r) => n + r.clusters.length, 0);
  const {items: failedIds, more} = capped(failed.map((s) => s.id));
  logger[report.result === 'success' ? 'info' : 'warn'](
    {
      event: 'cycle',
      result: report.result,
      sources: report.sources.length,
      failed_sources: failedIds,
      ...(more ? {failed_sources_more: more} : {}),
      failed_by_reason: byReason,
      found,
      registered: c.create,
      updated: c.update,
      deregistered: c.delete,
      unchanged: c.unchanged,
      stale: c.stale,
      skipped: c.skip,
      apply_errors: report.applyErrors.length,
      duration_ms: report.durationMs,
    },
    `discovery cycle ${report.result}: ${found} found, ${c.create} registered, ${c.update} updated, ${c.delete} deregistered, ` +
      `${c.stale} stale, ${failed.length}/${report.sources.length} sources failed, ${report.applyErrors.length} write errors in ${report.durationMs} ms`,
  );
  for (const item of report.items) {
    if (item.renamedTo === undefined) continue;
    logger.info({event: 'rename', from: item.name, to: item.renamedTo}, `kube_server ${item.name} is now registered as ${item.renamedTo}; the old entry was removed`);
  }
}

/**
 * Says plainly when discovery cannot run at all for lack of credentials, instead of only failing
 * sources: one warn line per cloud whose every source failed with `noCredentials` (`event: no_credentials`),
 * in the cloud module's words.
 */
export function warnIfNoCredentials(log: Logger, report: CycleReport, clouds: Clouds = builtInClouds): void {
  for (const module of clouds.all) {
    const sources = report.sources.filter((s) => s.cloud === module.cloud);
    if (sources.length === 0 || !sources.every((s) => !s.ok && s.error?.noCredentials)) continue;
    const message = module.noCredentialsWarning(sources[0]?.error?.message);
    if (message !== undefined) log.warn({event: 'no_credentials', cloud: module.cloud}, message);
  }
}
