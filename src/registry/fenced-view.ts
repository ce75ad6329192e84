/**
 * A fenced view of any registry backend: writes (put, delete, revokeLease) go through only while
 * `holds()` says this replica still leads; reads, lease grants and keepalives pass through. Used
 * with the Kubernetes Lease election, whose check is local (renewed within the renew deadline),
 * so fencing costs no API call per write. The check is handed to the backend too (`fence`), which
 * makes it again right before each request is sent: a write that waited in a rate-limit queue, or
 * is sent again after a conflict, must not land after the successor's writes.
 */
import {FencedError} from '../core/errors.ts';
import type {Lease, PutOptions, RegistryBackend, RegistryItem, WatchEvent, Watcher, WatchOptions} from './backend.ts';

/** Wraps `backend`; `what` names the leadership in the FencedError message. */
export function fencedView(backend: RegistryBackend, holds: () => boolean, what: string): RegistryBackend {
  const check = (op: string): void => {
    if (!holds()) throw new FencedError(`${op} refused: this replica no longer holds ${what}`);
  };
  return {
    name: backend.name,
    grantLease: (ttlMs: number) => backend.grantLease(ttlMs),
    keepAlive: (lease: Lease) => backend.keepAlive(lease),
    async revokeLease(lease: Lease) {
      const op = `revoke lease ${lease.id}`;
      check(op);
      return backend.revokeLease(lease, {fence: () => check(op)});
    },
    ...(backend.resumeLease ? {resumeLease: (id: string) => backend.resumeLease?.(id) ?? Promise.resolve(undefined)} : {}),
    async put(key: string, value: string, options?: PutOptions): Promise<RegistryItem> {
      check(`put ${key}`);
      return backend.put(key, value, {...options, fence: () => check(`put ${key}`)});
    },
    get: (key: string) => backend.get(key),
    list: (prefix: string) => backend.list(prefix),
    async delete(key: string) {
      check(`delete ${key}`);
      return backend.delete(key, {fence: () => check(`delete ${key}`)});
    },
    watch: (prefix: string, onEvent: (event: WatchEvent) => void, options?: WatchOptions): Promise<Watcher> => backend.watch(prefix, onEvent, options),
    ping: () => backend.ping(),
    // The view shares the backend; closing it closes nothing (the owner closes the backend).
    close: () => Promise.resolve(),
  };
}
