/**
 * Two replicas of `kube-discovery start` on a real etcd with `leader_election: kubernetes_lease`
 * against the fake API server: the Lease (not etcd's election) picks the leader; SIGKILL it and
 * the survivor takes the Lease over, runs a cycle and keeps every entry (none lost, none
 * duplicated). Every wait is on an event (status, log line, Lease object), never on wall time.
 */
import path from 'node:path';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {electionLeaseName} from '../../src/ha/lease-election.ts';
import type {AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {spawnCli} from '../helpers/process.ts';
import {HA_CLUSTERS as CLUSTERS, killLeaderUntilTakeover, killReplicas, replicaNames, startHaWorld, startLeaderThenFollower, writeReplicaConfigs, type Replica} from '../helpers/replica.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {startKubeEnv} from '../kubernetes/kube-env.ts';

const KEY = {accessKeyId: 'AKIALEASEETCD0000001', secretAccessKey: 'lease-etcd-secret'};

const names = replicaNames;

describeWithEtcd('high availability on etcd with the leader elected on a Kubernetes Lease', () => {
  let kube: KubeEnv;
  let etcd: TestEtcd;
  let aws: AwsServiceWorld;
  let replicas: Replica[] = [];

  const start = (r: Replica): void => {
    r.proc = spawnCli(['start', '-c', path.join(kube.dir, `${r.name}.yaml`)], {
      ...aws.childEnv(),
      KUBE_DISCOVERY_REPLICA: r.name,
    });
  };

  beforeAll(async () => {
    kube = await startKubeEnv();
    etcd = await startEtcd();
    aws = await startHaWorld({key: KEY, tmpPrefix: 'kd-lease-ha-'});
    replicas = await writeReplicaConfigs(['pod-1', 'pod-2'], (name) => path.join(kube.dir, `${name}.yaml`), `
storage: {type: etcd, endpoints: ["${etcd.endpoint}"], session_ttl: 30s}
leader_election: {type: kubernetes_lease, namespace: kd, kubeconfig: "${kube.kubeconfigPath}", lease_duration: 3s}
`);
  });

  afterAll(async () => {
    await killReplicas(replicas);
    await aws.close();
    await etcd.stop();
    await kube.close();
  });

  it('SIGKILL of the leader: the survivor takes the Lease over, runs a cycle and keeps every entry', async () => {
    const [r1, r2] = replicas as [Replica, Replica];
    await startLeaderThenFollower(start, r1, r2);
    const inventory = ((await names(r1)) ?? []).sort();
    const lease = () => kube.server.getObject('coordination.k8s.io', 'leases', 'kd', electionLeaseName('ha'))?.['spec'] as {holderIdentity: string; leaseTransitions: number} | undefined;
    // The Lease decides, although etcd (with its own election) is the storage; etcd's session TTL (30 s) is far longer.
    expect(lease()).toMatchObject({holderIdentity: 'pod-1', leaseTransitions: 0});

    const {seen, ms} = await killLeaderUntilTakeover(r1, r2);
    console.log(`etcd + Lease failover: SIGKILL to the new leader's first completed cycle took ${ms} ms (lease 3 s)`);
    expect(lease()).toMatchObject({holderIdentity: 'pod-2', leaseTransitions: 1});
    expect(Math.min(...seen), 'the survivor never served fewer entries').toBe(CLUSTERS.length);
    expect(((await names(r2)) ?? []).sort()).toEqual(inventory);
  }, 240_000);
});
