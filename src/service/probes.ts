/**
 * After each cycle, probe every registered cluster and re-announce those whose health
 * changed. Registration never waits for probes, and a probe failure never deregisters.
 */
import type {KubeServerDraft, TargetHealth} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import type {Registrar} from '../discovery/cycle.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import {DISCOVERY_HEALTH_REASONS} from '../discovery/evaluate.ts';
import type {Logger} from '../observability/logger.ts';
import type {Metrics} from '../observability/metrics.ts';
import {eksTokenSource} from '../probe/eks-token-source.ts';
import {healthChanged, ProbeRunner} from '../probe/probe-runner.ts';
import {tokenSources} from '../probe/token-source.ts';
import type {SharedCredentials} from '../credentials/shared.ts';

/** Options of the probe stage. */
export interface ProbeStageOptions {
  readonly config: Config;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The runtime's credentials: probes sign with the identities discovery lists with. */
  readonly credentials: SharedCredentials;
  /** Adds what another step (access set-up) knows to a probe result before it is recorded. */
  readonly adjustHealth?: (draft: KubeServerDraft, health: TargetHealth) => TargetHealth;
}

/** Probes after a cycle; returns how many entries were re-announced with new health. */
export type ProbeStage = (report: CycleReport, registrar: Registrar, signal: AbortSignal) => Promise<number>;

/** Builds the probe stage, or a no-op when `probe.enabled` is false. */
export function createProbeStage(options: ProbeStageOptions): ProbeStage {
  const {config, clock, logger, metrics} = options;
  if (!config.probe.enabled) return async () => 0;
  const tokens = tokenSources({
    eks: eksTokenSource({clock, env: options.env, providers: options.credentials.aws, onMint: () => metrics.tokenMinted('AWS'), onError: () => metrics.tokenError('AWS')}),
    ...(options.credentials.aks ? {aks: {token: options.credentials.aks}} : {}),
  });
  const runner = new ProbeRunner({
    clock,
    concurrency: config.probe.concurrency,
    timeoutMs: config.probe.timeout,
    tokenFor: (access) => tokens.token(access),
    forgetToken: (access) => tokens.forget?.(access),
    authModeFor: (server) => server.status?.auth_mode,
    logger,
    onResult: (health) => metrics.probeResult(health),
  });
  return async (report, registrar, signal) => {
    const drafts = report.items
      .filter((i) => i.action !== 'delete' && i.action !== 'skip' && i.server)
      .map((i) => i.server as KubeServerDraft)
      // Discovery already knows these cannot be reached (no endpoint, unusable CA): nothing to probe.
      .filter((d) => !DISCOVERY_HEALTH_REASONS.has(d.status?.target_health?.reason ?? ''));
    const results = await runner.probeAll(drafts, signal);
    let changed = 0;
    for (const draft of drafts) {
      const probed = results.get(draft.metadata.name);
      const health = probed && options.adjustHealth ? options.adjustHealth(draft, probed) : probed;
      const before = draft.status?.target_health;
      if (!health || !healthChanged(before, health)) continue;
      if (signal.aborted) break;
      try {
        await registrar.announce(withHealth(draft, health));
        changed++;
      } catch (error) {
        logger.warn({kube_server: draft.metadata.name, err: error}, 'could not record probe result');
      }
    }
    return changed;
  };
}

function withHealth(draft: KubeServerDraft, health: TargetHealth): KubeServerDraft {
  return {...draft, status: {...draft.status, target_health: health}};
}
