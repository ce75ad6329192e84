/**
 * Fixtures for probe, kubeconfig and kubectl tests: an EKS-style authenticator for the fake
 * Kubernetes API (token checked against the fake AWS world, identity mapped through the
 * cluster's access entries, as EKS does) and kube_server builders.
 */
import type {KubeAccess, KubeServer} from '../../heartbeats/kube-server.ts';
import type {FakeAwsWorld} from '../fakes/aws-world.ts';
import {canonicalPrincipalArn, verifyEksToken} from '../fakes/eks-token.ts';
import type {KubeAuthenticator, KubeUser} from '../fakes/kube-api-server.ts';
import {EKS_CLUSTER_ADMIN_GROUP} from '../fakes/kube-rbac-authorizer.ts';

/** An EKS cluster of the fake world the API server stands in for. */
export interface EksClusterRef {
  readonly account: string;
  readonly region: string;
  readonly name: string;
}

/** One token the authenticator accepted. */
export interface AcceptedToken {
  readonly cluster: string;
  readonly principalArn: string;
  /** The raw token: a secret, for assertions only. */
  readonly token: string;
}

/** An authenticator plus what it saw. */
export interface EksAuthn {
  readonly authenticate: KubeAuthenticator;
  /** Valid tokens, mapped or not. */
  readonly accepted: AcceptedToken[];
  /** Why refused tokens were refused. */
  readonly refused: string[];
}

/**
 * Authenticates bearer tokens like aws-iam-authenticator: the token must be a correctly signed
 * presigned GetCallerIdentity for one of `clusters`. Tokens presigned for a real STS host are
 * verified offline against the world; tokens presigned for the fake STS (`stsUrl`, set through
 * AWS_ENDPOINT_URL_STS) are replayed to it with the cluster's `x-k8s-aws-id`, as the
 * authenticator does with STS. The caller is then mapped through the cluster's access entries.
 */
export function eksAuthenticator(options: {world: FakeAwsWorld; clusters: readonly EksClusterRef[]; now?: () => number; stsUrl?: string}): EksAuthn {
  const {world, clusters} = options;
  const accepted: AcceptedToken[] = [];
  const refused: string[] = [];
  const authenticate = async (token: string): Promise<KubeUser | undefined> => {
    if (!token.startsWith('k8s-aws-v1.')) {
      refused.push('not an EKS token');
      return undefined;
    }
    const url = new URL(Buffer.from(token.slice('k8s-aws-v1.'.length), 'base64url').toString('utf8'));
    const viaFakeSts = options.stsUrl !== undefined && url.origin === new URL(options.stsUrl).origin;
    for (const cluster of clusters) {
      const principalArn = viaFakeSts ? await replay(url, cluster.name, refused) : await offline(world, token, cluster.name, options.now, refused);
      if (principalArn === undefined) continue;
      accepted.push({cluster: cluster.name, principalArn, token});
      const entry = world.cluster(cluster.account, cluster.region, cluster.name)?.accessEntries.get(principalArn);
      if (!entry) {
        refused.push(`${principalArn} has no access entry in ${cluster.name}`);
        return undefined;
      }
      // EKS authorizes access policies itself; the fake RBAC authorizer sees cluster-admin as a group.
      const admin = [...entry.accessPolicies.keys()].some((arn) => arn.endsWith('/AmazonEKSClusterAdminPolicy'));
      return {user: entry.username, groups: admin ? [...entry.kubernetesGroups, EKS_CLUSTER_ADMIN_GROUP] : entry.kubernetesGroups};
    }
    return undefined;
  };
  return {authenticate, accepted, refused};
}

async function offline(world: FakeAwsWorld, token: string, clusterName: string, now: (() => number) | undefined, refused: string[]): Promise<string | undefined> {
  const verdict = await verifyEksToken(world, token, {clusterName, ...(now ? {now: now()} : {})});
  if (verdict.ok) return verdict.principalArn;
  refused.push(verdict.reason);
  return undefined;
}

/** Replays the presigned URL to the fake STS with this cluster's id header; the signature covers it. */
async function replay(url: URL, clusterName: string, refused: string[]): Promise<string | undefined> {
  const q = url.searchParams;
  if (q.get('Action') !== 'GetCallerIdentity' || !(q.get('X-Amz-SignedHeaders') ?? '').split(';').includes('x-k8s-aws-id')) {
    refused.push('not a presigned GetCallerIdentity signing x-k8s-aws-id');
    return undefined;
  }
  const res = await fetch(url, {headers: {'x-k8s-aws-id': clusterName}});
  const body = await res.text();
  const arn = /<Arn>([^<]+)<\/Arn>/.exec(body)?.[1];
  if (res.status !== 200 || arn === undefined) {
    refused.push(`STS answered ${res.status}`);
    return undefined;
  }
  return canonicalPrincipalArn(arn);
}

/** Base64 of a PEM, as EKS reports `certificateAuthority.data`. */
export function base64(pem: string): string {
  return Buffer.from(pem, 'utf8').toString('base64');
}

/** A stored kube_server for an EKS cluster. */
export function eksKubeServer(
  name: string,
  options: {endpoint?: string; caPem?: string; access?: Partial<Extract<KubeAccess, {kind: 'eks'}>> | null; labels?: Record<string, string>; account?: string} = {},
): KubeServer {
  const region = options.access?.region ?? 'us-east-1';
  const clusterName = options.access?.cluster_name ?? name;
  const account = options.account ?? '111111111111';
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels: {'teleport.internal/discovery-group-name': 'g1'}, expires: '2026-01-01T00:10:00Z', revision: '1'},
    spec: {
      version: '0.0.0-test',
      hostname: 'node-1',
      host_id: 'host-1',
      cluster: {
        kind: 'kube_cluster',
        version: 'v3',
        metadata: {name, description: `EKS cluster "${clusterName}" in ${region}`, labels: {region, 'account-id': account, ...options.labels}},
        spec: {aws: {region, account_id: account, name: clusterName}},
      },
      proxy_ids: [],
    },
    status: {
      target_health: {status: 'unknown', reason: 'not_probed', message: 'not probed yet'},
      ...(options.endpoint === undefined ? {} : {endpoint: options.endpoint}),
      ...(options.caPem === undefined ? {} : {ca_data: base64(options.caPem)}),
      ...(options.access === null ? {} : {access: {kind: 'eks', cluster_name: clusterName, region, ...options.access}}),
    },
  };
}

/** A stored kube_server for an AKS cluster. */
export function aksKubeServer(name: string, options: {endpoint: string; caPem: string; serverId?: string; labels?: Record<string, string>}): KubeServer {
  const base = eksKubeServer(name, {endpoint: options.endpoint, caPem: options.caPem, access: null, labels: options.labels ?? {}});
  return {
    ...base,
    spec: {
      ...base.spec,
      cluster: {
        ...base.spec.cluster,
        metadata: {...base.spec.cluster.metadata, labels: {region: 'eastus', 'subscription-id': 'sub-1', 'resource-group': 'rg-a', ...options.labels}},
        spec: {azure: {resource_name: name, resource_group: 'rg-a', tenant_id: 'tenant-1', subscription_id: 'sub-1'}},
      },
    },
    status: {
      ...base.status,
      access: {
        kind: 'aks',
        ...(options.serverId ? {server_id: options.serverId} : {}),
        subscription_id: 'sub-1',
        resource_group: 'rg-a',
        resource_name: name,
      },
    },
  };
}

/** Resolves once `condition` holds, checking after each turn of the event loop (no timers involved). */
export async function until(condition: () => boolean, what: string, maxTurns = 1_000_000): Promise<void> {
  for (let i = 0; i < maxTurns; i++) {
    if (condition()) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  throw new Error(`gave up waiting for ${what}`);
}
