/**
 * The dashboard against a real Prometheus: the service runs against the AWS fake (one region
 * failing, clusters probed on a fake Kubernetes API), a `prometheus` on loopback scrapes its
 * /metrics every second, and every panel query of deploy/grafana/kube-discovery.json returns
 * at least one series through Prometheus' HTTP API.
 */
import {spawn, type ChildProcess} from 'node:child_process';
import {readFile, writeFile} from 'node:fs/promises';
import path from 'node:path';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {Metrics} from '../../src/observability/metrics.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {failRegion} from '../fakes/aws-fakes.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';
import {base64, eksAuthenticator} from '../probe/eks-fixtures.ts';
import {describeWithBinary, findBinary, run} from './prom-tools.ts';

const ACCOUNT = '111111111111';
const USER_ARN = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const KEY = {accessKeyId: 'AKIAPROMETHEUSE2E001', secretAccessKey: 'prometheus-e2e-secret', arn: USER_ARN};
/** What Grafana would put in for the dashboard's variables. */
const VARIABLES: Readonly<Record<string, string>> = {$__rate_interval: '1m', $__range: '1m', $__interval: '15s', $job: '.+', $cloud: '.*'};

interface Panel {
  readonly title?: string;
  readonly type: string;
  readonly targets?: readonly {expr: string; refId: string}[];
  readonly panels?: readonly Panel[];
}

async function poll<T>(what: string, attempt: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await attempt();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

describeWithBinary('prometheus', 'Grafana dashboard against a real Prometheus', (prometheusBin) => {
  let aws: AwsServiceWorld | undefined;
  let kube: FakeKubeApi;
  let svc: RunningService;
  let prometheus: ChildProcess;
  let promUrl: string;
  let dir: string;
  let promLog = '';

  async function query(expr: string): Promise<{status: string; error?: string; data?: {result: unknown[]}}> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
    return (await res.json()) as {status: string; error?: string; data?: {result: unknown[]}};
  }

  beforeAll(async () => {
    aws = await startAwsServiceWorld({key: KEY, account: ACCOUNT, tmpPrefix: 'kd-prom-', fault: failRegion('eu-west-1', 'AccessDeniedException')});
    const {world, fake} = aws;
    dir = aws.dir;
    const clusters = ['mapped', 'unmapped'].map((name) => ({account: ACCOUNT, region: 'us-east-1', name}));
    const authn = eksAuthenticator({world, clusters, stsUrl: fake.url});
    kube = await startFakeKubeApi({authenticate: authn.authenticate});
    for (const {name} of clusters) world.addCluster(ACCOUNT, 'us-east-1', {name, tags: {env: 'prod'}, endpoint: kube.url, caData: base64(kube.caPem)});
    world.addCluster(ACCOUNT, 'us-east-1', {name: 'dev', tags: {env: 'dev'}});
    world.addAccessEntry(ACCOUNT, 'us-east-1', 'mapped', {principalArn: USER_ARN, kubernetesGroups: ['kube-discovery'], username: 'kube-discovery'});

    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: prom-e2e
  poll_interval: 1h
  aws: [{types: [eks], regions: [us-east-1, eu-west-1], tags: {env: prod}}]
storage: {type: memory}
http: {listen_addr: "127.0.0.1:0"}
`,
      'prom-e2e.yaml',
    );
    const metrics = new Metrics();
    svc = await startService({
      config,
      io: captureIo().io,
      clock: systemClock,
      logger: silentLogger,
      metrics,
      discovery: {aws: {perRegionConcurrency: 4}},
    });
    await poll('the first cycle', async () => ((await fetch(`${svc.url}/readyz`)).status === 200 ? true : undefined));
    // A second cycle, so the counters have moved more than once.
    const second = svc.nextCycle();
    svc.trigger();
    await second;

    const target = new URL(svc.url).host;
    await writeFile(
      path.join(dir, 'prometheus.yml'),
      `global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: kube-discovery\n    static_configs: [{targets: ["${target}"]}]\n`,
    );
    prometheus = spawn(
      prometheusBin,
      [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        // Port 0, read back from its log: a port picked for it and freed before it binds could be taken first.
        '--web.listen-address=127.0.0.1:0',
        '--log.level=info',
      ],
      {stdio: ['ignore', 'ignore', 'pipe']},
    );
    prometheus.stderr?.on('data', (d: Buffer) => (promLog += d.toString()));
    promUrl = await poll('Prometheus to say where it listens', async () => {
      const port = /msg="Listening on" address=127\.0\.0\.1:(\d+)/.exec(promLog)?.[1];
      return port === undefined ? undefined : `http://127.0.0.1:${port}`;
    });
    await poll('Prometheus to be ready', async () => ((await fetch(`${promUrl}/-/ready`)).status === 200 ? true : undefined));
    // Two scrapes of the service: rate() and increase() need two samples in their window.
    await poll('two scrapes of the service', async () => {
      const r = await query('count_over_time(up{job="kube-discovery"}[1m]) >= 2 and up{job="kube-discovery"} == 1');
      return (r.data?.result.length ?? 0) > 0 ? true : undefined;
    });
  }, 45_000);

  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((r) => prometheus.once('exit', r));
      prometheus.kill('SIGTERM');
      await exited;
    }
    await svc?.stop({deregister: false, graceMs: 0});
    await kube?.close();
    await aws?.close();
  });

  it('answers every panel query of the dashboard with at least one series', async () => {
    const dashboard = JSON.parse(await readFile('deploy/grafana/kube-discovery.json', 'utf8')) as {panels: Panel[]};
    const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');
    const queries = panels.flatMap((p) => (p.targets ?? []).map((t) => ({panel: `${p.title ?? '?'} [${t.refId}]`, expr: t.expr})));
    expect(queries.length).toBeGreaterThan(25);

    const empty: string[] = [];
    for (const {panel, expr} of queries) {
      const concrete = Object.entries(VARIABLES).reduce((e, [name, v]) => e.replaceAll(name, v), expr);
      expect(concrete, `${panel}: a variable was left unsubstituted`).not.toMatch(/\$/);
      const answer = await query(concrete);
      if (answer.status !== 'success') empty.push(`${panel}: ${answer.error ?? answer.status} — ${concrete}`);
      else if ((answer.data?.result.length ?? 0) === 0) empty.push(`${panel}: no series — ${concrete}`);
    }
    expect(empty, promLog).toEqual([]);
  });

  it('serves /metrics that promtool check metrics accepts', async () => {
    const promtool = findBinary('promtool');
    if (promtool === undefined) throw new Error('promtool not found next to prometheus: install the Debian package "prometheus"');
    const res = await fetch(`${svc.url}/metrics`);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const result = await run(promtool, ['check', 'metrics'], await res.text());
    expect(result.stdout + result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('shows the failing region, the cloud API codes and the probe outcomes an operator looks for', async () => {
    const failed = await query('max without (instance) (kube_discovery_sources{state="failed"}) > 0');
    expect(failed.data?.result).toEqual([expect.objectContaining({metric: expect.objectContaining({cloud: 'AWS', region: 'eu-west-1'})})]);
    const denied = await query('kube_discovery_cloud_api_requests_total{code="AccessDeniedException"}');
    expect(denied.data?.result.length).toBeGreaterThan(0);
    const probes = await query('sum by (health, reason) (kube_discovery_probes_total) > 0');
    expect(probes.data?.result).toEqual(
      expect.arrayContaining([
        expect.objectContaining({metric: {health: 'healthy', reason: 'none'}}),
        expect.objectContaining({metric: {health: 'unhealthy', reason: 'unauthorized'}}),
      ]),
    );
  });
});
