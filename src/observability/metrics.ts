/**
 * Prometheus metrics of the service (design §9). The service calls these hooks; the
 * observability work fills in the prom-client implementation behind them.
 */
import {collectDefaultMetrics, Registry} from 'prom-client';
import type {KubeServer, TargetHealth} from '../../heartbeats/kube-server.ts';
import type {SourceResult} from '../core/types.ts';
import type {CycleReport} from '../discovery/cycle.ts';

/** The service's metrics registry and the hooks that feed it. */
export class Metrics {
  /** The prom-client registry served on /metrics. */
  readonly registry = new Registry();

  constructor(options: {defaultMetrics?: boolean} = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({register: this.registry});
  }

  /** A cycle finished. */
  observeCycle(_report: CycleReport): void {}
  /** A scheduled cycle started late because the previous one overran. */
  cycleOverrun(): void {}
  /** A source finished fetching. */
  observeSource(_result: SourceResult, _durationMs: number): void {}
  /** The registered inventory changed (after a cycle, or on a watch event). */
  observeInventory(_servers: readonly KubeServer[]): void {}
  /** A heartbeat write failed (after retries for announce/delete; each failed keepalive). */
  heartbeatFailure(_kind: 'announce' | 'keepalive' | 'delete'): void {}
  /** A token was minted / failed to mint. */
  tokenMinted(_cloud: 'AWS' | 'Azure'): void {}
  tokenError(_cloud: 'AWS' | 'Azure'): void {}
  /** A probe finished. */
  probeResult(_health: TargetHealth): void {}
  /** This replica became leader (true) or follower (false). */
  setLeader(_leader: boolean): void {}

  /** The /metrics body and its content type. */
  async render(): Promise<{contentType: string; body: string}> {
    return {contentType: this.registry.contentType, body: await this.registry.metrics()};
  }
}
