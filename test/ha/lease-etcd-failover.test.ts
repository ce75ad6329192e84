/**
 * Two replicas of `kube-discovery start` on a real etcd with `leader_election: kubernetes_lease`
 * against the fake API server: the Lease (not etcd's election) picks the leader; SIGKILL it and
 * the survivor takes the Lease over, runs a cycle and keeps every entry (none lost, none
 * duplicated). Every wait is on an event (status, log line, Lease object), never on wall time.
 */
import {writeFile} from 'node:fs/promises';
import path from 'node:path';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {electionLeaseName} from '../../src/ha/lease-election.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {freePort} from '../helpers/net.ts';
import {spawnCli, type CliProcess} from '../helpers/process.ts';
import {replicaNames, replicaStatus, until, type Replica} from '../helpers/replica.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {startKubeEnv} from '../kubernetes/kube-env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIALEASEETCD0000001', secretAccessKey: 'lease-etcd-secret'};
const CLUSTERS = ['a', 'b', 'c', 'd', 'e'];

const status = replicaStatus;
const names = replicaNames;

describeWithEtcd('high availability on etcd with the leader elected on a Kubernetes Lease', () => {
  let kube: KubeEnv;
  let etcd: TestEtcd;
  let aws: AwsServiceWorld;
  const replicas: Replica[] = [];

  const start = (r: Replica): void => {
    r.proc = spawnCli(['start', '-c', path.join(kube.dir, `${r.name}.yaml`)], {
      ...aws.childEnv(),
      KUBE_DISCOVERY_REPLICA: r.name,
    });
  };

  beforeAll(async () => {
    kube = await startKubeEnv();
    etcd = await startEtcd();
    aws = await startAwsServiceWorld({
      key: KEY,
      account: ACCOUNT,
      tmpPrefix: 'kd-lease-ha-',
      setProcessEnv: false,
      populate: (world) => {
        for (const name of CLUSTERS) world.addCluster(ACCOUNT, 'us-east-1', {name});
      },
    });
    for (const name of ['pod-1', 'pod-2']) {
      const port = await freePort();
      await writeFile(path.join(kube.dir, `${name}.yaml`), `version: v1
discovery_service:
  discovery_group: ha
  poll_interval: 10s
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: etcd, endpoints: ["${etcd.endpoint}"], session_ttl: 30s}
leader_election: {type: kubernetes_lease, namespace: kd, kubeconfig: "${kube.kubeconfigPath}", lease_duration: 3s}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:${port}"}
`);
      replicas.push({name, port, proc: undefined as unknown as CliProcess});
    }
  });

  afterAll(async () => {
    for (const r of replicas) {
      r.proc?.child.kill('SIGKILL');
      await r.proc?.exited;
    }
    await aws.close();
    await etcd.stop();
    await kube.close();
  });

  it('SIGKILL of the leader: the survivor takes the Lease over, runs a cycle and keeps every entry', async () => {
    const [r1, r2] = replicas as [Replica, Replica];
    start(r1);
    await until('pod-1 leads with every cluster', async () => (await status(r1))?.role === 'leader' && (await names(r1))?.length === CLUSTERS.length);
    start(r2);
    await until('pod-2 follows with the inventory', async () => (await status(r2))?.role === 'follower' && (await names(r2))?.length === CLUSTERS.length);
    const inventory = ((await names(r1)) ?? []).sort();
    const lease = () => kube.server.getObject('coordination.k8s.io', 'leases', 'kd', electionLeaseName('ha'))?.['spec'] as {holderIdentity: string; leaseTransitions: number} | undefined;
    // The Lease decides, although etcd (with its own election) is the storage; etcd's session TTL (30 s) is far longer.
    expect(lease()).toMatchObject({holderIdentity: 'pod-1', leaseTransitions: 0});

    const killedAt = Date.now();
    r1.proc.child.kill('SIGKILL');
    await r1.proc.exited;
    const seen: number[] = [];
    await until('pod-2 leads and completed a cycle', async () => {
      const list = await names(r2);
      if (list) {
        seen.push(list.length);
        expect(new Set(list).size, 'no duplicate names').toBe(list.length);
      }
      const out = r2.proc.stdout();
      return (await status(r2))?.role === 'leader' && /"event":"cycle"/.test(out.slice(out.lastIndexOf('leading discovery group')));
    });
    console.log(`etcd + Lease failover: SIGKILL to the new leader's first completed cycle took ${Date.now() - killedAt} ms (lease 3 s)`);
    expect(lease()).toMatchObject({holderIdentity: 'pod-2', leaseTransitions: 1});
    expect(Math.min(...seen), 'the survivor never served fewer entries').toBe(CLUSTERS.length);
    expect(((await names(r2)) ?? []).sort()).toEqual(inventory);
  }, 240_000);
});
