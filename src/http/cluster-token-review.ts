/**
 * Service-account tokens of discovered clusters (the RFD on Kubernetes joining): an allow-list
 * entry `cluster/namespace:serviceaccount` names the cluster by kube_server name or by a label
 * selector (`env=prod,team=a/monitoring:grafana`). A token is checked with a TokenReview against
 * each matching cluster's API, authenticated with the credential this service mints for that
 * cluster anyway (EKS presigned STS token, AKS Entra ID token). No shared secret: a workload in
 * any discovered cluster reads the inventory with its own identity.
 *
 * A token is a live credential of the cluster that issued it: it goes for review only to that
 * cluster. A service-account token names its issuer (`iss`), and discovery records each cluster's
 * issuer when the cloud reports it (`status.oidc_issuer`). So a token goes to the allow-listed
 * clusters whose issuer is its `iss`; when no discovered cluster has it, only to those whose issuer is not
 * recorded (an AKS cluster without an OIDC issuer, an entry written before issuers were), never
 * to a cluster known to have another issuer. A bearer that is no JWT (a static token, a cloud
 * credential pasted by mistake) is no service-account token: it goes to no cluster.
 */
import type {KubeAccess, KubeServer} from '../../heartbeats/kube-server.ts';
import type {TokenReviewer} from './auth.ts';
import {matchesSelector} from './label-selector.ts';
import {postTokenReview} from './token-review-call.ts';

/** One parsed allow-list entry. */
export interface AllowEntry {
  /** Undefined: this (the service's own) cluster. */
  readonly cluster?: {readonly name: string} | {readonly selector: Readonly<Record<string, string>>};
  /** `namespace:serviceaccount`. */
  readonly serviceAccount: string;
}

/** Parses `[cluster/]namespace:serviceaccount`; a cluster part with `=` is a label selector. */
export function parseAllowEntry(text: string): AllowEntry {
  const slash = text.lastIndexOf('/');
  if (slash < 0) return {serviceAccount: text};
  const cluster = text.slice(0, slash);
  const serviceAccount = text.slice(slash + 1);
  if (!cluster.includes('=')) return {cluster: {name: cluster}, serviceAccount};
  const selector: Record<string, string> = {};
  for (const part of cluster.split(',')) {
    const [k = '', v = ''] = part.split('=');
    selector[k.trim()] = v.trim();
  }
  return {cluster: {selector}, serviceAccount};
}

/** Options of clusterTokenReviewer. */
export interface ClusterTokenReviewOptions {
  readonly entries: readonly AllowEntry[];
  /** The current inventory. */
  readonly servers: () => readonly KubeServer[];
  /** Mints (or reuses) this service's credential for a cluster. */
  readonly credential: (access: KubeAccess) => Promise<string>;
  readonly timeoutMs?: number;
}

/** By kube_server name, or by the labels `/v1/clusters?labels=` selects on (the cluster's, the server's, dynamic results). */
function matches(server: KubeServer, cluster: NonNullable<AllowEntry['cluster']>): boolean {
  if ('name' in cluster) return server.metadata.name === cluster.name;
  return matchesSelector(server, Object.entries(cluster.selector));
}

/**
 * A reviewer that resolves to `cluster/namespace:serviceaccount` when some allow-listed
 * cluster authenticates the token as an allow-listed service account of that entry.
 */
export function clusterTokenReviewer(options: ClusterTokenReviewOptions): TokenReviewer {
  return async (token) => {
    // Service-account tokens, legacy and projected, are JWTs: anything else would only hand the clusters' endpoints a credential that is not theirs.
    const claims = jwtClaims(token);
    if (claims === undefined) return undefined;
    const remote = options.entries.filter((e) => e.cluster !== undefined);
    const servers = options.servers();
    // Every (entry, cluster) pair the allow-list names, in the allow-list's order.
    const candidates: {readonly entry: AllowEntry; readonly server: KubeServer}[] = [];
    for (const entry of remote) {
      for (const server of servers) {
        if (!entry.cluster || !matches(server, entry.cluster)) continue;
        if (!server.status?.endpoint || !server.status.access) continue;
        candidates.push({entry, server});
      }
    }
    const issuer = issuerOfClaims(claims);
    // An entry is any writer's document: an issuer that is not text is no issuer, not a failed review.
    const issuerOf = (server: KubeServer): string | undefined => {
      const recorded: unknown = server.status?.oidc_issuer;
      return typeof recorded === 'string' ? normalizeIssuer(recorded) : undefined;
    };
    // An issuer some discovered cluster has (allow-listed or not, reachable or not) names the cluster
    // that issued the token: no other cluster is asked, not even one whose issuer is not recorded.
    const known = issuer !== undefined && servers.some((s) => issuerOf(s) === issuer);
    const chosen = known ? candidates.filter((c) => issuerOf(c.server) === issuer) : candidates.filter((c) => issuerOf(c.server) === undefined);
    // One review per cluster: its answer is checked against every entry that names the cluster.
    const reviewed = new Map<string, string | undefined>();
    for (const {entry, server} of chosen) {
      const name = server.metadata.name;
      if (!reviewed.has(name)) reviewed.set(name, await review(server, token, options).catch(() => undefined));
      const identity = reviewed.get(name);
      if (identity !== undefined && identity === entry.serviceAccount) return `${name}/${identity}`;
    }
    return undefined;
  };
}

/** Longest JWT claims part read for its issuer; a service-account token's is a few hundred bytes. */
const MAX_CLAIMS_CHARS = 16_384;

/**
 * The claims of a token that is a JWT (three parts, the second a JSON object), read without
 * checking its signature: they only pick the cluster that is asked, and that cluster's
 * TokenReview checks the token. Undefined for a token that is not a JWT.
 */
function jwtClaims(token: string): object | undefined {
  const first = token.indexOf('.');
  const second = first < 0 ? -1 : token.indexOf('.', first + 1);
  if (second < 0 || token.indexOf('.', second + 1) >= 0 || second - first - 1 > MAX_CLAIMS_CHARS) return undefined;
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(token.slice(first + 1, second), 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  return typeof claims === 'object' && claims !== null && !Array.isArray(claims) ? claims : undefined;
}

/** The `iss` claim of a JWT's claims, as compared; undefined when it names no issuer. */
function issuerOfClaims(claims: object): string | undefined {
  const iss = (claims as {iss?: unknown}).iss;
  return typeof iss === 'string' ? normalizeIssuer(iss) : undefined;
}

/** An issuer as compared: without a trailing slash (AKS writes one in both places, EKS in neither). */
function normalizeIssuer(issuer: string | undefined): string | undefined {
  if (issuer === undefined) return undefined;
  const trimmed = issuer.endsWith('/') ? issuer.slice(0, -1) : issuer;
  return trimmed === '' ? undefined : trimmed;
}

/** One TokenReview against a discovered cluster; resolves to `namespace:serviceaccount` or undefined. */
async function review(server: KubeServer, token: string, options: ClusterTokenReviewOptions): Promise<string | undefined> {
  const status = server.status;
  if (!status?.endpoint || !status.access) return undefined;
  const bearer = await options.credential(status.access);
  const ca = status.ca_data ? Buffer.from(status.ca_data, 'base64').toString('utf8') : undefined;
  return postTokenReview({apiServer: status.endpoint, ca, bearer, token, timeoutMs: options.timeoutMs ?? 5000, what: `TokenReview on ${server.metadata.name}`});
}
