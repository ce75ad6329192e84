/**
 * Two replicas of `kube-discovery start` on one real etcd: one leader polls and writes, both
 * serve the inventory; SIGKILL the leader and the survivor takes over without the inventory
 * ever shrinking or duplicating; the old leader comes back as a follower; etcd stopped past the
 * session TTL and restarted leaves one leader and the inventory intact.
 *
 * Every step waits for what the replicas say (their log lines and /v1/status), never for wall
 * time, with budgets sized for a machine other test files keep busy; a failure prints both logs.
 */
import {afterAll, beforeAll, expect, it} from 'vitest';
import type {FakeAws} from '../fakes/aws-fakes.ts';
import type {AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {spawnCli} from '../helpers/process.ts';
import {HA_CLUSTERS as CLUSTERS, killReplicas, replicaNames, replicaOutputs, replicaStatus, startHaWorld, until as untilSaid, writeReplicaConfigs, type Replica} from '../helpers/replica.ts';

// One key per replica, so the fake can tell which replica called.
const KEYS: Record<string, {accessKeyId: string; secretAccessKey: string}> = {
  r1: {accessKeyId: 'AKIAFAILOVERTEST0001', secretAccessKey: 'failover-secret-1'},
  r2: {accessKeyId: 'AKIAFAILOVERTEST0002', secretAccessKey: 'failover-secret-2'},
};

// Budget for one step on a loaded machine (two Node processes, etcd and the suite share two CPUs).
const STEP_MS = 120_000;

const status = replicaStatus;
const names = replicaNames;

/** Log lines (JSON) a replica printed since `from` (an offset into its stdout). */
function logs(r: Replica, from = 0): {msg: string; event?: string; role?: string; leader?: string}[] {
  const text = r.proc.stdout().slice(from);
  // Only whole lines: the last one may still be arriving.
  return text
    .slice(0, text.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as {msg: string});
}

let everyReplica: readonly Replica[] = [];

const until = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = STEP_MS): Promise<T> => untilSaid(what, fn, timeoutMs, () => replicaOutputs(everyReplica));

describeWithEtcd('high availability on etcd', () => {
  let etcd: TestEtcd;
  let aws: AwsServiceWorld;
  let fake: FakeAws;
  let replicas: Replica[] = [];

  const start = (r: Replica): void => {
    r.proc = spawnCli(['start', '-c', aws.file(`${r.name}.yaml`)], aws.childEnv({KUBE_DISCOVERY_REPLICA: r.name}, KEYS[r.name]));
  };

  beforeAll(async () => {
    etcd = await startEtcd();
    aws = await startHaWorld({key: KEYS['r1']!, extraKeys: [KEYS['r2']!], tmpPrefix: 'kd-ha-'});
    fake = aws.fake;
    // A 15 s session: a leader whose event loop stalls a few seconds on a loaded machine must not lose the lead before
    // the test kills it (with 5 s, a 4.5 s SIGSTOP did). Failover after SIGKILL waits one TTL; no claim depends on its length.
    replicas = await writeReplicaConfigs(['r1', 'r2'], (name) => aws.file(`${name}.yaml`), `
storage: {type: etcd, endpoints: ["${etcd.endpoint}"], session_ttl: 15s}
log: {level: debug}
`);
    everyReplica = replicas;
  });

  afterAll(async () => {
    await killReplicas(replicas);
    await aws.close();
    await etcd.stop();
  });

  it('one leader polls; SIGKILL fails over without losing or duplicating entries; the old leader returns as follower', async () => {
    const [r1, r2] = replicas as [Replica, Replica];
    start(r1);
    await until('r1 leads with every cluster', async () => logs(r1).some((l) => l.msg === 'leading discovery group') && (await names(r1))?.length === CLUSTERS.length);
    start(r2);
    // Its election settled (it knows r1 leads), not just the default role of a replica that just started.
    await until('r2 follows r1 with the inventory', async () => logs(r2).some((l) => l.msg === 'following' && l.leader === 'r1') && (await names(r2))?.length === CLUSTERS.length);

    // Only the leader talks to the cloud: a cycle on each (SIGHUP) reaches the fake from r1 alone.
    fake.stats.reset();
    const r1Mark = r1.proc.stdout().length;
    const r2Mark = r2.proc.stdout().length;
    r2.proc.child.kill('SIGHUP');
    r1.proc.child.kill('SIGHUP');
    await until('r1 completed the cycle SIGHUP asked for', async () => logs(r1, r1Mark).some((l) => l.event === 'cycle'));
    await until('r2 handled its SIGHUP', async () => logs(r2, r2Mark).some((l) => l.msg.startsWith('SIGHUP')));
    expect(fake.stats.count({operation: 'ListClusters', accessKeyId: KEYS['r1']!.accessKeyId})).toBeGreaterThan(0);
    expect(fake.stats.count({accessKeyId: KEYS['r2']!.accessKeyId})).toBe(0);

    const killedAt = Date.now();
    const r2Before = r2.proc.stdout().length;
    r1.proc.child.kill('SIGKILL');
    const seen: number[] = [];
    const tookOver = (): boolean => {
      const since = logs(r2, r2Before);
      const led = since.findIndex((l) => l.msg === 'leading discovery group');
      return led >= 0 && since.slice(led).some((l) => l.event === 'cycle');
    };
    await until('r2 became leader and completed a cycle', async () => {
      const list = await names(r2);
      if (list) {
        seen.push(list.length);
        expect(new Set(list).size, 'no duplicate names').toBe(list.length);
      }
      return tookOver();
    });
    expect((await status(r2))?.role).toBe('leader');
    expect(Math.min(...seen), 'the survivor never served fewer entries').toBe(CLUSTERS.length);
    console.log(`failover: SIGKILL to the new leader's first completed cycle took ${Date.now() - killedAt} ms`);

    fake.stats.reset();
    start(r1);
    await until('r1 comes back as follower of r2', async () => logs(r1).some((l) => l.msg === 'following' && l.leader === 'r2') && (await names(r1))?.length === CLUSTERS.length);
    expect((await status(r2))?.role).toBe('leader');
    expect(fake.stats.count({accessKeyId: KEYS['r1']!.accessKeyId}), 'the returning replica does not poll').toBe(0);
  }, 6 * STEP_MS);

  it('etcd down longer than the session TTL and back: one leader again, inventory intact', async () => {
    const [r1, r2] = replicas as [Replica, Replica];
    const leader = (await status(r1))?.role === 'leader' ? r1 : r2;
    const mark = leader.proc.stdout().length;
    await etcd.stop();
    // Past the session TTL: the leader says it stepped down because its session was not renewed.
    await until('the leader stepped down', async () => logs(leader, mark).some((l) => l.msg.includes('session not renewed within its TTL')));
    // Both keep serving the last known inventory while etcd is down.
    expect((await names(r1))?.length).toBe(CLUSTERS.length);
    expect((await names(r2))?.length).toBe(CLUSTERS.length);
    await etcd.restart();
    const roles = await until('exactly one leader', async () => {
      const rs = [(await status(r1))?.role, (await status(r2))?.role];
      return rs.filter((r) => r === 'leader').length === 1 && rs.filter((r) => r === 'follower').length === 1 ? rs : false;
    });
    expect(roles.sort()).toEqual(['follower', 'leader']);
    await until('inventory intact on both', async () => (await names(r1))?.length === CLUSTERS.length && (await names(r2))?.length === CLUSTERS.length);
  }, 4 * STEP_MS);
});
