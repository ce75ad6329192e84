/**
 * The metrics an operator graphs and alerts on, produced from real cycle reports (the cycle
 * runner over fetched results), and the rendered text accepted by the real `promtool check metrics`.
 */
import {beforeEach, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {compileTagMatcher} from '../../matchers/index.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {runCycle, type CycleReport, type Registrar} from '../../src/discovery/cycle.ts';
import {Metrics, sourceState} from '../../src/observability/metrics.ts';
import {eksCluster, okResult} from '../discovery/builders.ts';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerFromItem, kubeServerPrefix} from '../../heartbeats/kube-server.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {describeWithBinary, run, samples, value} from './prom-tools.ts';

const ACCOUNT = '111111111111';
const START = Date.parse('2026-03-01T12:00:00Z');

function failed(region: string, reason: 'throttled' | 'access_denied', code: string): SourceResult {
  return {
    source: eksSource(0, region, ACCOUNT),
    ok: false,
    clusters: [],
    malformed: [],
    error: {reason, code, message: `${code}: Rate exceeded for arn:aws:iam::${ACCOUNT}:role/x`, operation: 'ListClusters', requestId: 'req-1'},
  };
}

let clock: FakeClock;
let registrar: Registrar;
let backend: MemoryBackend;

/** The stored inventory, as the service reads it. */
async function stored(): Promise<KubeServer[]> {
  return (await backend.list(kubeServerPrefix('mgmt'))).map(kubeServerFromItem);
}
let metrics: Metrics;

async function cycle(results: SourceResult[]): Promise<CycleReport> {
  const report = await runCycle({
    planners: [{plan: async () => ({fetchers: results.map((r) => ({source: r.source, fetch: async () => r})), failed: []})}],
    registrar,
    clock,
    discoveryGroup: 'mgmt',
    matcherFor: () => compileTagMatcher({env: 'prod'}),
    sourceConcurrency: 4,
    evaluateContext: {staticLabels: {}},
  });
  metrics.observeCycle(report);
  return report;
}

const east = (): SourceResult =>
  okResult('us-east-1', ACCOUNT, [
    eksCluster('alpha', 'us-east-1', ACCOUNT),
    eksCluster('beta', 'us-east-1', ACCOUNT),
    eksCluster('gamma', 'us-east-1', ACCOUNT, {tags: {env: 'dev'}}),
    eksCluster('delta', 'us-east-1', ACCOUNT, {status: 'CREATING', statusOk: false}),
  ]);

async function text(): Promise<string> {
  return (await metrics.render()).body;
}

beforeEach(async () => {
  clock = new FakeClock(START);
  backend = new MemoryBackend({clock});
  const heartbeat = new Heartbeat({backend, clock, group: 'mgmt', ttlMs: 600_000, hostId: 'host-1', hostname: 'node-1', version: '0.0.0-test'});
  await heartbeat.start();
  registrar = createRegistrar(backend, heartbeat, 'mgmt');
  metrics = new Metrics({version: '1.2.3'});
});

describe('a cycle with a failing region', () => {
  it('counts the result, the failing source by cloud, region and reason, and the time of the last success', async () => {
    const report = await cycle([east(), failed('eu-west-1', 'throttled', 'ThrottlingException')]);
    expect(report.result).toBe('partial');
    const body = await text();

    expect(value(body, 'kube_discovery_cycles_total', {result: 'partial'})).toBe(1);
    expect(value(body, 'kube_discovery_cycles_total', {result: 'success'})).toBe(0);
    expect(value(body, 'kube_discovery_cycle_duration_seconds_count')).toBe(1);
    // Partial: the inventory moved on, but not every source succeeded (the same rule as /v1/status last_success).
    expect(value(body, 'kube_discovery_last_completed_cycle_timestamp_seconds')).toBe(START / 1000);
    expect(value(body, 'kube_discovery_last_successful_cycle_timestamp_seconds')).toBe(0);
    expect(value(body, 'kube_discovery_source_errors_total', {cloud: 'AWS', region: 'eu-west-1', reason: 'throttled'})).toBe(1);
    // Every reason of a seen region exists from the start, so the first error shows in rate().
    expect(value(body, 'kube_discovery_source_errors_total', {cloud: 'AWS', region: 'us-east-1', reason: 'access_denied'})).toBe(0);
    expect(value(body, 'kube_discovery_sources', {cloud: 'AWS', region: 'eu-west-1', state: 'failed'})).toBe(1);
    expect(value(body, 'kube_discovery_sources', {cloud: 'AWS', region: 'us-east-1', state: 'ok'})).toBe(1);
  });

  it('reports clusters by state and the registry writes it made', async () => {
    await cycle([east(), failed('eu-west-1', 'throttled', 'ThrottlingException')]);
    const body = await text();

    expect(value(body, 'kube_discovery_clusters', {cloud: 'AWS', region: 'us-east-1', state: 'registered'})).toBe(2);
    expect(value(body, 'kube_discovery_clusters', {state: 'filtered'})).toBe(1);
    expect(value(body, 'kube_discovery_clusters', {state: 'skipped_status'})).toBe(1);
    expect(value(body, 'kube_discovery_registry_changes_total', {action: 'create'})).toBe(2);
    expect(value(body, 'kube_discovery_registry_changes_total', {action: 'delete'})).toBe(0);
  });

  it('shows kept clusters as stale while their source fails, and a total failure moves neither last-cycle time', async () => {
    await cycle([east()]);
    await clock.advance(300_000);
    const report = await cycle([failed('us-east-1', 'access_denied', 'AccessDeniedException')]);
    expect(report.result).toBe('failure');
    const body = await text();

    expect(value(body, 'kube_discovery_clusters', {region: 'us-east-1', state: 'stale'})).toBe(2);
    expect(samples(body, 'kube_discovery_clusters', {state: 'registered'})).toEqual([]);
    expect(value(body, 'kube_discovery_cycles_total', {result: 'failure'})).toBe(1);
    expect(value(body, 'kube_discovery_last_successful_cycle_timestamp_seconds')).toBe(START / 1000);
    expect(value(body, 'kube_discovery_last_completed_cycle_timestamp_seconds')).toBe(START / 1000);
    expect(value(body, 'kube_discovery_source_errors_total', {region: 'us-east-1', reason: 'access_denied'})).toBe(1);
  });

  it('never puts account ids, cluster names or error messages into labels', async () => {
    await cycle([east(), failed('eu-west-1', 'throttled', 'ThrottlingException')]);
    metrics.observeInventory(await stored());
    metrics.probeResult({status: 'unhealthy', reason: 'Get "https://alpha.example": dial tcp: connection refused'});
    const body = await text();

    expect(body).not.toContain(ACCOUNT);
    for (const name of ['alpha', 'beta', 'gamma', 'delta', 'Rate exceeded', 'dial tcp']) expect(body).not.toContain(name);
    expect(value(body, 'kube_discovery_probes_total', {health: 'unhealthy', reason: 'other'})).toBe(1);
  });

  it('agrees with /v1/status on source states', async () => {
    const report = await cycle([east(), failed('eu-west-1', 'throttled', 'ThrottlingException')]);
    expect(report.sources.map((s) => [s.id, sourceState(s), s.error?.reason])).toEqual([
      [`eks:eu-west-1:${ACCOUNT}`, 'failed', 'throttled'],
      [`eks:us-east-1:${ACCOUNT}`, 'ok', undefined],
    ]);
  });
});

describe('inventory, heartbeats, tokens, probes, leadership', () => {
  it('takes registered, stale and health counts from the stored inventory', async () => {
    await cycle([east()]);
    const [alpha, beta] = await stored();
    if (!alpha || !beta) throw new Error('expected two registered clusters');
    metrics.observeInventory([
      {...alpha, status: {...alpha.status, target_health: {status: 'healthy'}}},
      {...beta, status: {...beta.status, stale: true, target_health: {status: 'unhealthy', reason: 'forbidden'}}},
    ]);
    const body = await text();

    expect(value(body, 'kube_discovery_clusters', {region: 'us-east-1', state: 'registered'})).toBe(1);
    expect(value(body, 'kube_discovery_clusters', {region: 'us-east-1', state: 'stale'})).toBe(1);
    expect(value(body, 'kube_discovery_clusters', {state: 'filtered'})).toBe(1);
    expect(value(body, 'kube_discovery_clusters_by_health', {cloud: 'AWS', health: 'healthy'})).toBe(1);
    expect(value(body, 'kube_discovery_clusters_by_health', {cloud: 'AWS', health: 'unhealthy'})).toBe(1);
    expect(value(body, 'kube_discovery_clusters_by_health', {cloud: 'Azure', health: 'unknown'})).toBe(0);
  });

  it('counts heartbeat failures, tokens, probes, overruns, unrunnable cycles and the leader flag', async () => {
    metrics.heartbeatFailure('keepalive');
    metrics.heartbeatFailure('keepalive');
    metrics.tokenMinted('AWS');
    metrics.tokenError('Azure');
    metrics.probeResult({status: 'healthy'});
    metrics.probeResult({status: 'unhealthy', reason: 'unauthorized'});
    metrics.cycleOverrun();
    metrics.cycleError();
    metrics.setLeader(true);
    const body = await text();

    expect(value(body, 'kube_discovery_heartbeat_failures_total', {kind: 'keepalive'})).toBe(2);
    expect(value(body, 'kube_discovery_heartbeat_failures_total', {kind: 'announce'})).toBe(0);
    expect(value(body, 'kube_discovery_tokens_minted_total', {cloud: 'AWS'})).toBe(1);
    expect(value(body, 'kube_discovery_token_errors_total', {cloud: 'Azure'})).toBe(1);
    expect(value(body, 'kube_discovery_probes_total', {health: 'healthy', reason: 'none'})).toBe(1);
    expect(value(body, 'kube_discovery_probes_total', {health: 'unhealthy', reason: 'unauthorized'})).toBe(1);
    expect(value(body, 'kube_discovery_cycle_overruns_total')).toBe(1);
    expect(value(body, 'kube_discovery_cycles_total', {result: 'error'})).toBe(1);
    expect(value(body, 'kube_discovery_leader')).toBe(1);
    expect(value(body, 'kube_discovery_build_info', {version: '1.2.3'})).toBe(1);
    expect(value(body, 'process_start_time_seconds')).toBeGreaterThan(0);
  });

  it('forgets the last cycle’s source states when leadership is lost', async () => {
    metrics.setLeader(true);
    await cycle([failed('eu-west-1', 'throttled', 'ThrottlingException')]);
    metrics.setLeader(false);
    const body = await text();

    expect(samples(body, 'kube_discovery_sources')).toEqual([]);
    expect(value(body, 'kube_discovery_leader')).toBe(0);
    // Counters keep their history.
    expect(value(body, 'kube_discovery_source_errors_total', {region: 'eu-west-1', reason: 'throttled'})).toBe(1);
  });
});

describeWithBinary('promtool', 'promtool check metrics', (promtool) => {
  it('reports no problems with everything the service exposes', async () => {
    await cycle([east(), failed('eu-west-1', 'throttled', 'ThrottlingException')]);
    metrics.observeInventory(await stored());
    metrics.observeSource(east(), 120);
    metrics.cloudApiCall({service: 'eks', operation: 'ListClusters', code: 'ThrottlingException', durationSeconds: 0.05, throttled: true});
    metrics.probeResult({status: 'healthy'});
    metrics.heartbeatFailure('announce');
    metrics.tokenMinted('AWS');
    const body = await text();

    const result = await run(promtool, ['check', 'metrics'], body);
    expect(result.stdout + result.stderr).toBe('');
    expect(result.code).toBe(0);
  });
});
