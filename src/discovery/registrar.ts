/** The Registrar the cycle applies plans through: reads the group's entries, writes via the heartbeat. */
import {kubeServerPrefix, type KubeServer} from '../../heartbeats/kube-server.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import type {Registrar} from './cycle.ts';
import type {KubeServerDraft} from './evaluate.ts';

/** The writes a heartbeat offers. */
export interface Announcer {
  announce(server: KubeServerDraft): Promise<unknown>;
  remove(name: string): Promise<unknown>;
}

/** Parses stored kube_server documents; an unreadable entry is reported, not thrown. */
export function parseKubeServers(values: readonly {key: string; value: string}[], onBad?: (key: string, error: Error) => void): KubeServer[] {
  const out: KubeServer[] = [];
  for (const item of values) {
    try {
      const doc = JSON.parse(item.value) as KubeServer;
      if (doc.kind !== 'kube_server' || typeof doc.metadata?.name !== 'string') throw new Error('not a kube_server document');
      out.push(doc);
    } catch (error) {
      onBad?.(item.key, error as Error);
    }
  }
  return out;
}

/** Builds the registrar of one discovery group. */
export function createRegistrar(backend: RegistryBackend, announcer: Announcer, group: string, onBad?: (key: string, error: Error) => void): Registrar {
  return {
    current: async () => parseKubeServers(await backend.list(kubeServerPrefix(group)), onBad),
    announce: (server) => announcer.announce(server),
    remove: (name) => announcer.remove(name),
  };
}
