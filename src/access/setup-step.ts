/**
 * Automatic EKS access set-up (`setup_access_for_arn`), one named step of every cycle, run
 * after registration and before probes so a cluster set up now is probed healthy in the same
 * cycle. Per registered EKS cluster of an opted-in matcher whose authentication mode takes
 * access entries, it makes sure the principal has an access entry mapped to the group and the
 * cluster holds the discovery ClusterRole and binding; to write those, the discovery identity
 * associates AmazonEKSClusterAdminPolicy with itself for the step only, and a marker in the
 * registry records that intent until the association is gone again, so a crashed run is
 * repaired by the next one. When a cluster is deregistered, the access entry this discovery
 * group created (and only that) is deleted. Failures never touch registration: they become the
 * cluster's health message and a metric.
 */
import type {KubeAccess, KubeServerDraft, TargetHealth} from '../../heartbeats/kube-server.ts';
import {AccessSetupCallError, createAccessSetupApi, type AccessSetupApi} from '../clouds/aws/access-setup-api.ts';
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import {AwsCredentialProviders} from '../credentials/aws-credentials.ts';
import {mintEksToken} from '../credentials/eks-token.ts';
import {redactText} from '../observability/redact.ts';
import type {Env} from '../credentials/sts-endpoint.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import {enableAccessEntriesCommand, shellCommand, usesAccessEntries} from './eks-access.ts';
import {applyRbacObject, canI, KubeApiError, type KubeTarget} from './kube-apply.ts';
import {DEFAULT_RBAC_NAME, discoveryClusterRole, discoveryClusterRoleBinding, type RbacObject} from './rbac.ts';
import {createSetupCore, registeredByMatcher, type SetupLogger, type SetupOutcome, type SetupWanted} from './setup-core.ts';

/** Outcomes, logger and refresh period live in setup-core.ts (shared with the AKS step); re-exported for existing importers. */
export {FULL_REFRESH_MS, SETUP_OUTCOMES, type SetupLogger, type SetupOutcome} from './setup-core.ts';

/** The access policy associated for the duration of the RBAC step. */
export const CLUSTER_ADMIN_POLICY = 'AmazonEKSClusterAdminPolicy';
/** Tag (access entries) and label (RBAC objects) naming the discovery group that created them. */
export const MANAGED_GROUP_KEY = 'kube-discovery.io/discovery-group';
/** Tag saying why set-up created an access entry: `access` (the principal's) or `temporary-admin` (the identity's, for one step). */
export const PURPOSE_KEY = 'kube-discovery.io/purpose';
/** Where the calls go: one region, one identity. */
export interface SetupTarget {
  readonly region: string;
  readonly roleArn?: string;
  readonly externalId?: string;
}

/** Options of createAccessSetupStep. */
export interface AccessSetupOptions {
  readonly config: Config;
  readonly clock: Clock;
  /** The registry a run writes its records and markers to unless `run` is given the leader's (fenced) view. */
  readonly backend: RegistryBackend;
  readonly logger: SetupLogger;
  readonly env: Env;
  /** The runtime's AWS credential providers (discovery and probes use the same); default the SDK chain with this env and clock. */
  readonly providers?: AwsCredentialProviders;
  /** Deadline of one AWS or Kubernetes call. */
  readonly timeoutMs: number;
  /** Counts outcomes (metrics). */
  readonly onOutcome?: (outcome: SetupOutcome) => void;
  /** EKS/STS calls for a target; default real SDK clients (tests reach the fakes through AWS_ENDPOINT_URL_*). */
  readonly apiFor?: (target: SetupTarget) => AccessSetupApi;
  /** Mints an EKS token of the target's identity for a cluster; default a presigned GetCallerIdentity. */
  readonly tokenFor?: (target: SetupTarget, clusterName: string) => Promise<string>;
  readonly fullRefreshMs?: number;
}

/** The step as the service runs it. */
export interface AccessSetupStep {
  /** Repairs leftovers, sets up this cycle's clusters and cleans up after deregistered ones. Never throws. */
  run(report: CycleReport, signal: AbortSignal, registry?: RegistryBackend): Promise<void>;
  /** A probe result, with what set-up knows about the cluster added when the probe is not healthy. */
  adjustHealth(server: KubeServerDraft, health: TargetHealth): TargetHealth;
  /** Releases SDK clients. */
  close(): void;
}

type EksAccess = Extract<KubeAccess, {kind: 'eks'}>;

/** What set-up needs to find a cluster again, e.g. to clean up after it once it left the inventory. */
interface ClusterRef extends SetupTarget {
  readonly clusterName: string;
  readonly account: string;
}

/** Registry record of an access entry this group created (`access_setup/<group>/entries/<kube_server>`). */
interface EntryRecord extends ClusterRef {
  readonly principal: string;
}

/** Registry marker of a temporary cluster-admin association (`access_setup/<group>/admin/<cluster>`). */
interface AdminMarker extends ClusterRef {
  readonly identity: string;
  readonly policyArn: string;
  /** The identity's access entry was created for the step and must go too. */
  readonly createdIdentityEntry: boolean;
  readonly at: string;
}

/** What the health message should add for a cluster. */
type Note =
  | {readonly kind: 'failed'; readonly step: string; readonly code: string; readonly message: string; readonly fix: string}
  | {readonly kind: 'config_map'; readonly command: string}
  | {readonly kind: 'foreign_entry'; readonly principal: string; readonly groups: readonly string[]; readonly command: string};

interface Wanted extends SetupWanted {
  readonly ref: ClusterRef;
  readonly principal: string;
  readonly group: string;
  readonly authMode: string;
  readonly endpoint?: string | undefined;
  readonly caData?: string | undefined;
}

const quietLogger = {debug() {}, info() {}, warn() {}, error() {}};

/** Builds the step. Without opted-in matchers it only cleans up and repairs what earlier runs left. */
export function createAccessSetupStep(options: AccessSetupOptions): AccessSetupStep {
  const {config, clock, logger} = options;
  const group = config.discovery_service.discovery_group;
  const prefix = `access_setup/${group}/`;
  const core = createSetupCore<Note>({
    clock,
    backend: options.backend,
    logger,
    recordPrefix: `${prefix}entries/`,
    label: 'access set-up',
    created: 'access entry',
    concurrency: config.probe.concurrency,
    fullRefreshMs: options.fullRefreshMs,
    onOutcome: options.onOutcome,
  });
  const {registry: backend, notes, count} = core;
  const providers = options.providers ?? new AwsCredentialProviders({env: options.env, clock, logger: quietLogger});
  const clients = new Map<string, AccessSetupApi & {close?: () => void}>();
  const callers = new Map<string, Promise<string>>();

  const credentialsFor = (t: SetupTarget) => providers.provider({region: t.region, ...(t.roleArn ? {roleArn: t.roleArn} : {}), ...(t.externalId ? {externalId: t.externalId} : {})});
  const apiFor = (t: SetupTarget): AccessSetupApi => {
    const key = `${t.region}|${t.roleArn ?? ''}|${t.externalId ?? ''}`;
    let api = clients.get(key);
    if (!api) {
      api = options.apiFor?.(t) ?? createAccessSetupApi({region: t.region, credentials: credentialsFor(t), requestTimeoutMs: options.timeoutMs, maxAttempts: Number(options.env['AWS_MAX_ATTEMPTS']) || 3});
      clients.set(key, api);
    }
    return api;
  };
  const callerOf = (t: SetupTarget): Promise<string> => {
    const key = `${t.roleArn ?? ''}|${t.externalId ?? ''}`;
    let caller = callers.get(key);
    if (!caller) {
      caller = apiFor(t).callerArn();
      // A failed lookup is retried next time instead of being remembered.
      caller.catch(() => callers.delete(key));
      callers.set(key, caller);
    }
    return caller;
  };
  const tokenFor =
    options.tokenFor ??
    (async (t: SetupTarget, clusterName: string) => (await mintEksToken({clusterName, region: t.region, credentials: await credentialsFor(t)(), clock, env: options.env})).token);

  /** Takes back temporary cluster-admin associations a crashed or failed run left behind. */
  const repair = async (): Promise<void> => {
    for (const item of await backend.list(`${prefix}admin/`)) {
      let marker: AdminMarker;
      try {
        marker = JSON.parse(item.value) as AdminMarker;
      } catch (error) {
        // Kept for an operator to read: it may stand for an association still in place.
        count('repair_failed');
        logger.warn({event: 'access_setup', key: item.key, err: error}, `unreadable access set-up marker ${item.key}; check that cluster for a leftover ${CLUSTER_ADMIN_POLICY} association, then delete the key`);
        continue;
      }
      try {
        await releaseAdmin(apiFor(marker), marker);
        await backend.delete(item.key);
        count('repaired');
        logger.info({event: 'access_setup', cluster: marker.clusterName, region: marker.region}, `took back the temporary ${CLUSTER_ADMIN_POLICY} association a previous run left on cluster ${marker.clusterName}`);
      } catch (error) {
        count('repair_failed');
        logger.warn({event: 'access_setup', cluster: marker.clusterName, err: error}, `could not take back the temporary ${CLUSTER_ADMIN_POLICY} association on cluster ${marker.clusterName}; retrying next cycle`);
      }
    }
  };

  const releaseAdmin = async (api: AccessSetupApi, marker: AdminMarker): Promise<void> => {
    await api.disassociateAccessPolicy(marker.clusterName, marker.identity, marker.policyArn);
    if (!marker.createdIdentityEntry) return;
    const entry = await api.describeAccessEntry(marker.clusterName, marker.identity);
    if (entry && entry.tags[MANAGED_GROUP_KEY] === group && entry.tags[PURPOSE_KEY] === 'temporary-admin') await api.deleteAccessEntry(marker.clusterName, marker.identity);
  };

  /** Writes the RBAC objects with cluster-admin rights held only for this call. */
  const withTemporaryAdmin = async (api: AccessSetupApi, w: Wanted, identity: string, write: () => Promise<void>): Promise<void> => {
    const policyArn = `arn:${partitionOf(w.ref.region)}:eks::aws:cluster-access-policy/${CLUSTER_ADMIN_POLICY}`;
    const markerKey = `${prefix}admin/${w.ref.account}.${w.ref.region}.${w.ref.clusterName}`;
    let createdIdentityEntry = false;
    const marker = (): AdminMarker => ({...w.ref, identity, policyArn, createdIdentityEntry, at: new Date(clock.now()).toISOString()});
    if (!samePrincipal(identity, w.principal) && !(await api.describeAccessEntry(w.ref.clusterName, identity))) {
      createdIdentityEntry = true;
      await backend.put(markerKey, JSON.stringify(marker()));
      await api.createAccessEntry(w.ref.clusterName, identity, [], {[MANAGED_GROUP_KEY]: group, [PURPOSE_KEY]: 'temporary-admin'});
    }
    if ((await api.listAssociatedAccessPolicies(w.ref.clusterName, identity)).includes(policyArn)) {
      // Someone made the identity cluster admin already: use it, and leave it as it was.
      await write();
    } else {
      // Intent first: if we die after associating, the next run finds the marker and disassociates.
      await backend.put(markerKey, JSON.stringify(marker()));
      await api.associateAccessPolicy(w.ref.clusterName, identity, policyArn);
      try {
        await write();
      } finally {
        await api.disassociateAccessPolicy(w.ref.clusterName, identity, policyArn);
      }
    }
    if (createdIdentityEntry) await api.deleteAccessEntry(w.ref.clusterName, identity);
    await backend.delete(markerKey);
  };

  const rbacObjects = (w: Wanted): RbacObject[] => {
    const labels = {'app.kubernetes.io/managed-by': 'kube-discovery', [MANAGED_GROUP_KEY]: group};
    const bindingName = w.group === DEFAULT_RBAC_NAME ? DEFAULT_RBAC_NAME : `${DEFAULT_RBAC_NAME}-${w.group}`;
    const role = discoveryClusterRole(DEFAULT_RBAC_NAME);
    const binding = discoveryClusterRoleBinding({kind: 'Group', name: w.group}, bindingName, DEFAULT_RBAC_NAME);
    return [{...role, metadata: {...role.metadata, labels}}, {...binding, metadata: {...binding.metadata, labels}}];
  };

  const setUp = async (w: Wanted): Promise<SetupOutcome> => {
    const fingerprint = JSON.stringify([w.principal, w.group, w.authMode, w.endpoint ?? '', w.caData ?? '', w.ref.roleArn ?? '', w.ref.externalId ?? '']);
    if (core.fresh(w.server, fingerprint)) return 'cached';
    const remember = (outcome: SetupOutcome): SetupOutcome => {
      core.remember(w.server, fingerprint);
      return outcome;
    };
    if (!usesAccessEntries(w.authMode)) {
      notes.set(w.server, {kind: 'config_map', command: enableAccessEntriesCommand({clusterName: w.ref.clusterName, region: w.ref.region})});
      return remember('config_map');
    }
    if (!w.endpoint || !w.caData) return 'not_ready';
    const api = apiFor(w.ref);
    const {clusterName} = w.ref;
    let changed = false;
    const entry = await api.describeAccessEntry(clusterName, w.principal);
    if (!entry) {
      await api.createAccessEntry(clusterName, w.principal, [w.group], {[MANAGED_GROUP_KEY]: group, [PURPOSE_KEY]: 'access'});
      changed = true;
    } else if (!entry.kubernetesGroups.includes(w.group)) {
      // Not ours to change: say exactly what the owner could run.
      const command = shellCommand(['aws', 'eks', 'update-access-entry', '--region', w.ref.region, '--cluster-name', clusterName, '--principal-arn', w.principal, '--kubernetes-groups', ...new Set([...entry.kubernetesGroups, w.group])]);
      notes.set(w.server, {kind: 'foreign_entry', principal: w.principal, groups: entry.kubernetesGroups, command});
      return remember('foreign_entry');
    }
    if (changed || (entry?.tags[MANAGED_GROUP_KEY] === group && !(await core.hasRecord(w.server)))) {
      // Remember what we own under this name, so deregistration can clean it up after a restart too.
      const record: EntryRecord = {...w.ref, principal: w.principal};
      await core.writeRecord(w.server, record);
    }

    const identity = await callerOf(w.ref);
    const target = async (): Promise<KubeTarget> => ({
      server: w.endpoint ?? '',
      caPem: Buffer.from(w.caData ?? '', 'base64').toString('utf8'),
      token: await tokenFor(w.ref, clusterName),
      timeoutMs: options.timeoutMs,
    });
    // Read first: the principal's own review says whether the RBAC is in place (only askable as itself).
    let rbacOk = false;
    if (samePrincipal(identity, w.principal) && !changed) {
      const t = await target();
      rbacOk = (await Promise.all(['users', 'groups', 'serviceaccounts'].map((r) => canI(t, 'impersonate', r)))).every(Boolean);
    }
    if (!rbacOk) {
      let wrote = 0;
      await withTemporaryAdmin(api, w, identity, async () => {
        const t = await target();
        for (const object of rbacObjects(w)) if ((await retryWhileDenied(() => applyRbacObject(t, object), clock)) !== 'unchanged') wrote++;
      });
      changed ||= wrote > 0;
    }
    notes.delete(w.server);
    return remember(changed ? 'configured' : 'unchanged');
  };

  const cleanUp = async (name: string, live: ReadonlySet<string>): Promise<SetupOutcome | undefined> => {
    const removed = await core.cleanUp<EntryRecord>(name, (record) => live.has(refKey(record)), async (record) => {
      const api = apiFor(record);
      const entry = await api.describeAccessEntry(record.clusterName, record.principal);
      return entry?.tags[MANAGED_GROUP_KEY] === group && entry.tags[PURPOSE_KEY] === 'access' && (await api.deleteAccessEntry(record.clusterName, record.principal));
    });
    if (!removed) return undefined;
    logger.info({event: 'access_setup', kube_server: name, cluster: removed.clusterName}, `deleted the access entry of ${removed.principal} on deregistered cluster ${removed.clusterName}`);
    return 'removed';
  };

  return {
    run(report, signal, registry) {
      return core.run(report, signal, registry, failureNote, async () => {
        await repair();
        const wanted = wantedClusters(report, config);
        const live = new Set(wanted.map((w) => refKey(w.ref)));
        return {wanted, setUp, cleanUp: (name) => cleanUp(name, live)};
      });
    },
    adjustHealth(server, health) {
      const note = notes.get(server.metadata.name);
      if (!note) return health;
      const cluster = server.spec.cluster.spec.aws?.name ?? server.metadata.name;
      if (health.status === 'healthy') {
        // Reachable anyway; a failed step (e.g. an association not taken back) is still worth saying.
        return note.kind === 'failed' ? {...health, message: `${health.message ?? 'healthy'}; but automatic access set-up failed at ${note.step}: ${note.code}; ${note.fix}`} : health;
      }
      const probe = health.message ? ` Probe: ${health.message}` : '';
      switch (note.kind) {
        case 'failed':
          return {...health, status: 'unhealthy', reason: 'access_setup_failed', message: `automatic access set-up (setup_access_for_arn) for cluster ${cluster} failed at ${note.step}: ${note.code}: ${note.message}; ${note.fix}.${probe}`};
        case 'config_map':
          return {...health, message: `setup_access_for_arn does not edit clusters in authentication mode CONFIG_MAP (aws-auth only): switch cluster ${cluster} to access entries with \`${note.command}\` and set-up runs next cycle, or add the aws-auth mapping yourself.${probe}`};
        case 'foreign_entry':
          return {...health, message: `the access entry of ${note.principal} on cluster ${cluster} was not created by discovery group ${group} and lacks the group (has: ${note.groups.join(', ') || 'none'}); set-up never changes entries it did not create: \`${note.command}\`.${probe}`};
      }
    },
    close() {
      for (const api of clients.values()) api.close?.();
      clients.clear();
    },
  };
}

/** The clusters of this cycle that an opted-in matcher wants set up. */
function wantedClusters(report: CycleReport, config: Config): Wanted[] {
  const out: Wanted[] = [];
  // No matcher opted in (the usual case): no walk over every registered cluster of the cycle.
  if (!config.discovery_service.aws.some((m) => m.setup_access_for_arn)) return out;
  for (const {item, matcherIndex} of registeredByMatcher(report, 'AWS')) {
    const matcher = config.discovery_service.aws[matcherIndex];
    const access = item.server?.status?.access;
    const aws = item.server?.spec.cluster.spec.aws;
    if (!matcher?.setup_access_for_arn || access?.kind !== 'eks' || !aws || !item.server) continue;
    const eks: EksAccess = access;
    out.push({
      server: item.name,
      cluster: eks.cluster_name,
      ref: {clusterName: eks.cluster_name, region: eks.region, account: aws.account_id, ...(eks.role_arn ? {roleArn: eks.role_arn} : {}), ...(eks.external_id ? {externalId: eks.external_id} : {})},
      principal: matcher.setup_access_for_arn,
      group: matcher.setup_access_group ?? DEFAULT_RBAC_NAME,
      authMode: item.server.status?.auth_mode ?? 'CONFIG_MAP',
      endpoint: item.server.status?.endpoint,
      caData: item.server.status?.ca_data,
    });
  }
  return out;
}

function failureNote(error: unknown): Note {
  // The message goes into the cluster's health, stored and served: a server that echoed our token must not publish it.
  const note = failureNoteOf(error);
  return note.kind === 'failed' ? {...note, message: redactText(note.message)} : note;
}

function failureNoteOf(error: unknown): Note {
  if (error instanceof AccessSetupCallError) {
    const denied = /AccessDenied|UnauthorizedOperation|NotAuthorized/i.test(error.code);
    const fix = denied
      ? `the discovery identity lacks the IAM action ${error.iamAction}: grant it (deploy/aws/access-setup-policy.json)`
      : `${error.iamAction} is retried next cycle`;
    return {kind: 'failed', step: error.iamAction, code: error.code, message: error.message, fix};
  }
  if (error instanceof KubeApiError) {
    const fix = error.status === 403
      ? `the Kubernetes API refused the temporarily associated ${CLUSTER_ADMIN_POLICY} (it can take a few seconds to apply); retried next cycle`
      : 'retried next cycle';
    return {kind: 'failed', step: 'the Kubernetes API (ClusterRole/ClusterRoleBinding)', code: error.reason, message: error.message, fix};
  }
  const e = error as {name?: string; message?: string};
  return {kind: 'failed', step: 'set-up', code: e.name ?? 'Error', message: e.message ?? String(error), fix: 'retried next cycle'};
}

/** Waits between attempts of an RBAC write refused while a new access entry or association propagates. */
export const PROPAGATION_RETRY_MS = [2_000, 4_000, 8_000] as const;

/** EKS applies new entries and associations within seconds, not at once: a 401/403 right after is retried a few times. */
async function retryWhileDenied<T>(run: () => Promise<T>, clock: Clock): Promise<T> {
  for (const wait of PROPAGATION_RETRY_MS) {
    try {
      return await run();
    } catch (error) {
      if (!(error instanceof KubeApiError) || (error.status !== 401 && error.status !== 403)) throw error;
      await clock.sleep(wait);
    }
  }
  return run();
}

function refKey(ref: ClusterRef): string {
  return `${ref.account}/${ref.region}/${ref.clusterName}`;
}

/** Role ARNs compare by account and name: session ARNs carry no role path. */
function samePrincipal(a: string, b: string): boolean {
  const norm = (arn: string): string => arn.replace(/:role\/(?:[^/]+\/)*([^/]+)$/, ':role/$1');
  return norm(a) === norm(b);
}

function partitionOf(region: string): string {
  if (region.startsWith('cn-')) return 'aws-cn';
  if (region.startsWith('us-gov-')) return 'aws-us-gov';
  return 'aws';
}
