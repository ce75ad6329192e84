/**
 * Who runs cycles and writes: with etcd, the elected leader of the discovery group; with
 * the embedded backends, this process alone. The service only sees role changes.
 */
import type {LeaderElectionConfig} from '../config/schema.ts';
import type {Clock} from '../core/clock.ts';
import {LeaderElection} from '../ha/election.ts';
import type {Logger} from '../observability/logger.ts';
import type {RegistryBackend} from '../registry/backend.ts';

/** A role change: while leader, `backend` is the (fenced) view writes must go through. */
export type Role = {readonly role: 'leader'; readonly backend: RegistryBackend} | {readonly role: 'follower'; readonly leader?: string};

/** Leadership of one discovery group. */
export interface Leadership {
  /** Starts; `onRole` is called for every change, the first time once the first round settled. */
  start(onRole: (role: Role) => void): Promise<void>;
  /** The current role. */
  current(): Role;
  /** Steps down (resigning on etcd, so another replica takes over at once). */
  stop(): Promise<void>;
}

/** Options of createLeadership. */
export interface LeadershipOptions {
  readonly backend: RegistryBackend;
  readonly storageType: string;
  readonly group: string;
  readonly replica: string;
  readonly sessionTtlMs?: number;
  /** `leader_election`: a Lease election instead of the storage's own (etcd). */
  readonly leaderElection?: LeaderElectionConfig | undefined;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * The election for etcd and kubernetes (a Lease when `leader_election` says so or the storage is
 * kubernetes); a fixed leader role for memory and sqlite (one process owns the file).
 */
export function createLeadership(options: LeadershipOptions): Leadership {
  if (options.storageType === 'kubernetes' || options.leaderElection?.type === 'kubernetes_lease') return lazyKubeLeadership(options);
  if (options.storageType !== 'etcd') {
    const role: Role = {role: 'leader', backend: options.backend};
    return {
      start: async (onRole) => onRole(role),
      current: () => role,
      stop: async () => undefined,
    };
  }
  const election = new LeaderElection({
    backend: options.backend,
    group: options.group,
    replicaId: options.replica,
    clock: options.clock,
    logger: options.logger,
    ...(options.sessionTtlMs ? {sessionTtlMs: options.sessionTtlMs} : {}),
  });
  const toRole = (): Role => {
    const state = election.state();
    if (state.role === 'leader' && state.fence) {
      // A write refused for the fence means the leader key was replaced under us: step down and campaign again.
      return {role: 'leader', backend: options.backend.withFence?.(state.fence, (fence) => election.fenceRefused(fence)) ?? options.backend};
    }
    return {role: 'follower', ...(state.leader ? {leader: state.leader} : {})};
  };
  return electionLeadership(election, toRole);
}

/** What electionLeadership needs of an election (etcd's or a Lease). */
export interface RoleElection {
  onChange(listener: () => void): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Leadership over an election whose state `toRole` reads: `onRole` hears each change of role
 * once, whether it happens during the first round or after; `onPublish` sees every reading
 * (the kubernetes storage's reaper follows it).
 */
export function electionLeadership(election: RoleElection, toRole: () => Role, hooks: {onPublish?: (role: Role) => void; onStop?: () => void} = {}): Leadership {
  let current: Role = {role: 'follower'};
  let notified: Role['role'] | undefined;
  return {
    async start(onRole) {
      const publish = (): void => {
        current = toRole();
        hooks.onPublish?.(current);
        if (current.role !== notified) {
          notified = current.role;
          onRole(current);
        }
      };
      election.onChange(publish);
      await election.start();
      publish();
    },
    current: () => current,
    stop: async () => {
      hooks.onStop?.();
      await election.stop();
    },
  };
}

/** Kubernetes Lease leadership, loaded on start so other storages never load the Kubernetes client. */
function lazyKubeLeadership(options: LeadershipOptions): Leadership {
  let inner: Leadership | undefined;
  return {
    async start(onRole) {
      const {kubeLeadershipFor} = await import('./kube-leadership.ts');
      inner = await kubeLeadershipFor({
        backend: options.backend,
        storageType: options.storageType,
        leaderElection: options.leaderElection,
        group: options.group,
        replica: options.replica,
        clock: options.clock,
        logger: options.logger,
        ...(options.sessionTtlMs ? {leaseDurationMs: options.sessionTtlMs} : {}),
      });
      await inner.start(onRole);
    },
    current: () => inner?.current() ?? {role: 'follower'},
    stop: async () => inner?.stop(),
  };
}
