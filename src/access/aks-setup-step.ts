/**
 * Automatic AKS access set-up (`setup_access_for_principal_id`), run right after the EKS step.
 * Per registered AKS cluster of an opted-in `azure:` matcher that uses Azure RBAC for Kubernetes
 * authorization, it makes sure the principal holds "Azure Kubernetes Service RBAC Reader" at the
 * cluster's scope: read first (one list per cluster, then cached), create only what is missing,
 * under a name derived from scope, principal and role so a repeat is a no-op. The assignment's
 * description names the discovery group: only such an assignment is ever deleted, when its
 * cluster is deregistered. Clusters on Kubernetes RBAC are left alone (their probe message says
 * what to bind). Failures never touch registration: they become the cluster's health message.
 */
import type {TargetHealth} from '../../heartbeats/kube-server.ts';
import type {RoleAssignmentsApi} from '../clouds/azure/role-assignments-api.ts';
import type {ArmAccessSource} from '../clouds/azure/role-assignments-client.ts';
import {RoleAssignmentCallError, roleAssignmentName} from '../clouds/azure/role-assignments-api.ts';
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {KubeServerDraft} from '../../heartbeats/kube-server.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import {aksClusterScope} from './aks-access.ts';
import {createSetupCore, registeredByMatcher, type SetupLogger, type SetupOutcome, type SetupWanted} from './setup-core.ts';

/** Built-in role "Azure Kubernetes Service RBAC Reader" (the same GUID in every Azure cloud). */
export const AKS_RBAC_READER_ROLE_ID = '7f6c6a51-bcf8-42ba-9220-52d62157d7db';
/** Display name of {@link AKS_RBAC_READER_ROLE_ID}, for messages. */
export const AKS_RBAC_READER_ROLE = 'Azure Kubernetes Service RBAC Reader';
/** `status.auth_mode` of an AKS cluster whose Kubernetes authorization is Azure RBAC. */
export const AZURE_RBAC_AUTH_MODE = 'EntraID+AzureRBAC';

/** The description marking an assignment as created by `group`: the ownership test of cleanup. */
export function ownedDescription(group: string): string {
  return `Created by kube-discovery for discovery group ${group} (setup_access_for_principal_id); deleted when the cluster leaves the inventory.`;
}

/** Role assignment calls with the identity of `azure[matcherIndex]` in a subscription. */
export type ApiFor = (matcherIndex: number, subscriptionId: string) => Promise<RoleAssignmentsApi>;

/** {@link ApiFor} over the Azure planner; the Azure SDK is loaded on the first call only. */
export function lazyRoleAssignmentsApis(config: Config, source: ArmAccessSource): ApiFor {
  let apis: Promise<ApiFor> | undefined;
  return async (matcherIndex, subscriptionId) =>
    (await (apis ??= import('../clouds/azure/role-assignments-client.ts').then((m) => m.roleAssignmentsApis(config, source))))(matcherIndex, subscriptionId);
}

/** Options of createAksAccessSetupStep. */
export interface AksAccessSetupOptions {
  readonly config: Config;
  readonly clock: Clock;
  /** The registry a run writes its records and markers to unless `run` is given the leader's (fenced) view. */
  readonly backend: RegistryBackend;
  readonly logger: SetupLogger;
  /** Role assignment calls with the identity of `azure[matcherIndex]` in a subscription; undefined without Azure discovery. */
  readonly apiFor?: ApiFor;
  /** Counts outcomes (metrics). */
  readonly onOutcome?: (outcome: SetupOutcome) => void;
  readonly fullRefreshMs?: number;
}

/** The step as the service runs it (same shape as the EKS step). */
export interface AksAccessSetupStep {
  /** Sets up this cycle's clusters and cleans up after deregistered ones. Never throws. */
  run(report: CycleReport, signal: AbortSignal, registry?: RegistryBackend): Promise<void>;
  /** A probe result, with a set-up failure added. */
  adjustHealth(server: KubeServerDraft, health: TargetHealth): TargetHealth;
}

/** Registry record of an assignment this group created (`access_setup/<group>/aks/<kube_server>`). */
interface AssignmentRecord {
  readonly matcherIndex: number;
  readonly subscriptionId: string;
  readonly scope: string;
  readonly name: string;
  readonly principalId: string;
}

interface Wanted extends AssignmentRecord, SetupWanted {}

interface FailedNote {
  readonly operation: string;
  readonly action: string;
  readonly code: string;
  readonly reason: string;
  readonly message: string;
}

/** Builds the step. Without opted-in matchers it only cleans up what earlier runs left. */
export function createAksAccessSetupStep(options: AksAccessSetupOptions): AksAccessSetupStep {
  const {config, clock, logger} = options;
  const group = config.discovery_service.discovery_group;
  const core = createSetupCore<FailedNote>({
    clock,
    backend: options.backend,
    logger,
    recordPrefix: `access_setup/${group}/aks/`,
    label: 'AKS access set-up',
    created: 'role assignment',
    concurrency: config.probe.concurrency,
    fullRefreshMs: options.fullRefreshMs,
    onOutcome: options.onOutcome,
  });
  const {notes} = core;
  const description = ownedDescription(group);
  const apiFor: ApiFor = async (matcherIndex, subscriptionId) => {
    if (!options.apiFor) throw new Error('Azure discovery is not configured');
    return options.apiFor(matcherIndex, subscriptionId);
  };

  const setUp = async (w: Wanted, signal: AbortSignal): Promise<SetupOutcome> => {
    const fingerprint = `${w.scope.toLowerCase()}|${w.principalId}`;
    if (core.fresh(w.server, fingerprint)) return 'cached';
    const api = await apiFor(w.matcherIndex, w.subscriptionId);
    const existing = (await api.listForPrincipal(w.scope, w.principalId, signal)).find(
      (a) => a.scope.toLowerCase() === w.scope.toLowerCase() && a.principalId.toLowerCase() === w.principalId && a.roleDefinitionId.toLowerCase().endsWith(`/${AKS_RBAC_READER_ROLE_ID}`),
    );
    let outcome: SetupOutcome;
    if (!existing) {
      // Ownership first: a crash after the PUT still leaves the record that lets cleanup find it.
      await core.writeRecord(w.server, recordOf(w));
      const roleDefinitionId = `/subscriptions/${w.subscriptionId}/providers/Microsoft.Authorization/roleDefinitions/${AKS_RBAC_READER_ROLE_ID}`;
      await api.create(w.scope, w.name, {principalId: w.principalId, roleDefinitionId, description}, signal);
      logger.info({event: 'access_setup', kube_server: w.server, cluster: w.cluster}, `assigned ${AKS_RBAC_READER_ROLE} to ${w.principalId} on AKS cluster ${w.cluster}`);
      outcome = 'configured';
    } else if (existing.name.toLowerCase() === w.name && existing.description === description) {
      if (!(await core.hasRecord(w.server))) await core.writeRecord(w.server, recordOf(w));
      outcome = 'unchanged';
    } else {
      // Granted by someone else: the principal has its access; it is theirs to keep or remove.
      outcome = 'foreign_entry';
    }
    notes.delete(w.server);
    core.remember(w.server, fingerprint);
    return outcome;
  };

  const cleanUp = async (server: string, live: ReadonlySet<string>, signal: AbortSignal): Promise<SetupOutcome | undefined> => {
    const removed = await core.cleanUp<AssignmentRecord>(server, (record) => live.has(record.scope.toLowerCase()), async (record) => {
      const api = await apiFor(record.matcherIndex, record.subscriptionId);
      const assignment = await api.get(record.scope, record.name, signal);
      if (assignment?.description !== description || assignment.principalId.toLowerCase() !== record.principalId) return false;
      await api.delete(record.scope, record.name, signal);
      return true;
    });
    if (!removed) return undefined;
    logger.info({event: 'access_setup', kube_server: server}, `deleted the ${AKS_RBAC_READER_ROLE} assignment of ${removed.principalId} on deregistered AKS cluster ${removed.scope}`);
    return 'removed';
  };

  return {
    run(report, signal, registry) {
      return core.run(report, signal, registry, failureNote, async () => {
        const wanted = wantedClusters(report, config);
        const live = new Set(wanted.map((w) => w.scope.toLowerCase()));
        return {wanted, setUp, cleanUp: (name, roundSignal) => cleanUp(name, live, roundSignal)};
      });
    },
    adjustHealth(server, health) {
      const note = notes.get(server.metadata.name);
      if (!note) return health;
      const denied = note.reason === 'access_denied';
      const fix = denied
        ? `the discovery identity lacks ${note.action} on the cluster: assign it the role in deploy/azure/access-setup-role.json`
        : `${note.operation} is retried next cycle`;
      const text = `automatic access set-up (setup_access_for_principal_id) for AKS cluster ${server.spec.cluster.spec.azure?.resource_name ?? server.metadata.name} failed at ${note.operation}: ${note.code}: ${note.message}; ${fix}`;
      if (health.status === 'healthy') return {...health, message: `${health.message ?? 'healthy'}; but ${text}`};
      return {...health, status: 'unhealthy', reason: 'access_setup_failed', message: `${text}.${health.message ? ` Probe: ${health.message}` : ''}`};
    },
  };
}

/** The clusters of this cycle that an opted-in matcher wants set up: registered AKS clusters on Azure RBAC. */
function wantedClusters(report: CycleReport, config: Config): Wanted[] {
  const out: Wanted[] = [];
  // No matcher opted in (the usual case): no walk over every registered cluster of the cycle.
  if (!config.discovery_service.azure.some((m) => m.setup_access_for_principal_id)) return out;
  for (const {item, matcherIndex: index} of registeredByMatcher(report, 'Azure')) {
    const principal = config.discovery_service.azure[index]?.setup_access_for_principal_id;
    const access = item.server?.status?.access;
    if (!principal || access?.kind !== 'aks' || item.server?.status?.auth_mode !== AZURE_RBAC_AUTH_MODE) continue;
    const scope = aksClusterScope({subscription: access.subscription_id, resourceGroup: access.resource_group, name: access.resource_name});
    const principalId = principal.toLowerCase();
    out.push({
      server: item.name,
      cluster: access.resource_name,
      matcherIndex: index,
      subscriptionId: access.subscription_id,
      scope,
      name: roleAssignmentName(scope, principalId, AKS_RBAC_READER_ROLE_ID),
      principalId,
    });
  }
  return out;
}

function recordOf(w: Wanted): AssignmentRecord {
  return {matcherIndex: w.matcherIndex, subscriptionId: w.subscriptionId, scope: w.scope, name: w.name, principalId: w.principalId};
}

function failureNote(error: unknown): FailedNote {
  if (error instanceof RoleAssignmentCallError) return {operation: error.operation, action: error.action, code: error.code, reason: error.reason, message: error.message};
  const e = error as {name?: string; message?: string};
  return {operation: 'set-up', action: 'none', code: e.name ?? 'Error', reason: 'other', message: e.message ?? String(error)};
}
