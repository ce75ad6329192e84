/** Pure mapping between registry keys / kube_server documents and Kubernetes object names and labels. */
import {createHash} from 'node:crypto';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
/** Suffix added to names that had to be rewritten; a valid name ending like this is rewritten too, so no two keys share a name. */
const HASHED = /-h[0-9a-f]{10}$/;
const KUBE_SERVERS = 'kube_servers/';

/**
 * The object name of a registry key. `kube_servers/<group>/<name>` becomes `<group>.<name>` when
 * that is a valid object name (what `kubectl get kubeservers` shows); anything else becomes a
 * sanitised form plus a hash of the whole key (hashedObjectName), deterministic and collision-free.
 * The original key is kept in the object's spec. Groups and names may both hold dots, so two
 * groups sharing a namespace can give two keys one `<group>.<name>` (`prod` / `eu.web` and
 * `prod.eu` / `web`): the backend then stores the second one under its hashed name (objectNamesForKey).
 */
export function objectNameForKey(key: string): string {
  return directObjectName(key) ?? hashedObjectName(key);
}

/**
 * The names a key may be stored under, in the order they are tried: `<group>.<name>`, then the
 * hashed name, which no other key has; only the hashed one when `<group>.<name>` is not valid.
 */
export function objectNamesForKey(key: string): readonly [string] | readonly [string, string] {
  const direct = directObjectName(key);
  return direct === undefined ? [hashedObjectName(key)] : [direct, hashedObjectName(key)];
}

function directObjectName(key: string): string | undefined {
  if (!key.startsWith(KUBE_SERVERS)) return undefined;
  const rest = key.slice(KUBE_SERVERS.length);
  const slash = rest.indexOf('/');
  if (slash <= 0 || rest.includes('/', slash + 1)) return undefined;
  const candidate = `${rest.slice(0, slash)}.${rest.slice(slash + 1)}`;
  return candidate.length <= 253 && DNS_SUBDOMAIN.test(candidate) && !HASHED.test(candidate) ? candidate : undefined;
}

/** A sanitised form of the key plus a hash of the whole key: no two keys share it, and no direct name looks like it. */
function hashedObjectName(key: string): string {
  const hash = createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 10);
  const base = key.toLowerCase().replace(/[^a-z0-9.-]+/g, '-').replace(/\.{2,}/g, '.').replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '').slice(0, 200)
    .replace(/[^a-z0-9]+$/g, '');
  return base === '' ? `k-h${hash}` : `${base}-h${hash}`;
}

/** True for a valid label key (optional DNS-subdomain prefix, then a name of at most 63 characters). */
export function isLabelKey(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && LABEL_NAME.test(name);
}

/** True for a valid label value. */
export function isLabelValue(value: string): boolean {
  return value.length <= 63 && LABEL_VALUE.test(value);
}

/** The labels of a kube_server that are valid Kubernetes labels; the others stay in the stored document only. */
export function kubeLabels(labels: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels ?? {})) {
    // Our own bookkeeping labels cannot be overridden by a cloud tag.
    if (k.startsWith('kube-discovery.io/')) continue;
    if (typeof v === 'string' && isLabelKey(k) && isLabelValue(v)) out[k] = v;
  }
  return out;
}

/** Printer-column facts read from a kube_server document; empty for other entries. */
export interface KubeServerSummary {
  readonly name?: string;
  readonly cloud?: string;
  readonly region?: string;
  readonly health?: string;
  readonly stale?: boolean;
  readonly labels: Record<string, string>;
}

/** Reads the facts `kubectl get kubeservers` shows from a stored kube_server JSON document; tolerant: not every entry is one. */
export function summarise(value: string): KubeServerSummary {
  let doc: unknown;
  try {
    doc = JSON.parse(value);
  } catch {
    return {labels: {}};
  }
  if (doc === null || typeof doc !== 'object') return {labels: {}};
  const d = doc as {kind?: unknown; metadata?: {name?: unknown; labels?: unknown}; spec?: {cluster?: {spec?: {aws?: {region?: unknown}; azure?: unknown}; metadata?: {labels?: unknown}}}; status?: {target_health?: {status?: unknown}; stale?: unknown}};
  if (d.kind !== 'kube_server') return {labels: {}};
  const labels = (d.metadata?.labels ?? d.spec?.cluster?.metadata?.labels ?? {}) as Record<string, string>;
  const cloud = d.spec?.cluster?.spec?.aws !== undefined ? 'aws' : d.spec?.cluster?.spec?.azure !== undefined ? 'azure' : undefined;
  const region = typeof d.spec?.cluster?.spec?.aws?.region === 'string' ? d.spec.cluster.spec.aws.region : labels['region'];
  return {
    ...(typeof d.metadata?.name === 'string' ? {name: d.metadata.name} : {}),
    ...(cloud === undefined ? {} : {cloud}),
    ...(typeof region === 'string' ? {region} : {}),
    ...(typeof d.status?.target_health?.status === 'string' ? {health: d.status.target_health.status} : {}),
    stale: d.status?.stale === true,
    labels: kubeLabels(typeof labels === 'object' ? labels : {}),
  };
}
