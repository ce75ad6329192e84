/**
 * Leadership on a Kubernetes Lease for the `kubernetes` storage: the elected leader writes
 * through a fenced view (writes stop once it could not renew within the renew deadline) and
 * deletes entries whose owner Lease expired (a crashed replica's entries).
 */
import type {Clock} from '../core/clock.ts';
import {LeaseElection} from '../ha/lease-election.ts';
import type {Logger} from '../observability/logger.ts';
import {fencedView} from '../registry/fenced-view.ts';
import type {KubernetesBackend} from '../registry/kubernetes.ts';
import type {Leadership, Role} from './leadership.ts';

/** Options of createKubeLeadership. */
export interface KubeLeadershipOptions {
  readonly backend: KubernetesBackend;
  readonly group: string;
  readonly replica: string;
  readonly leaseDurationMs?: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** A Lease election for one discovery group in the backend's namespace. */
export function createKubeLeadership(options: KubeLeadershipOptions): Leadership {
  const election = new LeaseElection({
    client: options.backend.client,
    namespace: options.backend.namespace,
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
  let current: Role = {role: 'follower'};
  let notified: Role['role'] | undefined;
  return {
    async start(onRole) {
      const publish = (): void => {
        current = toRole();
        options.backend.setReaper(current.role === 'leader');
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
      options.backend.setReaper(false);
      await election.stop();
    },
  };
}
