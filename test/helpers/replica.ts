/**
 * Replicas of `kube-discovery start` run as child processes by the high-availability tests:
 * reading their HTTP API, and waiting for what they say rather than for wall time.
 */
import {writeFile} from 'node:fs/promises';
import {expect} from 'vitest';
import {startAwsServiceWorld, type AwsServiceWorld, type ServiceTestKey} from './aws-service-world.ts';
import {servedPort, type CliProcess} from './process.ts';

/** One replica: its name and its (re)started process. */
export interface Replica {
  readonly name: string;
  proc: CliProcess;
}

/** GETs `p` from the replica's HTTP API as JSON; undefined while it is down or not answering. */
export async function replicaJson<T>(r: Replica, p: string): Promise<T | undefined> {
  // Replicas bind port 0 and say where they serve; undefined until the current process said so.
  const port = servedPort(r.proc);
  if (port === undefined) return undefined;
  try {
    return (await (await fetch(`http://127.0.0.1:${port}${p}`, {signal: AbortSignal.timeout(10_000)})).json()) as T;
  } catch {
    return undefined;
  }
}

/** The replica's `/v1/status` (role, leader, host id). */
export const replicaStatus = (r: Replica) => replicaJson<{role: string; leader?: string; host_id: string}>(r, '/v1/status');

/** The names of the kube_servers the replica serves. */
export async function replicaNames(r: Replica): Promise<string[] | undefined> {
  return (await replicaJson<{items: {metadata: {name: string}}[]}>(r, '/v1/kube_servers?limit=1000'))?.items.map((s) => s.metadata.name);
}

/** The replicas' recent output, for a failure message. */
export function replicaOutputs(replicas: readonly Replica[]): string {
  return replicas.map((r) => `--- ${r.name} stdout:\n${r.proc?.stdout().slice(-8000)}\n--- ${r.name} stderr:\n${r.proc?.stderr().slice(-2000)}`).join('\n');
}

/**
 * Polls `fn` every 100 ms until it returns a truthy value, which it resolves with. The budget
 * only bounds a hung test (the assertion is on what the replicas say, never on how fast);
 * `context` adds e.g. the replicas' output to the timeout's message.
 */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 90_000, context: () => string = () => ''): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${context()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The account whose clusters the high-availability tests discover. */
export const HA_ACCOUNT = '111111111111';
/** The clusters (in us-east-1) every replica of a high-availability test ends up serving. */
export const HA_CLUSTERS: readonly string[] = ['a', 'b', 'c', 'd', 'e'];

/** The fake AWS world of a high-availability test: HA_CLUSTERS in HA_ACCOUNT, for spawned replicas only. */
export function startHaWorld(options: {readonly key: ServiceTestKey; readonly extraKeys?: readonly ServiceTestKey[]; readonly tmpPrefix: string}): Promise<AwsServiceWorld> {
  return startAwsServiceWorld({
    ...options,
    account: HA_ACCOUNT,
    setProcessEnv: false,
    populate: (world) => {
      for (const name of HA_CLUSTERS) world.addCluster(HA_ACCOUNT, 'us-east-1', {name});
    },
  });
}

/**
 * Writes each replica's config to `configFile(name)` — discovery group `ha` polling EKS in
 * us-east-1 every 10 s, probes off, the API on loopback port 0 (see servedPort) — plus `extra` YAML lines
 * (storage, election, log), and returns the replicas, not started yet.
 */
export async function writeReplicaConfigs(names: readonly string[], configFile: (name: string) => string, extra: string): Promise<Replica[]> {
  const replicas: Replica[] = [];
  for (const name of names) {
    await writeFile(configFile(name), `version: v1
discovery_service:
  discovery_group: ha
  poll_interval: 10s
  aws: [{types: [eks], regions: [us-east-1]}]
${extra.trim()}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`);
    replicas.push({name, proc: undefined as unknown as CliProcess});
  }
  return replicas;
}

/** SIGKILLs every replica that was started and waits for it to exit. */
export async function killReplicas(replicas: readonly Replica[]): Promise<void> {
  for (const r of replicas) {
    r.proc?.child.kill('SIGKILL');
    await r.proc?.exited;
  }
}

/** Waits until the replica has `role` and serves every one of HA_CLUSTERS. */
export function untilRole(what: string, r: Replica, role: 'leader' | 'follower'): Promise<boolean> {
  return until(what, async () => (await replicaStatus(r))?.role === role && (await replicaNames(r))?.length === HA_CLUSTERS.length);
}

/** Starts `leader` and waits until it leads with every cluster, then `follower` until it follows with them. */
export async function startLeaderThenFollower(start: (r: Replica) => void, leader: Replica, follower: Replica): Promise<void> {
  start(leader);
  await untilRole(`${leader.name} leads with every cluster`, leader, 'leader');
  start(follower);
  await untilRole(`${follower.name} follows with the inventory`, follower, 'follower');
}

/**
 * SIGKILLs the leader and waits until `survivor` leads and has completed a cycle since it took
 * over, checking on every poll that it serves no name twice. Returns the entry counts it served
 * meanwhile and the milliseconds from the kill to that cycle (for the log, never asserted).
 */
export async function killLeaderUntilTakeover(leader: Replica, survivor: Replica): Promise<{seen: number[]; ms: number}> {
  const killedAt = Date.now();
  leader.proc.child.kill('SIGKILL');
  await leader.proc.exited;
  const seen: number[] = [];
  await until(`${survivor.name} leads and completed a cycle`, async () => {
    const list = await replicaNames(survivor);
    if (list) {
      seen.push(list.length);
      expect(new Set(list).size, 'no duplicate names').toBe(list.length);
    }
    const out = survivor.proc.stdout();
    return (await replicaStatus(survivor))?.role === 'leader' && /"event":"cycle"/.test(out.slice(out.lastIndexOf('leading discovery group')));
  });
  return {seen, ms: Date.now() - killedAt};
}
