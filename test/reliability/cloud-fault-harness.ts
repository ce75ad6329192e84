/**
 * The environment of the cloud fault matrix: the EKS/STS fake and the ARM fake, each behind a
 * fault proxy, a stub `az` for the Azure CLI credential, and helpers that run `once`
 * (in-process, through the CLI's main) and `start` (in-process, startService) against it.
 */
import {chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {Writable} from 'node:stream';
import tls from 'node:tls';
import {pino} from 'pino';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {main} from '../../src/cli/main.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {FAKE_ARM_TOKEN, startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {armClassifier, awsClassifier, startFaultProxy, type FaultProxy} from '../fakes/faults.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';
import {captureIo, setEnv} from '../helpers/env.ts';

/** The AWS account and Azure subscription of the matrix world. */
export const ACCOUNT = '111111111111';
export const SUBSCRIPTION = '00000000-0000-0000-0000-0000000000aa';
const KEY = {accessKeyId: 'AKIAFAULTMATRIX00001', secretAccessKey: 'fault-matrix-secret'};
/** The AWS secret key the matrix signs with: it must appear in no answer of the service. */
export const SECRET = KEY.secretAccessKey;

/** Every kube_server name the clean world registers. */
export const ALL_NAMES = [
  'a-eks-us-east-1-111111111111',
  'b-eks-us-east-1-111111111111',
  'c-eks-us-east-1-111111111111',
  'e1-eks-eu-west-1-111111111111',
  `a1-aks-eastus-rg-a-${SUBSCRIPTION}`,
  `a2-aks-eastus-rg-a-${SUBSCRIPTION}`,
  `a3-aks-eastus-rg-a-${SUBSCRIPTION}`,
].sort();

/** What `once --output json` prints (the parts the matrix reads). */
export interface OnceJson {
  result: string;
  counts: Record<string, number>;
  sources: {id: string; ok: boolean; error?: {reason: string; code: string; operation: string; message?: string}}[];
  clusters: {name: string; action: string; reason: string}[];
}

/** The running fakes and proxies. */
export interface Harness {
  readonly aws: FakeAws;
  readonly arm: FakeArm;
  readonly awsProxy: FaultProxy;
  readonly armProxy: FaultProxy;
  readonly dir: string;
  /**
   * Writes a config with its own sqlite registry; returns its path. Short deadlines (2 s per
   * call, 5 s per cycle) keep hang rows quick; `relaxed` keeps the defaults, for the first,
   * cold run that also loads the SDKs.
   */
  config(name: string, relaxed?: boolean): Promise<string>;
  /** The sqlite file of the config called `name`. */
  registryPath(name: string): string;
  close(): Promise<void>;
}

/** Starts fakes, proxies and the environment the service reads (credentials, endpoints, `az`). */
export async function startHarness(): Promise<Harness> {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  for (const name of ['a', 'b', 'c']) world.addCluster(ACCOUNT, 'us-east-1', {name, tags: {env: 'prod'}});
  world.addCluster(ACCOUNT, 'eu-west-1', {name: 'e1', tags: {env: 'prod'}});
  const aws = await startFakeAws({world});
  const awsProxy = await startFaultProxy({upstream: aws.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});

  const azure = new ArmWorld();
  azure.addSubscription({subscriptionId: SUBSCRIPTION});
  for (const name of ['a1', 'a2', 'a3']) azure.addCluster({subscriptionId: SUBSCRIPTION, resourceGroup: 'rg-a', name, location: 'eastus', tags: {env: 'prod'}});
  const arm = await startFakeArm({world: azure});
  // ARM clients send bearer tokens over HTTPS only: the proxy serves the fakes' loopback
  // certificate, and this process trusts its CA (what NODE_EXTRA_CA_CERTS does for a child process).
  const armProxy = await startFaultProxy({upstream: arm.url, upstreamCa: arm.caPem, tls: await sharedServerTls(), classify: armClassifier()});
  const defaultCas = tls.getCACertificates('default');
  tls.setDefaultCACertificates([...defaultCas, arm.caPem]);

  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-faults-'));
  const bin = path.join(dir, 'bin');
  await mkdir(bin);
  await writeFile(path.join(bin, 'az'), `#!/bin/sh\necho '{"accessToken":"${FAKE_ARM_TOKEN}","expires_on":${Math.floor(Date.now() / 1000) + 3600},"tokenType":"Bearer"}'\n`);
  await chmod(path.join(bin, 'az'), 0o755);
  const restoreEnv = setEnv({
    PATH: `${bin}:${process.env['PATH'] ?? ''}`,
    AWS_ENDPOINT_URL_EKS: awsProxy.url,
    AWS_ENDPOINT_URL_STS: awsProxy.url,
    AWS_ACCESS_KEY_ID: KEY.accessKeyId,
    AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey,
    AWS_REGION: 'us-east-1',
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_MAX_ATTEMPTS: '1',
    // Adaptive mode's client-side rate limiter slows every call after a throttle for seconds:
    // right for a 5-minute poll, but the matrix wants the very next cycle to show recovery.
    AWS_RETRY_MODE: 'standard',
    AZURE_TOKEN_CREDENTIALS: 'AzureCliCredential',
  });
  return {
    aws,
    arm,
    awsProxy,
    armProxy,
    dir,
    registryPath: (name) => path.join(dir, `${name}.db`),
    async config(name, relaxed = false) {
      const file = path.join(dir, `${name}.yaml`);
      await writeFile(
        file,
        `version: v1
discovery_service:
  discovery_group: matrix
  poll_interval: 1h
${relaxed ? '' : '  request_timeout: 2s\n  cycle_timeout: 5s\n'}  aws:
    - types: [eks]
      regions: [us-east-1, eu-west-1]
  azure:
    - types: [aks]
      subscriptions: ["*"]
      resource_manager_endpoint: ${armProxy.url}
storage: {type: sqlite, path: ${path.join(dir, `${name}.db`)}}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
log: {level: debug}
`,
      );
      return file;
    },
    async close() {
      restoreEnv();
      tls.setDefaultCACertificates(defaultCas);
      await awsProxy.close();
      await armProxy.close();
      await aws.close();
      await arm.close();
      await rm(dir, {recursive: true, force: true});
    },
  };
}

/** Runs `once -c FILE --output json` in-process. */
export async function once(file: string): Promise<{code: number; json: OnceJson; stderr: string}> {
  const cap = captureIo();
  const code = await main(['once', '-c', file, '--output', 'json'], cap.io);
  const out = cap.stdout();
  if (!out) throw new Error(`once printed nothing (exit ${code}): ${cap.stderr()}`);
  return {code, json: JSON.parse(out) as OnceJson, stderr: cap.stderr()};
}

/**
 * Runs one clean `once` into a registry of its own and returns a function that gives each test a
 * copy of it: a config (short deadlines) whose registry already holds every cluster of the clean
 * world, and the config's text. A clean run per test would double a suite's time.
 */
export async function goldenRegistry(h: Harness, prefix: string): Promise<() => Promise<{file: string; text: string}>> {
  const clean = await once(await h.config(`${prefix}-golden`, true));
  const created = clean.json.clusters.filter((c) => c.action === 'create').map((c) => c.name).sort();
  if (clean.code !== 0 || JSON.stringify(created) !== JSON.stringify(ALL_NAMES)) {
    throw new Error(`the clean run registered ${JSON.stringify(created)} (exit ${clean.code}): ${JSON.stringify(clean.json.sources)}`);
  }
  const golden = h.registryPath(`${prefix}-golden`);
  let copies = 0;
  return async () => {
    const name = `${prefix}-${copies++}`;
    const file = await h.config(name);
    await copyFile(golden, h.registryPath(name));
    return {file, text: await readFile(file, 'utf8')};
  };
}

/** A service started in-process on a config file, with its log lines collected. */
export interface Service {
  readonly svc: RunningService;
  readonly logs: Record<string, unknown>[];
  /** Runs a cycle now and waits for it. */
  cycle(): Promise<void>;
  servers(): Promise<KubeServer[]>;
  status(): Promise<{sources: {id: string; ok: boolean; last_error?: {reason: string; message?: string}}[]; last_cycle?: {deadline_exceeded?: boolean}}>;
  metrics(): Promise<string>;
  stop(): Promise<void>;
}

/** Starts the service and waits for its first cycle. */
export async function start(file: string, text: string): Promise<Service> {
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = pino({level: 'debug'}, sink);
  const config = parseConfig(text, file);
  const svc = await startService({
    config,
    io: captureIo().io,
    clock: systemClock,
    logger,
    // Fast ARM retries: the matrix wants each fault's own outcome, not the SDK's backoff.
    discovery: {azure: {logger, clientOptions: {retryOptions: {maxRetries: 1, retryDelayInMs: 5, maxRetryDelayInMs: 10}}}},
  });
  const get = async (p: string): Promise<Response> => fetch(`${svc.url}${p}`);
  // Ready = the first cycle has completed (the waiter list may miss a cycle that ended during start-up).
  // A generous bound (the cycle deadline is 5 s): only a wedged service gets here.
  const giveUp = Date.now() + 60_000;
  while ((await get('/readyz')).status !== 200) {
    if (Date.now() > giveUp) throw new Error('the service never completed its first cycle');
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    svc,
    logs,
    async cycle() {
      const done = svc.nextCycle();
      svc.trigger();
      await done;
    },
    async servers() {
      return ((await (await get('/v1/kube_servers?limit=1000')).json()) as {items: KubeServer[]}).items;
    },
    async status() {
      return (await (await get('/v1/status')).json()) as Awaited<ReturnType<Service['status']>>;
    },
    async metrics() {
      return (await get('/metrics')).text();
    },
    stop: () => svc.stop({deregister: false, graceMs: 0}),
  };
}

/** The value of one metric series in Prometheus text (0 when absent). */
export function metricValue(text: string, name: string, labels: Record<string, string>): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}
