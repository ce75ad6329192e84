/**
 * Replicas of `kube-discovery start` run as child processes by the high-availability tests:
 * reading their HTTP API, and waiting for what they say rather than for wall time.
 */
import type {CliProcess} from './process.ts';

/** One replica: its name, its HTTP port and its (re)started process. */
export interface Replica {
  readonly name: string;
  readonly port: number;
  proc: CliProcess;
}

/** GETs `p` from the replica's HTTP API as JSON; undefined while it is down or not answering. */
export async function replicaJson<T>(r: Replica, p: string): Promise<T | undefined> {
  try {
    return (await (await fetch(`http://127.0.0.1:${r.port}${p}`, {signal: AbortSignal.timeout(10_000)})).json()) as T;
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
