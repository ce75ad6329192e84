/**
 * Keepalive cost against the number of entries: a real Heartbeat on a real backend (sqlite file,
 * or etcd started on loopback) announces N kube_servers, then a fake clock steps it through
 * keepalive rounds while a counting wrapper records every backend call of each round and the
 * time spent in them. Cost that stays flat from 10 to 10,000 entries is the design's promise
 * (one lease for all entries, one statement or RPC per round).
 *
 *   node bench/keepalive.ts -- --sizes 10,1000,10000 --backends sqlite,etcd [--rounds 20]
 */
import {mkdtemp, rm} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {Heartbeat} from '../heartbeats/heartbeat.ts';
import type {KubeServerDraft} from '../heartbeats/kube-server.ts';
import {FakeClock} from '../test/helpers/fake-clock.ts';
import type {RegistryBackend} from '../src/registry/backend.ts';
import {openEtcdBackend} from '../src/registry/etcd.ts';
import {SqliteBackend} from '../src/registry/sqlite.ts';

/** Cost of keepalive rounds at one size on one backend. */
export interface KeepaliveResult {
  readonly backend: string;
  readonly entries: number;
  readonly rounds: number;
  /** Median time spent in backend calls per round, microseconds. */
  readonly round_us: number;
  /** Backend calls per round (median), by method. */
  readonly calls_per_round: number;
  readonly calls_by_method: Readonly<Record<string, number>>;
}

/** Why a backend was not measured. */
export interface KeepaliveSkipped {
  readonly backend: string;
  readonly skipped: string;
}

type Method = keyof RegistryBackend;

/** Wraps a backend so every call is counted and timed; `idle()` resolves when none is in flight. */
function counting(inner: RegistryBackend): {backend: RegistryBackend; take(): {calls: Record<string, number>; us: number}; idle(): Promise<void>} {
  let calls: Record<string, number> = {};
  let us = 0;
  let inFlight = 0;
  const waiters: (() => void)[] = [];
  const settle = (): void => {
    if (inFlight === 0) for (const w of waiters.splice(0)) w();
  };
  const backend = new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const name = String(prop as Method);
        calls[name] = (calls[name] ?? 0) + 1;
        const started = process.hrtime.bigint();
        inFlight++;
        const done = (): void => {
          us += Number(process.hrtime.bigint() - started) / 1000;
          inFlight--;
          settle();
        };
        const out = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (out instanceof Promise) return out.finally(done);
        done();
        return out;
      };
    },
  });
  return {
    backend,
    take() {
      const snapshot = {calls, us};
      calls = {};
      us = 0;
      return snapshot;
    },
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve))),
  };
}

function draft(i: number): KubeServerDraft {
  const name = `bench-${String(i).padStart(5, '0')}-eks-us-east-1-111111111111`;
  const labels = {'region': 'us-east-1', 'account-id': '111111111111', 'env': 'prod', 'teleport.dev/origin': 'cloud'};
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels},
    spec: {
      cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: 'keepalive bench', labels}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name}}},
      proxy_ids: [],
    },
  };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : (s[Math.floor((s.length - 1) / 2)] ?? 0);
};

/** Announces `entries` kube_servers on `backend` and measures `rounds` keepalive rounds. */
export async function measureKeepalive(name: string, inner: RegistryBackend, clock: FakeClock, entries: number, rounds: number): Promise<KeepaliveResult> {
  const wrapped = counting(inner);
  const intervalMs = 200_000;
  const heartbeat = new Heartbeat({backend: wrapped.backend, clock, group: `bench-${entries}`, ttlMs: 600_000, keepaliveIntervalMs: intervalMs, hostId: 'bench-host', hostname: 'bench', version: 'bench'});
  await heartbeat.start();
  for (let i = 0; i < entries; i += 200) {
    await Promise.all(Array.from({length: Math.min(200, entries - i)}, (_, j) => heartbeat.announce(draft(i + j))));
  }
  // A few unmeasured rounds first, so JIT warm-up does not count against the first size.
  for (let r = 0; r < 3; r++) {
    await clock.advance(intervalMs);
    await wrapped.idle();
  }
  wrapped.take();
  const times: number[] = [];
  const counts: number[] = [];
  let byMethod: Record<string, number> = {};
  for (let r = 0; r < rounds; r++) {
    await clock.advance(intervalMs);
    await wrapped.idle();
    const round = wrapped.take();
    times.push(round.us);
    counts.push(Object.values(round.calls).reduce((a, b) => a + b, 0));
    byMethod = round.calls;
  }
  await heartbeat.stop({deregister: true});
  return {backend: name, entries, rounds, round_us: Math.round(median(times)), calls_per_round: median(counts), calls_by_method: byMethod};
}

/** Runs every (backend, size) pair; a backend that cannot start is reported as skipped with the reason. */
export async function keepaliveBench(options: {sizes: readonly number[]; backends: readonly string[]; rounds?: number}): Promise<(KeepaliveResult | KeepaliveSkipped)[]> {
  const rounds = options.rounds ?? 20;
  const out: (KeepaliveResult | KeepaliveSkipped)[] = [];
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-keepalive-'));
  try {
    for (const name of options.backends) {
      if (name === 'sqlite') {
        for (const size of options.sizes) {
          const clock = new FakeClock(Date.now());
          const backend = await SqliteBackend.open({path: path.join(dir, `ka-${size}.db`), clock});
          try {
            out.push(await measureKeepalive('sqlite', backend, clock, size, rounds));
          } finally {
            await backend.close();
          }
        }
      } else if (name === 'etcd') {
        // The test helper starts a real etcd on loopback (Debian etcd-server).
        const {etcdBinary, startEtcd} = await import('../test/helpers/etcd.ts');
        if (etcdBinary === undefined) {
          out.push({backend: 'etcd', skipped: 'etcd binary not found (looked at $ETCD_BIN, /usr/bin/etcd and $PATH): install etcd-server'});
          continue;
        }
        const etcd = await startEtcd();
        try {
          for (const size of options.sizes) {
            const clock = new FakeClock(Date.now());
            const backend = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: `/kd-bench-${size}/`, clock});
            try {
              out.push(await measureKeepalive('etcd', backend, clock, size, rounds));
            } finally {
              await backend.close();
            }
          }
        } finally {
          await etcd.stop();
        }
      } else {
        out.push({backend: name, skipped: `unknown backend ${JSON.stringify(name)}; expected sqlite or etcd`});
      }
    }
  } finally {
    await rm(dir, {recursive: true, force: true});
  }
  return out;
}

if (import.meta.main) {
  const args = process.argv.slice(2).filter((a, i) => i > 0 || a !== '--');
  if (args[0]?.startsWith('{')) {
    // Called by bench.ts: a JSON request in, one BENCH_RESULT line out.
    const request = JSON.parse(args[0]) as {sizes: number[]; backends: string[]; rounds?: number};
    console.log(`BENCH_RESULT ${JSON.stringify(await keepaliveBench(request))}`);
  } else {
    const {values} = parseArgs({
      args,
      options: {sizes: {type: 'string', default: '10,1000,10000'}, backends: {type: 'string', default: 'sqlite,etcd'}, rounds: {type: 'string', default: '20'}},
      strict: true,
    });
    const result = await keepaliveBench({sizes: values.sizes.split(',').map(Number), backends: values.backends.split(','), rounds: Number(values.rounds)});
    console.log(JSON.stringify(result));
  }
  process.exit(0);
}
