/**
 * The access set-up steps of a cycle (`setup_access_for_arn`, then `setup_access_for_principal_id`),
 * built once from a runtime: `start` runs them in every cycle's slot and `once` after its one cycle,
 * so both set up, clean up and repair the same way.
 */
import type {TargetHealth, KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {createAksAccessSetupStep, lazyRoleAssignmentsApis} from '../access/aks-setup-step.ts';
import {createAccessSetupStep, type SetupLogger, type SetupOutcome} from '../access/setup-step.ts';
import {azureCloud} from '../clouds/azure/cloud-module.ts';
import type {Clock} from '../core/clock.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {Env} from '../credentials/sts-endpoint.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import type {Runtime} from './runtime.ts';

/** Both steps, run in order. */
export interface AccessSetup {
  /** EKS then AKS set-up for a cycle's report, writing through `registry` (the term's fenced view). Never throws. */
  run(report: CycleReport, signal: AbortSignal, registry: RegistryBackend): Promise<void>;
  /** A probe result with what either step knows about the cluster. */
  adjustHealth(server: KubeServerDraft, health: TargetHealth): TargetHealth;
  /** Releases SDK clients. */
  close(): void;
}

/** What the steps need besides the runtime. */
export interface AccessSetupStepsOptions {
  readonly runtime: Runtime;
  readonly clock: Clock;
  readonly logger: SetupLogger;
  readonly env: Env;
  /** Counts outcomes per cloud (metrics, `once` output). */
  readonly onOutcome?: (outcome: SetupOutcome, cloud: 'AWS' | 'Azure') => void;
}

/** Builds the EKS and AKS access set-up steps over the runtime's config, credentials and backend. */
export function createAccessSetupSteps(options: AccessSetupStepsOptions): AccessSetup {
  const {runtime, clock, logger} = options;
  const config = runtime.config;
  const eks = createAccessSetupStep({
    config,
    clock,
    backend: runtime.backend,
    logger,
    env: options.env,
    providers: runtime.credentials.aws,
    timeoutMs: config.probe.timeout,
    onOutcome: (outcome) => options.onOutcome?.(outcome, 'AWS'),
  });
  const aksPlanner = runtime.discovery.planner(azureCloud);
  const aks = createAksAccessSetupStep({
    config,
    clock,
    backend: runtime.backend,
    logger,
    onOutcome: (outcome) => options.onOutcome?.(outcome, 'Azure'),
    ...(aksPlanner ? {apiFor: lazyRoleAssignmentsApis(config, aksPlanner)} : {}),
  });
  return {
    async run(report, signal, registry) {
      await eks.run(report, signal, registry);
      await aks.run(report, signal, registry);
    },
    adjustHealth: (server, health) => aks.adjustHealth(server, eks.adjustHealth(server, health)),
    close: () => eks.close(),
  };
}
