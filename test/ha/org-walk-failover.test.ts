/**
 * The organization walk's two-walk rule across a leader change: two replicas of `kube-discovery
 * start` on one real etcd, an organization matcher over the wire-level AWS fake. A member account
 * goes missing from the organization just as the leader is SIGKILLed: the new leader's first walk
 * (it never walked before, so it has no previous walk of its own) must keep that account's
 * clusters, stale, and only its second walk deregisters them. Every step waits for what the
 * replicas say, never for wall time; a failure prints both logs.
 */
import {writeFile} from 'node:fs/promises';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {FakeOrganization} from '../fakes/aws-fakes.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {spawnCli, type CliProcess} from '../helpers/process.ts';
import {replicaJson, replicaNames, replicaOutputs, until as untilSaid, type Replica} from '../helpers/replica.ts';

const MGMT = '111111111111';
const MOVER = '222222222222';
const STAYER = '333333333333';
const ROLE = 'kube-discovery';
const KEYS: Record<string, {accessKeyId: string; secretAccessKey: string}> = {
  r1: {accessKeyId: 'AKIAORGFAILOVER00001', secretAccessKey: 'org-failover-secret-1'},
  r2: {accessKeyId: 'AKIAORGFAILOVER00002', secretAccessKey: 'org-failover-secret-2'},
};
const MOVER_CLUSTER = `m-eks-us-east-1-${MOVER}`;
const BOTH = [MOVER_CLUSTER, `s-eks-us-east-1-${STAYER}`];
// Budget for one step on a loaded machine (two Node processes, etcd and the suite share two CPUs).
const STEP_MS = 120_000;

function logs(r: Replica, from = 0): {msg: string; event?: string}[] {
  const text = r.proc.stdout().slice(from);
  return text
    .slice(0, text.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as {msg: string});
}

let everyReplica: readonly Replica[] = [];
const until = <T>(what: string, fn: () => Promise<T | undefined | false>): Promise<T> => untilSaid(what, fn, STEP_MS, () => replicaOutputs(everyReplica));
const sorted = async (r: Replica): Promise<string[] | undefined> => (await replicaNames(r))?.sort();

describeWithEtcd('the organization walk across a leader change', () => {
  let etcd: TestEtcd;
  let aws: AwsServiceWorld;
  let org: FakeOrganization;
  const replicas: Replica[] = [];
  const start = (r: Replica): void => {
    r.proc = spawnCli(['start', '-c', aws.file(`${r.name}.yaml`)], aws.childEnv({KUBE_DISCOVERY_REPLICA: r.name}, KEYS[r.name]));
  };

  beforeAll(async () => {
    etcd = await startEtcd();
    aws = await startAwsServiceWorld({
      key: KEYS['r1']!,
      extraKeys: [KEYS['r2']!],
      account: MGMT,
      tmpPrefix: 'kd-ha-org-',
      setProcessEnv: false,
      populate: (world) => {
        org = new FakeOrganization({managementAccount: MGMT});
        world.organization = org;
        const prod = org.addUnit('prod');
        for (const [account, cluster] of [[MOVER, 'm'], [STAYER, 's']] as const) {
          org.addAccount(account, {parent: prod});
          world.addAccount(account, {roles: [{arn: `arn:aws:iam::${account}:role/${ROLE}`, trust: [MGMT]}]});
          world.addCluster(account, 'us-east-1', {name: cluster});
        }
      },
    });
    for (const name of ['r1', 'r2']) {
      // Port 0: the replica says where it serves (servedPort).
      // A 15 s session: a leader stalled a few seconds on a loaded machine must not lose the lead before the test kills it
      // (with 5 s, a 4.5 s SIGSTOP did). Failover after SIGKILL waits one TTL; no claim depends on its length.
      await writeFile(
        aws.file(`${name}.yaml`),
        `version: v1
discovery_service:
  discovery_group: ha-org
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [us-east-1]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${org.id}, organizational_units: {include: ["*"], exclude: []}}
storage: {type: etcd, endpoints: ["${etcd.endpoint}"], session_ttl: 15s}
probe: {enabled: false}
log: {level: debug}
http: {listen_addr: "127.0.0.1:0"}
`,
      );
      replicas.push({name, proc: undefined as unknown as CliProcess});
    }
    everyReplica = replicas;
  });

  afterAll(async () => {
    for (const r of replicas) {
      r.proc?.child.kill('SIGKILL');
      await r.proc?.exited;
    }
    await aws?.close();
    await etcd?.stop();
  });

  it("the new leader's first walk keeps an account it lacks (stale); its second walk deregisters it", async () => {
    const [r1, r2] = replicas as [Replica, Replica];
    start(r1);
    await until('r1 leads with both clusters', async () => logs(r1).some((l) => l.msg === 'leading discovery group') && (await sorted(r1))?.join() === BOTH.join());
    start(r2);
    await until('r2 follows with both clusters', async () => logs(r2).some((l) => l.msg === 'following') && (await sorted(r2))?.join() === BOTH.join());

    // The account leaves (or is moving) as the leader dies: r1 never walks without it.
    org.removeAccount(MOVER);
    const mark = r2.proc.stdout().length;
    r1.proc.child.kill('SIGKILL');
    await until('r2 leads and completed its first cycle', async () => {
      const since = logs(r2, mark);
      const led = since.findIndex((l) => l.msg === 'leading discovery group');
      return led >= 0 && since.slice(led).some((l) => l.event === 'cycle');
    });
    expect(await sorted(r2)).toEqual(BOTH);
    const entry = await replicaJson<{status?: {stale?: boolean; stale_reason?: string}}>(r2, `/v1/kube_servers/${MOVER_CLUSTER}`);
    expect(entry?.status).toMatchObject({stale: true, stale_reason: expect.stringContaining('missing from this organization walk only') as unknown});

    // The second walk without it, by the same leader: deregistered.
    const second = r2.proc.stdout().length;
    r2.proc.child.kill('SIGHUP');
    await until('r2 completed the cycle SIGHUP asked for', async () => logs(r2, second).some((l) => l.event === 'cycle'));
    await until('the departed account is deregistered', async () => (await sorted(r2))?.join() === BOTH.slice(1).join());
  }, 5 * STEP_MS);
});
