/**
 * One registry fault, run against a real `start` service (in process, injected clock) on a filled
 * registry: inject the fault, run a cycle that has something new to write, let three TTLs pass one
 * second at a time while reading the API, then clear the fault and watch it recover. Returns what a
 * user would have seen, for the table-driven test (and the mount-namespace worker) to judge.
 */
import {Writable} from 'node:stream';
import {FakeClock} from '../helpers/fake-clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {FakeAwsWorld, startFakeAws} from '../fakes/aws-fakes.ts';
import {captureIo, setEnv} from '../helpers/env.ts';

/** How a row breaks and mends the registry; `storage` is the config's storage section (YAML flow map). */
export interface RegistryFaultDriver {
  readonly storage: string;
  /** Defaults to `discovery_service.enabled: true`; false runs a read-only replica over a registry filled by `fill`. */
  readonly discovery?: boolean;
  readonly ttl?: string;
  /** Called before the service starts (to fill a registry the service only reads). */
  prepare?(): Promise<void>;
  /** Called once the service served its first inventory. */
  inject(service: RunningService): Promise<void>;
  clear(service: RunningService): Promise<void>;
  /**
   * Called after each step of the clock: a backend whose calls take real time (the Kubernetes API,
   * its Lease renewals among them) lets them finish, or the clock would outrun them.
   */
  afterStep?(): Promise<void>;
}

/** What the scenario saw. */
export interface RegistryFaultObservations {
  readonly entriesBefore: number;
  /** Smallest /v1/kube_servers count seen while the fault lasted (checked every clock second). */
  readonly minEntriesDuringFault: number;
  /** Delete events the inventory emitted while the fault lasted (false deregistrations). */
  readonly deletesDuringFault: number;
  /** The same two once the fault cleared, while the service recovers (checked every clock second over one TTL). */
  readonly minEntriesWhileRecovering: number;
  readonly deletesWhileRecovering: number;
  readonly readyDuringFault: {readonly httpStatus: number; readonly body: {status: string; reason?: string}};
  readonly statusDuringFault: {
    readonly backend: {faults: Array<{operation: string; reason: string; message: string}>};
    readonly inventory: {count: number; stale: boolean};
  };
  /** `kube_discovery_registry_errors_total` summed over labels, and `..._registry_degraded` summed, during the fault. */
  readonly errorsMetric: number;
  readonly degradedMetric: number;
  /** Log lines (all must be JSON) with event registry_degraded / registry_recovered. */
  readonly degradedLines: number;
  readonly recoveredLines: number;
  readonly nonJsonLines: string[];
  /** process 'warning' events (printed as non-JSON text by Node). */
  readonly processWarnings: number;
  readonly readyAfter: {readonly httpStatus: number; readonly body: {status: string}};
  readonly faultsAfter: number;
  readonly entriesAfter: number;
}

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAREGISTRYFAULTS01', secretAccessKey: 'registry-fault-secret-key'};
/** Clusters registered before the fault. */
export const CLUSTERS = 5;

/** Runs the scenario; see the file comment. */
export async function runRegistryFaultScenario(driver: RegistryFaultDriver): Promise<RegistryFaultObservations> {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  for (let i = 0; i < CLUSTERS; i++) world.addCluster(ACCOUNT, 'us-east-1', {name: `c${i}`});
  const fake = await startFakeAws({world});
  const restoreEnv = setEnv({
    ...fake.env,
    AWS_ACCESS_KEY_ID: KEY.accessKeyId,
    AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey,
    AWS_MAX_ATTEMPTS: '1',
    AWS_EC2_METADATA_DISABLED: 'true',
  });
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, callback) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
      callback();
    },
  });
  let processWarnings = 0;
  const onWarning = (): void => void processWarnings++;
  process.on('warning', onWarning);
  const clock = new FakeClock(Date.now());
  const step = async (ms: number): Promise<void> => {
    await clock.advance(ms);
    await driver.afterStep?.();
  };
  const config = parseConfig(
    `version: v1
discovery_service:
  enabled: ${driver.discovery ?? true}
  discovery_group: faults
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [us-east-1]
heartbeat: {ttl: ${driver.ttl ?? '30s'}}
storage: ${driver.storage}
http: {listen_addr: "127.0.0.1:0"}
`,
    'faults.yaml',
  );
  const logger = createLogger({level: 'info', format: 'json', destination: sink});
  await driver.prepare?.();
  const svc = await startService({config, io: captureIo().io, clock, logger});
  const api = async <T>(path: string): Promise<{httpStatus: number; body: T}> => {
    const res = await fetch(`${svc.url}${path}`);
    return {httpStatus: res.status, body: (await res.json()) as T};
  };
  const count = async (): Promise<number> => (await api<{items: unknown[]}>('/v1/kube_servers?limit=1000')).body.items.length;
  /** Advances the clock until `promise` settles (cycles sleep on the clock between retries), at most a minute of clock time. */
  const settle = async (promise: Promise<unknown>): Promise<void> => {
    let done = false;
    void promise.finally(() => (done = true));
    for (let i = 0; i < 600 && !done; i++) await step(100);
    await step(0);
  };
  // A cycle that fails (registry unreadable) never resolves nextCycle: waiting for the scheduler to go idle covers both.
  const cycle = async (): Promise<void> => {
    if (svc.role() !== 'leader') return;
    svc.trigger();
    await settle(
      (async () => {
        while (svc.runtime && (await idle(svc)) === false) await new Promise((r) => setTimeout(r, 5));
      })(),
    );
  };
  try {
    if (driver.discovery ?? true) {
      // The first cycle's cloud calls run on real time: 600 quick clock steps could all pass before
      // it ended (a cold SDK on a loaded machine), leaving nothing registered. Wait until it is ready.
      const giveUp = Date.now() + 60_000;
      while ((await fetch(`${svc.url}/readyz`)).status !== 200 && Date.now() < giveUp) {
        await step(100);
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    const entriesBefore = await count();
    let deletes = 0;
    const unsubscribe = svc.inventory.subscribe((e) => {
      if (e.type === 'delete') deletes++;
    });
    await driver.inject(svc);
    world.addCluster(ACCOUNT, 'us-east-1', {name: 'new-during-fault'});
    await cycle();
    let min = Number.POSITIVE_INFINITY;
    const ttlMs = config.heartbeat.ttl;
    for (let t = 0; t < (3 * ttlMs) / 1000; t++) {
      await step(1000);
      min = Math.min(min, await count());
    }
    const readyDuringFault = await api<{status: string; reason?: string}>('/readyz');
    const statusDuringFault = (await api<RegistryFaultObservations['statusDuringFault']>('/v1/status')).body;
    const metrics = await (await fetch(`${svc.url}/metrics`)).text();
    const deletesDuringFault = deletes;

    await driver.clear(svc);
    let minRecovering = Number.POSITIVE_INFINITY;
    for (let t = 0; t < ttlMs / 1000; t++) {
      await step(1000);
      minRecovering = Math.min(minRecovering, await count());
    }
    await cycle();
    unsubscribe();
    // A client reconnecting to a restarted backend backs off in real time: wait (bounded) for it.
    let readyAfter = await api<{status: string}>('/readyz');
    for (let i = 0; i < 150 && readyAfter.body.status !== 'ready'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await step(1000);
      readyAfter = await api<{status: string}>('/readyz');
    }
    // So does its watch: what the last cycle wrote reaches the inventory once it runs again (bounded wait).
    const kept = ({counts: c}: {counts: Record<string, number>}): number => (c['create'] ?? 0) + (c['update'] ?? 0) + (c['unchanged'] ?? 0) + (c['stale'] ?? 0);
    const lastCycle = (await api<{last_cycle?: {counts: Record<string, number>} | null}>('/v1/status')).body.last_cycle;
    for (let i = 0; i < 150 && lastCycle && (await count()) < kept(lastCycle); i++) await new Promise((r) => setTimeout(r, 100));
    const statusAfter = (await api<RegistryFaultObservations['statusDuringFault']>('/v1/status')).body;
    const events = lines.flatMap((l) => {
      try {
        return [(JSON.parse(l) as {event?: string}).event];
      } catch {
        return [];
      }
    });
    return {
      entriesBefore,
      minEntriesDuringFault: min,
      deletesDuringFault,
      minEntriesWhileRecovering: minRecovering,
      deletesWhileRecovering: deletes - deletesDuringFault,
      readyDuringFault,
      statusDuringFault,
      errorsMetric: sumMetric(metrics, 'kube_discovery_registry_errors_total'),
      degradedMetric: sumMetric(metrics, 'kube_discovery_registry_degraded'),
      degradedLines: events.filter((e) => e === 'registry_degraded').length,
      recoveredLines: events.filter((e) => e === 'registry_recovered').length,
      nonJsonLines: lines.filter((l) => !isJson(l)),
      processWarnings,
      readyAfter,
      faultsAfter: statusAfter.backend.faults.length,
      entriesAfter: await count(),
    };
  } finally {
    process.off('warning', onWarning);
    await settle(svc.stop({deregister: false, graceMs: 0}));
    restoreEnv();
    await fake.close();
  }
}

/** Whether no cycle is running, read from /v1/status. */
async function idle(svc: RunningService): Promise<boolean> {
  const status = (await (await fetch(`${svc.url}/v1/status`)).json()) as {cycle_running: boolean};
  return !status.cycle_running;
}

function sumMetric(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

function isJson(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}
