/**
 * Which process writes a discovery group on an embedded registry (sqlite, memory). `start` records
 * itself under its heartbeat lease, so the record lapses with the lease if the process dies;
 * `once` reads it and refuses to take over the lease and entries of a running `start` unless forced.
 * (On etcd the leader election already decides who writes.)
 */
import {randomUUID} from 'node:crypto';
import os from 'node:os';
import type {Lease, RegistryBackend} from '../registry/backend.ts';

/** The running writer as recorded. */
export interface WriterClaim {
  readonly pid: number;
  readonly hostname: string;
  readonly replica: string;
  readonly command: string;
  /** RFC 3339 of when it started writing. */
  readonly since: string;
  /** Random per claim: two claims of one process (or of two with one pid) never read the same. */
  readonly token?: string;
}

/** A record as this process wrote it, which only it may remove (see releaseWriter). */
export interface HeldClaim {
  readonly group: string;
  readonly value: string;
  readonly lease: string;
}

/** Registry key of a group's writer record (outside `kube_servers/`, so readers never see it). */
export function writerKey(group: string): string {
  return `writers/${group}`;
}

/** Records this process as the group's writer, on its heartbeat lease; the result is what releaseWriter takes. */
export async function claimWriter(backend: RegistryBackend, group: string, lease: Lease, replica: string, now: number): Promise<HeldClaim> {
  const claim: WriterClaim = {pid: process.pid, hostname: os.hostname(), replica, command: 'start', since: new Date(now).toISOString(), token: randomUUID()};
  const value = JSON.stringify(claim);
  await backend.put(writerKey(group), value, {lease});
  return {group, value, lease: lease.id};
}

/**
 * Removes this process's record on a clean stop, so `once` may run at once. Only its own: two
 * `start` on one file (a rolling restart) overlap, and the one stopping must not leave the other
 * writing without a record, for `once` would then take over its lease and entries.
 */
export async function releaseWriter(backend: RegistryBackend, held: HeldClaim): Promise<void> {
  const key = writerKey(held.group);
  const expected = {value: held.value, lease: held.lease};
  if (backend.compareAndDelete) {
    await backend.compareAndDelete(key, expected);
    return;
  }
  // A backend without an atomic compare (a test's wrapper): compare, then delete.
  const item = await backend.get(key);
  if (item?.value === expected.value && item.lease === expected.lease) await backend.delete(key);
}

/**
 * The live writer of the group other than this process, or undefined. A record of a process on
 * this host that no longer exists (a crash before its lease lapsed) does not count.
 */
export async function runningWriter(backend: RegistryBackend, group: string): Promise<WriterClaim | undefined> {
  const item = await backend.get(writerKey(group));
  if (!item) return undefined;
  // A record served only by the grace a lapsed lease gets at open names a process that stopped
  // renewing it more than a TTL ago: dead, or cut off from this file, as a lapsed lease always meant.
  if (item.lease !== undefined && backend.lapsedInGrace?.(item.lease) === true) return undefined;
  let claim: WriterClaim;
  try {
    claim = JSON.parse(item.value) as WriterClaim;
  } catch {
    return undefined;
  }
  if (claim.hostname === os.hostname()) {
    try {
      process.kill(claim.pid, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
    }
  }
  return claim;
}
