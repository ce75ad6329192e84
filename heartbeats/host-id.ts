/** The stable identity of a replica, written into every kube_server it announces as `spec.host_id`. */
import {randomUUID} from 'node:crypto';
import type {RegistryBackend} from '../src/registry/backend.ts';

/** Registry key of a replica's host id: `host_ids/<replica>` (no lease: it outlives restarts). */
export function hostIdKey(replicaName: string): string {
  return `host_ids/${replicaName}`;
}

/**
 * The replica's host id from the registry, or a new random UUID stored there the first time,
 * so restarts keep their identity (like the per-pod identity Secret of Teleport's Kubernetes storage).
 * When the id cannot be stored, the new one is used for this run (the registry health reports the write failure).
 */
export async function loadOrCreateHostId(backend: RegistryBackend, replicaName: string): Promise<string> {
  if (replicaName === '' || replicaName.includes('/')) {
    throw new RangeError(`Expected a replica name without "/", got ${JSON.stringify(replicaName)}`);
  }
  if (backend.hostIdentity) return backend.hostIdentity(replicaName, () => randomUUID());
  const key = hostIdKey(replicaName);
  const existing = (await backend.get(key))?.value.trim();
  if (existing) return existing;
  const id = randomUUID();
  // A registry that cannot be written (read-only volume) still gets served: the id then lasts this run only.
  await backend.put(key, id).catch(() => undefined);
  return id;
}
