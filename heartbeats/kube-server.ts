/**
 * The kube_server document in one place: its type (Teleport KubernetesServerV3 field names), the
 * draft the reconciler builds, its registry keys, the parser of stored entries and its canonical
 * JSON. Everything that reads or compares a stored kube_server goes through here.
 */
import type {RegistryItem} from '../src/registry/backend.ts';
import {errorMessage} from '../src/core/errors.ts';

/** Health of the path from the discovery service to a cluster's API. */
export interface TargetHealth {
  readonly status: 'healthy' | 'unhealthy' | 'unknown';
  /** Short machine reason: `unreachable`, `unauthorized`, `forbidden`, `tls`, `no_credentials` ... */
  readonly reason?: string;
  /** What the operator should do. */
  readonly message?: string;
  /** RFC 3339 time of the probe. */
  readonly transition_timestamp?: string;
}

/** A dynamic label: a command's output refreshed every period. */
export interface CommandLabel {
  readonly period: string;
  readonly command: readonly string[];
  readonly result: string;
}

/** KubernetesClusterV3 as embedded in a kube_server. */
export interface KubeCluster {
  readonly kind: 'kube_cluster';
  readonly version: 'v3';
  readonly metadata: {
    readonly name: string;
    readonly description: string;
    readonly labels: Readonly<Record<string, string>>;
  };
  readonly spec: {
    readonly aws?: {readonly region: string; readonly account_id: string; readonly name: string};
    readonly azure?: {
      readonly resource_name: string;
      readonly resource_group: string;
      readonly tenant_id: string;
      readonly subscription_id: string;
    };
    readonly dynamic_labels?: Readonly<Record<string, CommandLabel>>;
  };
}

/** KubernetesServerV3: the announced, heartbeated record of one discovered cluster. */
export interface KubeServer {
  readonly kind: 'kube_server';
  readonly version: 'v3';
  readonly metadata: {
    readonly name: string;
    readonly labels?: Readonly<Record<string, string>>;
    /** RFC 3339 expiry; heartbeats move it forward. */
    readonly expires: string;
    /** Backend revision of the last write. */
    readonly revision: string;
  };
  readonly spec: {
    /** Version of kube-discovery that wrote it. */
    readonly version: string;
    readonly hostname: string;
    readonly host_id: string;
    readonly cluster: KubeCluster;
    readonly proxy_ids: readonly string[];
  };
  readonly status?: {
    readonly target_health?: TargetHealth;
    /** Set while the cluster's source keeps failing: the entry is kept, but may be out of date. */
    readonly stale?: boolean;
    readonly stale_reason?: string;
    /** RFC 3339 time the discovery group first registered the cluster (the AGE of `ls`); kept by every update. */
    readonly discovered_at?: string;
    /** Connection facts the CLI needs for kubeconfig; never a credential. */
    readonly endpoint?: string;
    readonly ca_data?: string;
    /** EKS authentication mode (API, API_AND_CONFIG_MAP, CONFIG_MAP) or AKS auth flavour, for probe messages. */
    readonly auth_mode?: string;
    /** How to mint a token for this cluster (exec plugin arguments); never a credential. */
    readonly access?: KubeAccess;
    /** The issuer (`iss`) of the cluster's service-account tokens, when the cloud reports it (EKS OIDC issuer, AKS OIDC issuer). */
    readonly oidc_issuer?: string;
  };
}

/** Arguments the `token` command needs for one cluster. */
export type KubeAccess =
  | {
      readonly kind: 'eks';
      readonly cluster_name: string;
      readonly region: string;
      readonly role_arn?: string;
      readonly external_id?: string;
    }
  | {
      readonly kind: 'aks';
      /** Entra ID server app id (AAD clusters); absent for local-account clusters. */
      readonly server_id?: string;
      readonly subscription_id: string;
      readonly resource_group: string;
      readonly resource_name: string;
      readonly cloud?: string;
    };

/** Registry key prefix of a discovery group: `kube_servers/<group>/`. */
export function kubeServerPrefix(group: string): string {
  return `kube_servers/${group}/`;
}

/** Registry key of one kube_server: `kube_servers/<group>/<name>`. */
export function kubeServerKey(group: string, name: string): string {
  return `${kubeServerPrefix(group)}${name}`;
}

/** A kube_server as the reconciler builds it: expiry and revision come from the registry, identity from the heartbeat. */
export type KubeServerDraft = Omit<KubeServer, 'metadata' | 'spec'> & {
  readonly metadata: Omit<KubeServer['metadata'], 'expires' | 'revision'>;
  readonly spec: Omit<KubeServer['spec'], 'version' | 'hostname' | 'host_id'> &
    Partial<Pick<KubeServer['spec'], 'version' | 'hostname' | 'host_id'>>;
};

/**
 * Reads a stored kube_server, with `expires` and `revision` taken from the registry (keepalives move
 * the expiry without rewriting the document, and the revision is only known after the write).
 * Throws, naming the key, when the entry is not JSON or not a kube_server.
 */
export function kubeServerFromItem(item: Pick<RegistryItem, 'key' | 'value' | 'expires' | 'revision'>): KubeServer {
  let parsed: unknown;
  try {
    parsed = JSON.parse(item.value);
  } catch (err) {
    throw new Error(`registry entry ${item.key} is not valid JSON: ${errorMessage(err)}`, {cause: err});
  }
  return kubeServerFromDocument(item, parsed);
}

/**
 * Like `kubeServerFromItem`, from the writer's own object for `item.value` (a local backend hands it
 * on with the put event) instead of parsing the text again: one copy of the document, not two.
 */
export function kubeServerFromDocument(item: Pick<RegistryItem, 'key' | 'expires' | 'revision'>, document: unknown, expiresText?: (ms: number) => string): KubeServer {
  const kind = (document as {kind?: unknown} | null)?.kind;
  if (kind !== 'kube_server') throw new Error(`registry entry ${item.key}: expected kind "kube_server", found ${JSON.stringify(kind)}`);
  const server = document as KubeServer;
  if (typeof server.metadata?.name !== 'string') throw new Error(`registry entry ${item.key}: expected a string metadata.name, found ${JSON.stringify(server.metadata?.name)}`);
  // `expiresText` lets a reader holding thousands of entries on one lease share one copy of the text.
  const expires = item.expires === undefined ? server.metadata.expires : (expiresText?.(item.expires) ?? new Date(item.expires).toISOString());
  return {...server, metadata: {...server.metadata, expires, revision: item.revision}};
}

/** The status keys of a reachable discovered cluster's document, in the order it is built with. */
const DISCOVERED_STATUS_KEYS = ['target_health', 'endpoint', 'ca_data', 'auth_mode', 'access'] as const;
/** The same with the token issuer the cloud reported (every EKS cluster, AKS clusters with an OIDC issuer). */
const DISCOVERED_ISSUER_STATUS_KEYS = [...DISCOVERED_STATUS_KEYS, 'oidc_issuer'] as const;

/**
 * `{...status, target_health, discovered_at}` (each only when given), the same keys in the same
 * order. A status with exactly a reachable cluster's keys (the usual one) is built with all of them
 * at once: spread and then added to, its last keys took a separate property array per entry.
 */
export function statusWith(status: KubeServer['status'], targetHealth: TargetHealth | undefined, discoveredAt: string | undefined): NonNullable<KubeServer['status']> {
  if (status && discoveredAt && hasExactly(status, DISCOVERED_STATUS_KEYS)) {
    const {target_health, endpoint, ca_data, auth_mode, access} = status;
    return {target_health: targetHealth ?? target_health, endpoint, ca_data, auth_mode, access, discovered_at: discoveredAt};
  }
  if (status && discoveredAt && hasExactly(status, DISCOVERED_ISSUER_STATUS_KEYS)) {
    const {target_health, endpoint, ca_data, auth_mode, access, oidc_issuer} = status;
    return {target_health: targetHealth ?? target_health, endpoint, ca_data, auth_mode, access, oidc_issuer, discovered_at: discoveredAt};
  }
  return {...status, ...(targetHealth ? {target_health: targetHealth} : {}), ...(discoveredAt ? {discovered_at: discoveredAt} : {})};
}

/** Whether `record`'s own keys are exactly `keys`, in that order, none of them undefined. */
function hasExactly(record: object, keys: readonly string[]): boolean {
  let i = 0;
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue;
    if (key !== keys[i] || (record as Record<string, unknown>)[key] === undefined) return false;
    i++;
  }
  return i === keys.length;
}

/** Reads stored kube_servers; an unreadable entry is reported through `onBad` and left out, never thrown. */
export function parseKubeServers(items: readonly Pick<RegistryItem, 'key' | 'value' | 'expires' | 'revision'>[], onBad?: (key: string, error: Error) => void): KubeServer[] {
  const out: KubeServer[] = [];
  for (const item of items) {
    try {
      out.push(kubeServerFromItem(item));
    } catch (error) {
      onBad?.(item.key, error instanceof Error ? error : new Error(String(error)));
    }
  }
  return out;
}

/** The document without its registry fields (`expires`, `revision`): what a writer compares and re-puts. */
export function withoutRegistryFields(server: KubeServer | KubeServerDraft): KubeServerDraft {
  const {expires: _expires, revision: _revision, ...metadata} = server.metadata as KubeServer['metadata'];
  return {...server, metadata};
}

/**
 * Whether announcing `draft` would store what `stored` holds: the same document but for the
 * registry's fields (expires, revision) and the writer's (version, hostname, host_id).
 */
export function sameAsStored(stored: KubeServer, draft: KubeServerDraft): boolean {
  const {version: _version, hostname: _hostname, host_id: _hostId, ...spec} = stored.spec;
  const {version: _draftVersion, hostname: _draftHostname, host_id: _draftHostId, ...draftSpec} = draft.spec;
  return sameJson({...withoutRegistryFields(stored), spec}, {...draft, spec: draftSpec});
}

/** JSON with object keys sorted, so label order never looks like a change. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/**
 * `canonicalJson(a) === canonicalJson(b)`, without writing either out when they are equal: a
 * steady cycle compares every entry with what it had, and serialising both sides (sorted copies
 * of every object) was a large share of its CPU.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  return structurallyEqual(a, b) || canonicalJson(a) === canonicalJson(b);
}

/** True only when both sides have the same canonical JSON; false may be wrong (edge cases), so the caller confirms it. */
function structurallyEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (typeof (a as {toJSON?: unknown}).toJSON === 'function' || typeof (b as {toJSON?: unknown}).toJSON === 'function') return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!structurallyEqual(a[i], b[i])) return false;
    return true;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  // Keys whose value is undefined are left out of JSON, so they count as absent on both sides.
  // for-in with hasOwn visits what Object.keys lists without allocating its array (called per entry per cycle).
  let present = 0;
  for (const key in x) {
    if (!Object.hasOwn(x, key) || x[key] === undefined) continue;
    present++;
    if (!Object.hasOwn(y, key) || !structurallyEqual(x[key], y[key])) return false;
  }
  for (const key in y) if (Object.hasOwn(y, key) && y[key] !== undefined) present--;
  return present === 0;
}
