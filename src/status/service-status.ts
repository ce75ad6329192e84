/**
 * What the service says about itself: readiness (/readyz) and the status body (/v1/status),
 * computed from the parts that know — registry health, the inventory, source status, the role.
 */
import type {Readiness} from '../http/server.ts';
import type {Inventory} from '../inventory/inventory.ts';
import {redact} from '../observability/redact.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import type {RegistryHealth} from '../registry/health.ts';
import type {Scheduler} from '../scheduler/scheduler.ts';
import type {Role} from '../service/leadership.ts';
import {VERSION} from '../version.ts';
import type {StatusTracker} from './status.ts';
import {noSourceSucceeded, summaryLine} from './summary.ts';

/** The parts readiness and status read. */
export interface ServiceState {
  readonly group: string;
  readonly replica: string;
  readonly hostId: string;
  readonly backend: Pick<RegistryBackend, 'name' | 'ping'>;
  readonly inventory: Pick<Inventory, 'synced' | 'lastError' | 'staleSince' | 'unreadable' | 'list' | 'resync'>;
  readonly registryHealth: Pick<RegistryHealth, 'faults' | 'failed'>;
  readonly status: StatusTracker;
  role(): Role;
  /** The first discovery cycle of this process has completed. */
  firstCycleDone(): boolean;
  /** The running term's scheduler, while leading. */
  scheduler(): Pick<Scheduler, 'nextDue' | 'busy'> | undefined;
}

/** /readyz: pings the backend (a failure counts as a read fault) and says why it is not plainly ready. */
export async function readinessOf(state: ServiceState): Promise<Readiness> {
  const {backend, inventory, registryHealth} = state;
  let pingFailed = false;
  try {
    await backend.ping();
    // Reachable again after failed reads: re-list now rather than stay degraded until the next resync.
    if (registryHealth.faults().some((f) => f.operation === 'read')) await inventory.resync();
  } catch (error) {
    pingFailed = true;
    registryHealth.failed('read', error);
  }
  const fault = registryHealth.faults()[0];
  if (pingFailed || fault) {
    // Only the reason class here: /readyz is unauthenticated; the error text is in /v1/status and the log.
    const what = fault ? `registry ${fault.operation}s failing (${fault.reason})` : `registry backend ${backend.name} unreachable`;
    // After a good start, serve the cached inventory and say so rather than drop out of the load balancer.
    // A first listing that succeeded is enough: the backend worked, and what it gave is served.
    return inventory.synced
      ? {ready: true, status: 'degraded', reason: `${what}; serving the last known inventory`}
      : {ready: false, status: 'not_ready', reason: what};
  }
  if (state.role().role === 'follower') return inventory.synced ? {ready: true, status: 'ready'} : {ready: false, status: 'not_ready', reason: 'the registry has not been read yet'};
  if (!state.firstCycleDone()) return {ready: false, status: 'not_ready', reason: 'the first discovery cycle has not completed yet'};
  // Up and serving, but not discovering anything (e.g. no cloud credentials): say so, stay in rotation.
  const idle = noSourceSucceeded(state.status.sources());
  if (idle) return {ready: true, status: 'degraded', reason: idle};
  return {ready: true, status: 'ready'};
}

/** /v1/status. Error texts in it come from clouds and backends: redacted like the log. */
export function statusBodyOf(state: ServiceState): unknown {
  const {inventory, status, registryHealth} = state;
  const role = state.role();
  const leader = role.role === 'follower' && role.leader ? {leader: role.leader} : {};
  const scheduler = state.scheduler();
  return redact({
    summary: summaryLine({role: role.role, ...leader, clusters: inventory.synced ? inventory.list().length : undefined, sources: status.sources(), ...(status.lastCycle ? {lastCycle: status.lastCycle} : {})}),
    discovery_group: state.group,
    version: VERSION,
    replica: state.replica,
    host_id: state.hostId,
    role: role.role,
    ...leader,
    backend: {
      type: state.backend.name,
      synced: inventory.synced,
      ...(inventory.lastError ? {error: inventory.lastError} : {}),
      faults: registryHealth.faults(),
    },
    inventory: {
      count: inventory.list().length,
      // Stale: reads are failing and this is the last inventory read, served as it was.
      stale: inventory.staleSince !== undefined,
      ...(inventory.staleSince !== undefined ? {stale_since: new Date(inventory.staleSince).toISOString()} : {}),
      ...(inventory.unreadable > 0 ? {unreadable_entries: inventory.unreadable} : {}),
    },
    last_cycle: status.lastCycle ?? null,
    last_success: status.lastSuccess ?? null,
    next_cycle: scheduler?.nextDue ? new Date(scheduler.nextDue).toISOString() : null,
    cycle_running: scheduler?.busy ?? false,
    sources: status.sources(),
  });
}
