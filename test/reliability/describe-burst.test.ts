/**
 * A region's DescribeCluster burst (issue 15, W0): every listed cluster of a region described
 * at once, more calls than the client has sockets. Calls waiting for a socket must not be
 * failed by the connection deadline (the request handler arms it when a socket is created,
 * src/clouds/aws/undici-handler.ts), while a connect that really hangs, a refused connect
 * and connections reset in the middle of the burst still fail their source — only theirs —
 * and delete nothing. Real EKS clients with the service's request handler, the EKS fake,
 * the fault proxy and a blackhole listener; the service's own discovery cycle and registry.
 */
import net from 'node:net';
import {DescribeClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import PQueue from 'p-queue';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {CLIENT_SOCKETS} from '../../src/clouds/aws/connect-deadline.ts';
import type {EksApi} from '../../src/clouds/aws/eks-fetcher.ts';
import {awsRequestHandler} from '../../src/clouds/aws/sources.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {AwsCredentialProvider} from '../../src/credentials/aws-credentials.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import type {Registrar} from '../../src/discovery/cycle.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startBlackhole, type Blackhole} from '../fakes/blackhole.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {awsClassifier, startFaultProxy, type FaultProxy} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIADESCRIBEBURST001', secretAccessKey: 'describe-burst-secret'};
const HEALTHY = 'us-east-1';
const FAULTY = 'eu-west-1';
/** Many more clusters per region than a client has sockets: a burst queues in the dispatcher for 15 answers' time. */
const PER_REGION = CLIENT_SOCKETS * 15;
/** Short, so a call waiting for a socket (one answer's latency, below) would outlive it if it ran from queueing. */
const CONNECT_MS = 40;
const LATENCY_MS = 150;
/** Ten answers' latency: the last calls of a burst wait longer than that for a socket, never that long for an answer. */
const REQUEST_MS = 1_500;

type Target = 'fake' | 'blackhole' | 'refused' | 'proxy';

let fake: FakeAws;
let proxy: FaultProxy;
let hole: Blackhole;
let refusedUrl: string;
let restoreEnv: () => void;
/** Where each region's client sends its calls this cycle. */
const route = new Map<string, Target>();

const NAMES = Array.from({length: PER_REGION}, (_, i) => `c${String(i).padStart(3, '0')}`);

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  for (const region of [HEALTHY, FAULTY]) for (const name of NAMES) world.addCluster(ACCOUNT, region, {name});
  fake = await startFakeAws({world, latencyMs: LATENCY_MS, pageSize: 100});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  hole = await startBlackhole();
  // A port nobody listens on: taken, then released.
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  refusedUrl = `http://127.0.0.1:${(closed.address() as net.AddressInfo).port}`;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  restoreEnv = setEnv({...fake.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_REGION: HEALTHY});
});

afterAll(async () => {
  restoreEnv();
  await hole.close();
  await proxy.close();
  await fake.close();
});

const urlOf = (target: Target): string => ({fake: fake.url, blackhole: hole.url, refused: refusedUrl, proxy: proxy.url})[target];

/** The service's EKS client for one endpoint: its request handler and retry settings, with a short connect deadline. */
function eksClient(region: string, credentials: AwsCredentialProvider, target: Target): EKSClient {
  return new EKSClient({region, credentials, endpoint: urlOf(target), maxAttempts: 3, retryMode: 'standard', requestHandler: awsRequestHandler(REQUEST_MS, undefined, CONNECT_MS)});
}

/** A region client that sends each call to the region's current route (one real client per route). */
function routedClient(region: string, credentials: AwsCredentialProvider): EksApi {
  const clients = new Map<Target, EKSClient>();
  const current = (): EKSClient => {
    const target = route.get(region) ?? 'fake';
    let client = clients.get(target);
    if (!client) clients.set(target, (client = eksClient(region, credentials, target)));
    return client;
  };
  return {send: ((command: never, options?: never) => current().send(command, options)) as EKSClient['send']};
}

async function discoveryWorld(): Promise<{discovery: Discovery; registrar: Registrar; stop: () => Promise<void>}> {
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: g
  concurrency: {per_region: 1000}
  aws:
    - types: [eks]
      regions: [${HEALTHY}, ${FAULTY}]
storage: {type: memory}
`,
    'describe-burst.yaml',
  );
  const backend = new MemoryBackend({clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  // No tagging client: every cycle describes every listed cluster (the first cycle's burst).
  const discovery = new Discovery({config, clock: systemClock, aws: {makeEksClient: routedClient, callerAccount: () => Promise.resolve(ACCOUNT)}});
  return {
    discovery,
    registrar: createRegistrar(backend, heartbeat, 'g'),
    stop: async () => {
      await heartbeat.stop({deregister: false});
      await backend.close();
    },
  };
}

const ALL = [HEALTHY, FAULTY].flatMap((region) => NAMES.map((n) => `${n}-eks-${region}-${ACCOUNT}`)).sort();

describe("a region's describe burst", () => {
  it("smithy's own connection timeout fails calls that only wait for a socket (why the request handler arms it instead)", async () => {
    const client = new EKSClient({region: HEALTHY, credentials: KEY, endpoint: fake.url, maxAttempts: 1, requestHandler: {connectionTimeout: CONNECT_MS, requestTimeout: REQUEST_MS}});
    try {
      const queue = new PQueue({concurrency: PER_REGION});
      const outcomes = await Promise.allSettled(NAMES.map((name) => queue.add(() => client.send(new DescribeClusterCommand({name})))));
      const failed = outcomes.filter((o) => o.status === 'rejected').map((o) => String((o.reason as Error).message));
      expect(failed.length).toBeGreaterThan(0);
      expect(failed[0]).toContain('did not establish a connection');
    } finally {
      client.destroy();
    }
  });

  it('more calls than sockets: every cluster is found, none fails waiting for a socket (connect and answer deadlines run on the socket)', async () => {
    const world = await discoveryWorld();
    try {
      fake.stats.reset();
      const report = await world.discovery.runCycle(world.registrar);
      expect(report.sources.filter((s) => !s.ok)).toEqual([]);
      expect((await world.registrar.current()).map((s) => s.metadata.name).sort()).toEqual(ALL);
      // Each call made once: no connect deadline fired, so nothing was retried.
      expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(2 * PER_REGION);
    } finally {
      await world.stop();
    }
  });

  const faults: {name: string; target: Target; reason: string; message?: string; rule?: FaultProxy['fault']}[] = [
    {name: 'a connect that hangs (blackhole)', target: 'blackhole', reason: 'timeout', message: 'not established'},
    {name: 'a refused connect', target: 'refused', reason: 'other', message: 'ECONNREFUSED'},
    // Every 10th cluster's describe is cut, on every attempt, in the middle of the region's burst.
    {name: 'connections reset in the burst', target: 'proxy', reason: 'other', rule: (req) => (req.operation === 'DescribeCluster' && req.region === FAULTY && Number(req.cluster?.slice(-3)) % 10 === 5 ? {kind: 'reset'} : undefined)},
  ];
  for (const fault of faults) {
    it(`${fault.name} fails only that region's source and deletes nothing`, async () => {
      const world = await discoveryWorld();
      try {
        route.clear();
        await world.discovery.runCycle(world.registrar);
        expect((await world.registrar.current()).map((s) => s.metadata.name).sort()).toEqual(ALL);

        route.set(FAULTY, fault.target);
        proxy.fault = fault.rule;
        const report = await world.discovery.runCycle(world.registrar);
        const failed = report.sources.filter((s) => !s.ok);
        expect(failed.map((s) => s.region)).toEqual([FAULTY]);
        expect(failed[0]?.error?.reason).toBe(fault.reason);
        if (fault.message) expect(failed[0]?.error?.message).toContain(fault.message);
        expect(report.items.filter((i) => i.action === 'delete')).toEqual([]);
        expect(report.sources.find((s) => s.region === HEALTHY)).toMatchObject({ok: true, clusters: PER_REGION});
        expect((await world.registrar.current()).map((s) => s.metadata.name).sort()).toEqual(ALL);
      } finally {
        route.clear();
        proxy.fault = undefined;
        await world.stop();
      }
    });
  }
});
