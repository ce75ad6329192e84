/**
 * A leader whose DiscoveryConfig list is refused (403: the Role lacks `list discoveryconfigs`) or
 * failing: that config source fails — shown in /v1/status and the metrics — while cycles of the
 * config file's matchers go on. Until a list has succeeded, the failed source covers every entry
 * (clusters only a DiscoveryConfig found are kept, stale); once one has, a failing list keeps the
 * last good matchers and deletes as usual.
 */
import {afterAll, beforeAll, describe, expect, it, vi} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {createDiscoveryConfig, DISCOVERY_CONFIGS_PATH} from '../kubernetes/discovery-configs.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIADCDENIED00000001', secretAccessKey: 'dc-denied-secret'};
const DC_PATH = DISCOVERY_CONFIGS_PATH;
// A leader that misses its renew deadline (2/3 of the session TTL) steps down and, winning its
// Lease again, starts a new term whose denied list covers every entry: base-2 would then stay
// stale. A loaded machine can stall the event loop for seconds, so the deadline is far above that.
const SESSION_TTL = '30s';
const FORBIDDEN = {status: 403, body: '{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"discoveryconfigs.kube-discovery.io is forbidden: User \\"system:serviceaccount:kd:kube-discovery\\" cannot list resource \\"discoveryconfigs\\""}'};

let kube: KubeEnv;
let fake: FakeAws;
let world: FakeAwsWorld;
let restoreEnv: () => void;
let denyList = false;
let deniedLists = 0;

beforeAll(async () => {
  kube = await startKubeEnv();
  world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  world.addCluster(ACCOUNT, 'us-east-1', {name: 'base-1'});
  world.addCluster(ACCOUNT, 'us-east-1', {name: 'base-2'});
  world.addCluster(ACCOUNT, 'eu-west-1', {name: 'eu-1'});
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_MAX_ATTEMPTS: '1', AWS_EC2_METADATA_DISABLED: 'true'});
  const client = await kube.client();
  await createDiscoveryConfig(client, 'eu', 'dyn', ['eu-west-1']);
  // Only the list is refused; the watch still delivers events.
  kube.server.setFault((call) => {
    if (!denyList || call.method !== 'GET' || call.watch || call.path !== DC_PATH) return undefined;
    deniedLists++;
    return FORBIDDEN;
  });
});

afterAll(async () => {
  kube.server.setFault(undefined);
  restoreEnv();
  await fake.close();
  await kube.close();
});

const config = () =>
  parseConfig(
    `version: v1
discovery_service:
  discovery_group: dyn
  poll_interval: 1h
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: kubernetes, namespace: kd, kubeconfig: "${kube.kubeconfigPath}", session_ttl: ${SESSION_TTL}}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`,
    'dc-denied.yaml',
  );

const start = (replica: string): Promise<RunningService> =>
  startService({config: config(), io: captureIo({...process.env, KUBE_DISCOVERY_REPLICA: replica}).io, clock: systemClock, logger: silentLogger});

/** The next completed cycle, or a failure naming what did not happen (a blocked leader never cycles). */
async function cycleOf(svc: RunningService, trigger: boolean): Promise<CycleReport> {
  const next = svc.nextCycle();
  if (trigger) svc.trigger();
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no discovery cycle completed: the leader is blocked')), 30_000)));
  try {
    return await Promise.race([next, stuck]);
  } finally {
    clearTimeout(timer);
  }
}

interface Status {
  sources: {id: string; ok: boolean; last_error?: {reason: string}}[];
}

const statusOf = async (svc: RunningService): Promise<Status> => (await (await fetch(`${svc.url}/v1/status`)).json()) as Status;
/** Ids of the sources a cycle reports failed. */
const failedSources = (report: CycleReport): string[] => report.sources.filter((s) => !s.ok).map((s) => s.id);
const actions = (report: CycleReport): Record<string, string> => Object.fromEntries(report.items.map((i) => [i.name.split('-eks-')[0] ?? i.name, i.action]));

/** Touches the DiscoveryConfig so its watch event makes the leader list again. */
async function touch(value: string): Promise<void> {
  const client = await kube.client();
  await client.request({method: 'PATCH', path: `${DC_PATH}/eu`, contentType: 'application/merge-patch+json', body: {metadata: {labels: {touched: value}}}});
}

describe('a leader whose DiscoveryConfig list fails', () => {
  it('runs cycles of the config file, keeps what only DiscoveryConfigs found, and shows the failed config source', async () => {
    const first = await start('pod-1');
    try {
      const report = await cycleOf(first, false);
      expect(actions(report)).toEqual({'base-1': 'create', 'base-2': 'create', 'eu-1': 'create'});
    } finally {
      await first.stop({deregister: false});
    }

    // A new leader (after a restart or take-over) whose Role cannot list DiscoveryConfigs.
    denyList = true;
    const svc = await start('pod-2');
    try {
      const denied = await cycleOf(svc, false);
      expect(actions(denied)).toEqual({'base-1': 'unchanged', 'base-2': 'unchanged', 'eu-1': 'stale'});
      expect(denied.result).toBe('partial');
      const failed = (await statusOf(svc)).sources.filter((s) => !s.ok);
      expect(failed.length).toBeGreaterThan(0);
      for (const s of failed) expect(s).toMatchObject({id: expect.stringMatching(/^discoveryconfigs:kd/), last_error: {reason: 'access_denied'}});
      expect(await (await fetch(`${svc.url}/metrics`)).text()).toMatch(/kube_discovery_source_errors_total\{cloud="AWS",region="\*",reason="access_denied"\} [1-9]/);

      // The list is allowed again: the next reconcile applies the DiscoveryConfig and runs a cycle with it.
      denyList = false;
      const applied = cycleOf(svc, false);
      await touch('1');
      expect(actions(await applied)).toEqual({'base-1': 'unchanged', 'base-2': 'unchanged', 'eu-1': 'update'});
      expect((await statusOf(svc)).sources.every((s) => s.ok)).toBe(true);

      // Refused again after a good list: the last good matchers stay, only that source fails, and
      // the config file's sources reconcile as usual (a cluster gone from its listing is deregistered).
      denyList = true;
      const refusedBefore = deniedLists;
      await touch('2');
      await vi.waitFor(() => expect(deniedLists).toBeGreaterThan(refusedBefore), {timeout: 20_000, interval: 50});
      // The fake counts the refusal when it answers; the leader records it a moment later. Cycle
      // (nothing changed yet) until a cycle carries it, so the next one is known to run with it.
      // The failed source is the term's one source, which covers no entry: a list succeeded in this term.
      await vi.waitFor(async () => expect(failedSources(await cycleOf(svc, true))).toEqual(['discoveryconfigs:kd']), {timeout: 30_000, interval: 100});
      world.removeCluster(ACCOUNT, 'us-east-1', 'base-2');
      // A cycle already running (the DiscoveryConfig's watch event starts one) may have listed
      // base-2 before it went: that cycle finds it gone from the tag read and keeps it (stale), as
      // the promise says. The next cycle that lists without it deregisters it.
      let after = await cycleOf(svc, true);
      for (let i = 0; i < 3 && actions(after)['base-2'] !== 'delete'; i++) {
        // Per cloud ids (`discoveryconfigs:kd:eks`) would mean a new term (the leader stepped down and
        // won again) whose denied list keeps every entry: no delete could come while the list is refused.
        expect(failedSources(after), 'the leader kept its term').toEqual(['discoveryconfigs:kd']);
        expect(actions(after)).toEqual({'base-1': 'unchanged', 'base-2': expect.stringMatching(/^(unchanged|stale)$/), 'eu-1': 'unchanged'});
        after = await cycleOf(svc, true);
      }
      expect(actions(after)).toEqual({'base-1': 'unchanged', 'base-2': 'delete', 'eu-1': 'unchanged'});
      expect(after.result).toBe('partial');
      expect((await statusOf(svc)).sources.filter((s) => !s.ok)).toEqual([expect.objectContaining({id: 'discoveryconfigs:kd', last_error: expect.objectContaining({reason: 'access_denied'})})]);
    } finally {
      denyList = false;
      await svc.stop({deregister: false});
    }
  }, 120_000);
});
