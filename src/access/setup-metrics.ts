/** `kube_discovery_access_setup_total{cloud, outcome}`: results of automatic access set-up, cleanup and repair. */
import {Counter, type Registry} from 'prom-client';
import {METRIC_PREFIX} from '../observability/metrics.ts';
import {SETUP_OUTCOMES, type SetupOutcome} from './setup-step.ts';

/** Registers the counter on `registry` (every outcome starts at 0) and returns the hook that feeds it (cloud AWS unless told). */
export function accessSetupCounter(registry: Registry): (outcome: SetupOutcome, cloud?: 'AWS' | 'Azure') => void {
  const counter = new Counter({
    name: `${METRIC_PREFIX}access_setup_total`,
    help: 'Automatic access set-up (setup_access_for_arn, setup_access_for_principal_id) per cluster and cycle, by outcome: configured, unchanged, cached (no call made), config_map, foreign_entry, not_ready, failed; removed / cleanup_failed after deregistration; repaired / repair_failed for leftover temporary admin associations.',
    labelNames: ['cloud', 'outcome'] as const,
    registers: [registry],
  });
  for (const cloud of ['AWS', 'Azure']) for (const outcome of SETUP_OUTCOMES) counter.inc({cloud, outcome}, 0);
  return (outcome, cloud = 'AWS') => counter.inc({cloud, outcome});
}
