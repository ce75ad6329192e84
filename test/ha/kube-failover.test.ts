/**
 * Two replicas of `kube-discovery start` on `storage: kubernetes` against the fake API server:
 * the Lease elects one leader, whose entries kubectl lists as KubeServers; SIGKILL it and the
 * survivor takes the Lease over and keeps every entry (none lost, none duplicated); the killed
 * replica restarts without any volume and keeps its host id (its identity Secret). Every wait
 * is on an event (status, log line, Lease object), never on wall time.
 */
import {execFile} from 'node:child_process';
import {existsSync} from 'node:fs';
import {writeFile} from 'node:fs/promises';
import path from 'node:path';
import {promisify} from 'node:util';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {electionLeaseName} from '../../src/ha/lease-election.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {freePort} from '../helpers/net.ts';
import {spawnCli, type CliProcess} from '../helpers/process.ts';
import {replicaNames, replicaStatus, until, type Replica} from '../helpers/replica.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {startKubeEnv} from '../kubernetes/kube-env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAKUBEFAILOVER0001', secretAccessKey: 'kube-failover-secret'};
const CLUSTERS = ['a', 'b', 'c', 'd', 'e'];
const KUBECTL = existsSync('/usr/bin/kubectl') ? '/usr/bin/kubectl' : 'kubectl';
const run = promisify(execFile);

const status = replicaStatus;
const names = replicaNames;

describe('high availability on the Kubernetes API', () => {
  let kube: KubeEnv;
  let aws: AwsServiceWorld;
  const replicas: Replica[] = [];

  const start = (r: Replica): void => {
    r.proc = spawnCli(['start', '-c', path.join(kube.dir, `${r.name}.yaml`)], {
      ...aws.childEnv(),
      KUBE_DISCOVERY_REPLICA: r.name,
      POD_NAME: r.name,
    });
  };

  beforeAll(async () => {
    kube = await startKubeEnv();
    aws = await startAwsServiceWorld({
      key: KEY,
      account: ACCOUNT,
      tmpPrefix: 'kd-kube-ha-',
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
storage: {type: kubernetes, namespace: kd, kubeconfig: "${kube.kubeconfigPath}", session_ttl: 3s}
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
    await kube.close();
  });

  it('SIGKILL of the leader: the survivor takes the Lease over with every entry; the restarted pod keeps its host id', async () => {
    const [r1, r2] = replicas as [Replica, Replica];
    start(r1);
    await until('pod-1 leads with every cluster', async () => (await status(r1))?.role === 'leader' && (await names(r1))?.length === CLUSTERS.length);
    start(r2);
    await until('pod-2 follows with the inventory', async () => (await status(r2))?.role === 'follower' && (await names(r2))?.length === CLUSTERS.length);
    const hostId = (await status(r1))?.host_id;
    const inventory = ((await names(r1)) ?? []).sort();
    expect(hostId).toMatch(/^[0-9a-f-]{36}$/);

    // The registry is plain Kubernetes objects: kubectl lists them with their columns.
    const {stdout} = await run(KUBECTL, ['--kubeconfig', kube.kubeconfigPath, 'get', 'kubeservers', '-n', 'kd', '--no-headers']);
    expect(stdout.trim().split('\n').map((l) => l.split(/\s+/).slice(0, 3).join(' ')).sort()).toEqual(inventory.map((n) => `ha.${n} aws us-east-1`));

    const lease = () => kube.server.getObject('coordination.k8s.io', 'leases', 'kd', electionLeaseName('ha'))?.['spec'] as {holderIdentity: string; leaseTransitions: number} | undefined;
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
    console.log(`kubernetes failover: SIGKILL to the new leader's first completed cycle took ${Date.now() - killedAt} ms (lease 3 s)`);
    expect(lease()).toMatchObject({holderIdentity: 'pod-2', leaseTransitions: 1});
    expect(Math.min(...seen), 'the survivor never served fewer entries').toBe(CLUSTERS.length);
    const objects = kube.server.listObjects('kube-discovery.io', 'kubeservers', 'kd');
    expect(objects.map((o) => (o['spec'] as {key: string}).key).sort()).toEqual(inventory.map((n) => `kube_servers/ha/${n}`));

    // Restart without volumes: same pod name, same identity Secret, same host id; it follows.
    start(r1);
    await until('pod-1 is back as follower', async () => (await status(r1))?.role === 'follower' && (await names(r1))?.length === CLUSTERS.length);
    expect((await status(r1))?.host_id).toBe(hostId);
    expect((await status(r2))?.role).toBe('leader');
  }, 240_000);
});
