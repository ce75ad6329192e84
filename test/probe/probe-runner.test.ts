// The probe runner: many kube_servers probed against the fake Kubernetes API with real EKS
// tokens from the cached token source, bounded concurrency, isolated failures.
import net from 'node:net';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import {eksTokenSource} from '../../src/probe/eks-token-source.ts';
import {ProbeRunner} from '../../src/probe/probe-runner.ts';
import {tokenSources} from '../../src/probe/token-source.ts';
import {FakeAwsWorld} from '../fakes/aws-world.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {createTestCa} from '../fakes/tls-ca.ts';
import {eksAuthenticator, eksKubeServer, until} from './eks-fixtures.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const KEY = {accessKeyId: 'AKIAPROBERUNNER00001', secretAccessKey: 'probe-runner-secret'};
const PRINCIPAL = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const TIMEOUT_MS = 10_000;
const MIN = 60_000;
const CLUSTERS = ['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'good', 'shared', 'unmapped'];

const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
const world = new FakeAwsWorld({clock});
world.addAccount(ACCOUNT, {accessKeys: [{...KEY, arn: PRINCIPAL}]});
for (const name of CLUSTERS) {
  world.addCluster(ACCOUNT, REGION, {name});
  if (name !== 'unmapped') world.addAccessEntry(ACCOUNT, REGION, name, {principalArn: PRINCIPAL, kubernetesGroups: ['kube-discovery']});
}

let kube: FakeKubeApi;
let caPem: string;
let mints = 0;

beforeAll(async () => {
  const ca = await createTestCa();
  caPem = ca.caPem;
  const authn = eksAuthenticator({world, clusters: CLUSTERS.map((name) => ({account: ACCOUNT, region: REGION, name})), now: () => clock.now()});
  kube = await startFakeKubeApi({tls: await ca.issueServerCert(), authenticate: authn.authenticate});
});

afterAll(async () => {
  await kube.close();
});

beforeEach(() => {
  kube.setMode('ok');
  mints = 0;
});

/** A runner with the real EKS token source signing with the fake account's key. */
function runner(concurrency = 4): ProbeRunner {
  const providers = new AwsCredentialProviders({clock, env: {}, base: () => Promise.resolve(KEY)});
  const tokens = tokenSources({eks: eksTokenSource({clock, env: {}, providers, onMint: () => mints++})});
  return new ProbeRunner({clock, concurrency, timeoutMs: TIMEOUT_MS, tokenFor: tokens.token, ...(tokens.forget ? {forgetToken: tokens.forget} : {}), principalFor: () => PRINCIPAL});
}

function server(name: string, extra: Parameters<typeof eksKubeServer>[1] = {}): KubeServer {
  return eksKubeServer(name, {endpoint: kube.url, caPem, ...extra});
}

const versionCalls = (): number => kube.requests.filter((r) => r.path === '/version').length;

/** Lets any request a broken limit would have sent reach the fake. */
async function settle(): Promise<void> {
  for (let i = 0; i < 2_000; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('ProbeRunner', () => {
  it('never has more probes in flight at the API server than its concurrency', async () => {
    kube.setMode('hang');
    const servers = ['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6'].map((name) => server(name));
    const start = versionCalls();
    const inFlight = (): number => versionCalls() - start;

    const pending = runner(3).probeAll(servers);
    for (const expected of [3, 6, 7]) {
      await until(() => inFlight() >= expected, `${expected} probes at the fake`);
      await settle();
      expect(inFlight()).toBe(expected);
      await clock.advance(TIMEOUT_MS);
    }

    const results = await pending;
    expect([...results.keys()].sort()).toEqual(servers.map((s) => s.metadata.name));
    expect(new Set([...results.values()].map((h) => h.reason))).toEqual(new Set(['unreachable']));
  });

  it('keeps each cluster\'s failure to itself', async () => {
    const down = await closedPort();
    const servers = [
      server('good'),
      server('down', {endpoint: `https://127.0.0.1:${down}`, access: {cluster_name: 'good'}}),
      server('bad-region', {access: {cluster_name: 'good', region: 'moon-base'}}),
      server('creating', {endpoint: undefined}),
      server('unmapped'),
    ];

    const results = await runner().probeAll(servers);

    expect(Object.fromEntries([...results].map(([name, h]) => [name, `${h.status}/${h.reason ?? ''}`]))).toEqual({
      good: 'healthy/',
      down: 'unhealthy/unreachable',
      'bad-region': 'unhealthy/no_credentials',
      creating: 'unknown/no_endpoint',
      unmapped: 'unhealthy/unauthorized',
    });
    expect(results.get('bad-region')?.message).toContain('moon-base');
    expect(results.get('unmapped')?.message).toContain(`--principal-arn ${PRINCIPAL}`);
  });

  it('shares one token per cluster until half its life, then renews it', async () => {
    const probes = runner();
    const servers = ['a', 'b', 'c'].map((name) => server(name, {access: {cluster_name: 'shared'}}));
    const seen = kube.requests.length;
    const tokensSeen = (): number => new Set(kube.requests.slice(seen).map((r) => r.authorization)).size;

    const first = await probes.probeAll(servers);
    await clock.advance(3 * MIN);
    const second = await probes.probeAll(servers);

    expect([...first.values(), ...second.values()].map((h) => h.status)).toEqual(Array(6).fill('healthy'));
    expect(mints).toBe(1);
    expect(tokensSeen()).toBe(1);

    // Past half of the 14-minute life: the old token still serves while one renewal runs.
    await clock.advance(5 * MIN);
    await probes.probeAll(servers);
    const after = await probes.probeAll(servers);
    expect([...after.values()].map((h) => h.status)).toEqual(Array(3).fill('healthy'));
    expect(mints).toBe(2);
    expect(tokensSeen()).toBe(2);
  });

  it('mints a fresh token after the cluster refused one', async () => {
    const probes = runner();
    await probes.probeAll([server('unmapped')]);
    await probes.probeAll([server('unmapped')]);
    expect(mints).toBe(2);
  });

  it('returns what finished when aborted, without throwing', async () => {
    kube.setMode('hang');
    const controller = new AbortController();
    const start = versionCalls();

    const pending = runner(1).probeAll([server('c0'), server('c1'), server('c2')], controller.signal);
    await until(() => versionCalls() > start, 'the first probe at the fake');
    controller.abort(new Error('shutting down'));

    expect((await pending).size).toBe(0);
  });
});

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const {port} = s.address() as net.AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
