/**
 * The ideal cycle time of a workload, computed from the scenario and the service's concurrency
 * settings rather than measured: the latency bound (round trips on the critical path at the
 * configured concurrency) and, under rate limits, the time the token buckets need to let every
 * call through. Pure functions: the bench report shows the formula next to the number.
 */
import {accountsOf, regionsOf, type Scenario} from './scenario.ts';

/** Concurrency settings of the service (`discovery_service.concurrency`). */
export interface Concurrency {
  /** Sources fetched at once. */
  readonly sources: number;
  /** DescribeCluster calls in flight per region (one queue per region, shared by its accounts). */
  readonly perRegion: number;
}

/** A workload's bounds, in ms. */
export interface Bounds {
  /** Round trips at the configured concurrency, ignoring rate limits. */
  readonly latencyMs: number;
  /** Time the token buckets need (0 without rate limits). */
  readonly rateLimitMs: number;
  /** The larger of both: no implementation with this concurrency can be faster. */
  readonly boundMs: number;
  /** API calls of one warm cycle (ListClusters pages + DescribeCluster per cluster). */
  readonly calls: number;
  readonly formula: string;
}

/** Bounds of one warm cycle of the AWS part of `scenario`. */
export function cycleBounds(scenario: Scenario, concurrency: Concurrency): Bounds {
  const aws = scenario.aws;
  if (!aws) return {latencyMs: 0, rateLimitMs: 0, boundMs: 0, calls: 0, formula: 'no AWS part'};
  const failing = new Set(aws.fail_regions);
  const regions = regionsOf(aws).filter((r) => !failing.has(r));
  const accounts = accountsOf(aws).length;
  const n = aws.clusters_per_region;
  const latency = typeof aws.latency_ms === 'number' ? aws.latency_ms : Math.max(0, ...Object.values(aws.latency_ms));
  const pages = Math.max(1, Math.ceil(n / aws.page_size));
  const list = aws.rate_limits?.['ListClusters'] ?? aws.rate_limits?.['*'];
  const describe = aws.rate_limits?.['DescribeCluster'] ?? aws.rate_limits?.['*'];
  // Per region: each account's pages one after the other, then the region's shared describe queue.
  const regionLatency = pages * latency + Math.ceil((accounts * n) / concurrency.perRegion) * latency;
  const sources = regions.length * accounts;
  // More sources than slots: they queue; count their total critical path spread over the slots.
  const slotsLatency = sources > concurrency.sources ? (sources * (pages * latency + Math.ceil(n / concurrency.perRegion) * latency)) / concurrency.sources : 0;
  const latencyMs = Math.max(regionLatency, slotsLatency);
  const drain = (calls: number, limit: {rate_per_second: number; burst: number} | undefined): number =>
    limit ? (Math.max(0, calls - limit.burst) / limit.rate_per_second) * 1000 : 0;
  const rateLimitMs = drain(accounts * pages, list) + drain(accounts * n, describe);
  return {
    latencyMs,
    rateLimitMs,
    boundMs: Math.max(latencyMs, rateLimitMs),
    calls: sources * (pages + n),
    formula:
      `per region: ${accounts} account(s) x ${pages} ListClusters page(s) x ${latency} ms + ceil(${accounts * n} DescribeCluster / ${concurrency.perRegion} per region) x ${latency} ms` +
      `, ${regions.length} regions in parallel (${concurrency.sources} sources at once)` +
      (rateLimitMs > 0 ? `; rate limits: (calls - burst) / rate per region and operation = ${rateLimitMs.toFixed(0)} ms` : ''),
  };
}
