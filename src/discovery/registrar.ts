/** The Registrar the cycle applies plans through: reads the group's entries, writes via the heartbeat. */
import {kubeServerPrefix, parseKubeServers, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import type {AnnounceOptions, Registrar} from './cycle.ts';

/** The writes a heartbeat offers. */
export interface Announcer {
  announce(server: KubeServerDraft, options?: AnnounceOptions): Promise<unknown>;
  remove(name: string): Promise<unknown>;
}

/** Builds the registrar of one discovery group. */
export function createRegistrar(backend: RegistryBackend, announcer: Announcer, group: string, onBad?: (key: string, error: Error) => void): Registrar {
  return {
    current: async () => parseKubeServers(await backend.list(kubeServerPrefix(group)), onBad),
    announce: (server, options) => announcer.announce(server, options),
    remove: (name) => announcer.remove(name),
  };
}
