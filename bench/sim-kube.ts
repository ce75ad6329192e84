/**
 * The simulator's Kubernetes API servers (the shared HTTPS fake, one CA for all): healthy
 * clusters share a few servers, each unhealthy cluster gets its own. EKS tokens are checked by
 * the probe tests' EKS authenticator (SigV4 replayed to the fake STS, the principal mapped
 * through the cluster's access entries, so a missing entry is a 401 as on EKS); AKS accepts
 * Entra tokens issued for the AKS server application by the simulator's identity endpoint, or
 * the cluster's local account. A "forbidden" cluster's server denies `impersonate`.
 */
import {startFakeKubeApi, type FakeKubeApi, type KubeUser} from '../test/fakes/kube-api-server.ts';
import type {ArmWorld} from '../test/fakes/arm-world.ts';
import type {FakeAwsWorld} from '../test/fakes/aws-fakes.ts';
import {sharedServerTls} from '../test/fakes/tls-ca.ts';
import {eksAuthenticator, type EksClusterRef} from '../test/probe/eks-fixtures.ts';
import type {SimIdentity} from './sim-identity.ts';
import {clusterKey, type KubeEndpoints, type SimCluster} from './sim-world.ts';

/** Entra ID application id of the AKS API server: the audience of AKS tokens. */
export const AKS_SERVER_APP_ID = '6dae42f8-4368-4678-94ff-3960e28e3630';

/** The running API servers and the endpoint each cluster got. */
export interface SimKube extends KubeEndpoints {
  readonly servers: readonly FakeKubeApi[];
  /** CA every server certificate chains to. */
  readonly caPem: string;
  close(): Promise<void>;
}

interface ServerSlot {
  readonly forbidden: boolean;
  /** The EKS clusters it stands in for; the authenticator reads this array, so clusters added by churn count. */
  readonly eks: EksClusterRef[];
  readonly aks: SimCluster[];
  api?: FakeKubeApi;
}

/** Starts the API servers for `clusters`; `stsUrl` is the fake STS the EKS tokens are presigned for. */
export async function startSimKube(options: {
  readonly clusters: readonly SimCluster[];
  readonly sharedServers: number;
  readonly aws: FakeAwsWorld;
  readonly stsUrl?: string;
  readonly arm: ArmWorld;
  readonly identity: SimIdentity;
}): Promise<SimKube> {
  const tls = await sharedServerTls();
  const newSlot = (forbidden: boolean): ServerSlot => ({forbidden, eks: [], aks: []});
  const shared: ServerSlot[] = Array.from({length: Math.max(1, options.sharedServers)}, () => newSlot(false));
  const dedicated: ServerSlot[] = [];
  const slotOf = new Map<string, ServerSlot>();
  let next = 0;
  const assign = (c: SimCluster, slot: ServerSlot): void => {
    if (c.cloud === 'AWS') slot.eks.push({account: c.account, region: c.region, name: c.name});
    else slot.aks.push(c);
    slotOf.set(clusterKey(c), slot);
  };
  for (const c of options.clusters) {
    if (c.health === 'healthy') {
      assign(c, shared[next++ % shared.length] as ServerSlot);
    } else {
      const slot = newSlot(c.health === 'forbidden');
      dedicated.push(slot);
      assign(c, slot);
    }
  }

  const authenticator = (slot: ServerSlot) => {
    const eks = eksAuthenticator({world: options.aws, clusters: slot.eks, ...(options.stsUrl ? {stsUrl: options.stsUrl} : {})});
    // The probe reuses a cached token for several requests: check each token once per server.
    const verdicts = new Map<string, KubeUser | undefined>();
    return async (token: string): Promise<KubeUser | undefined> => {
      if (verdicts.has(token)) return verdicts.get(token);
      let user: KubeUser | undefined;
      if (token.startsWith('k8s-aws-v1.')) {
        user = await eks.authenticate(token);
        // Only what this run needs; the fixture keeps its own record of every token.
        eks.accepted.length = 0;
        eks.refused.length = 0;
      } else if (options.identity.resourceOf(token) === AKS_SERVER_APP_ID) {
        const aks = slot.aks.find((c) => c.aad);
        user = aks ? {user: `aad:${clusterKey(aks)}`, groups: ['system:authenticated']} : undefined;
      } else {
        const local = options.arm.localAccountIdentity(token);
        const mine = local && slot.aks.some((c) => c.name.toLowerCase() === local.cluster.name.toLowerCase());
        user = mine ? {user: local.user, groups: [...local.groups]} : undefined;
      }
      if (verdicts.size > 10_000) verdicts.clear();
      verdicts.set(token, user);
      return user;
    };
  };

  const slots = [...shared, ...dedicated].filter((s) => s.eks.length + s.aks.length > 0);
  await Promise.all(slots.map(async (slot) => {
    slot.api = await startFakeKubeApi({
      tls,
      authenticate: authenticator(slot),
      authorize: (_user, attrs) =>
        slot.forbidden && attrs.verb === 'impersonate'
          ? {allowed: false, reason: 'no RBAC policy matched (the simulator denies impersonation on this cluster)'}
          : true,
      gitVersion: 'v1.31.2',
    });
  }));
  const servers = slots.map((s) => s.api).filter((a): a is FakeKubeApi => a !== undefined);
  return {
    servers,
    caPem: tls.caPem,
    endpointFor(cluster) {
      let slot = slotOf.get(clusterKey(cluster));
      if (!slot) {
        // A cluster created by churn joins a running shared server.
        const running = shared.filter((s) => s.api);
        slot = running[next++ % Math.max(1, running.length)];
        if (!slot) return undefined;
        assign(cluster, slot);
      }
      return slot.api ? {url: slot.api.url, caPem: slot.api.caPem} : undefined;
    },
    async close() {
      await Promise.all(servers.map((s) => s.close()));
    },
  };
}
