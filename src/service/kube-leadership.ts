/**
 * Leadership on a Kubernetes Lease, for the `kubernetes` storage or any other one configured with
 * `leader_election: {type: kubernetes_lease}`: the elected leader writes through a fenced view
 * (writes stop once it could not renew within the renew deadline). On the `kubernetes` storage
 * the leader also deletes entries whose owner Lease expired (a crashed replica's entries).
 */
import type {Clock} from '../core/clock.ts';
import {LeaseElection} from '../ha/lease-election.ts';
import type {LeaderElectionConfig} from '../config/schema.ts';
import type {Logger} from '../observability/logger.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import {fencedView} from '../registry/fenced-view.ts';
import type {KubeClient} from '../registry/kube-client.ts';
import type {KubernetesBackend} from '../registry/kubernetes.ts';
import {electionLeadership, type Leadership, type Role} from './leadership.ts';

/** Options of createKubeLeadership. */
export interface KubeLeadershipOptions {
  /** The registry the leader writes (fenced); any storage. */
  readonly backend: RegistryBackend;
  /** Where the Lease lives. */
  readonly client: KubeClient;
  readonly namespace: string;
  /** Called with the role: the `kubernetes` storage reaps expired owners only while leading. */
  readonly reaper?: (leading: boolean) => void;
  readonly group: string;
  readonly replica: string;
  readonly leaseDurationMs?: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** A Lease election for one discovery group in the backend's namespace. */
export function createKubeLeadership(options: KubeLeadershipOptions): Leadership {
  const election = new LeaseElection({
    client: options.client,
    namespace: options.namespace,
    group: options.group,
    identity: options.replica,
    clock: options.clock,
    logger: options.logger,
    ...(options.leaseDurationMs === undefined ? {} : {leaseDurationMs: options.leaseDurationMs}),
  });
  const view = fencedView(options.backend, () => election.holds(), `the leader Lease ${election.leaseName}`);
  const toRole = (): Role => {
    const state = election.state();
    return state.role === 'leader' ? {role: 'leader', backend: view} : {role: 'follower', ...(state.leader ? {leader: state.leader} : {})};
  };
  return electionLeadership(election, toRole, {onPublish: (role) => options.reaper?.(role.role === 'leader'), onStop: () => options.reaper?.(false)});
}

/**
 * The Lease leadership a config asks for: on the `kubernetes` storage its own client and
 * namespace unless `leader_election` names others; on etcd a client built from `leader_election`.
 */
export async function kubeLeadershipFor(options: {
  readonly backend: RegistryBackend;
  readonly storageType: string;
  readonly leaderElection?: LeaderElectionConfig | undefined;
  readonly group: string;
  readonly replica: string;
  readonly leaseDurationMs?: number;
  readonly clock: Clock;
  readonly logger: Logger;
}): Promise<Leadership> {
  const kube = options.storageType === 'kubernetes' ? (options.backend as KubernetesBackend) : undefined;
  const le = options.leaderElection;
  let client = kube?.client;
  if (!client || le?.kubeconfig !== undefined || le?.context !== undefined) {
    const {createKubeClient} = await import('../registry/kube-client.ts');
    client = await createKubeClient({...(le?.kubeconfig === undefined ? {} : {kubeconfig: le.kubeconfig}), ...(le?.context === undefined ? {} : {context: le.context})});
  }
  const namespace = le?.namespace ?? kube?.namespace ?? client.namespace;
  if (namespace === undefined || namespace === '') {
    throw new Error('leader_election.namespace: expected a namespace (none in the config, the kubeconfig context or the pod)');
  }
  const leaseDurationMs = le?.lease_duration ?? options.leaseDurationMs;
  return createKubeLeadership({
    backend: options.backend,
    client,
    namespace,
    ...(kube ? {reaper: (leading: boolean) => kube.setReaper(leading)} : {}),
    group: options.group,
    replica: options.replica,
    clock: options.clock,
    logger: options.logger,
    ...(leaseDurationMs === undefined ? {} : {leaseDurationMs}),
  });
}
