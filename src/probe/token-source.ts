/**
 * Where probes get bearer tokens: one source per cloud, picked by `access.kind`. Explicit
 * registration: EKS is built in, AKS plugs into the `aks` slot.
 */
import type {KubeAccess} from '../../heartbeats/kube-server.ts';

/** Mints (or returns a cached) bearer token for one cluster, and can forget one the cluster refused. */
export interface TokenSource {
  /** The token for the cluster `access` describes. Errors never contain a token. */
  readonly token: (access: KubeAccess) => Promise<string>;
  /** Drops a cached token so the next `token` call mints a new one. */
  readonly forget?: (access: KubeAccess) => void;
}

/** Token sources by cloud; `aks` is filled in by the AKS credentials. */
export interface TokenSources {
  readonly eks: TokenSource;
  readonly aks?: TokenSource;
}

/** One TokenSource that dispatches on `access.kind`; a kind without a source fails with the list of configured ones. */
export function tokenSources(sources: TokenSources): TokenSource {
  const pick = (access: KubeAccess): TokenSource => {
    const source = sources[access.kind];
    if (!source) {
      const known = Object.entries(sources).filter(([, s]) => s !== undefined).map(([k]) => k);
      throw new Error(`no token source for ${access.kind} clusters; configured: ${known.join(', ')}`);
    }
    return source;
  };
  return {
    token: async (access) => pick(access).token(access),
    forget: (access) => {
      const source = sources[access.kind];
      source?.forget?.(access);
    },
  };
}
