// `kube-discovery ls` against a stand-in of the HTTP API: the kubectl-like table at 120
// columns (snapshot), labels only on request, every output format, selectors, the empty
// state and a server address without a scheme.
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {parse} from 'yaml';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {lsCommand} from '../../src/cli/ls.ts';
import {captureIo} from '../helpers/env.ts';
import {aksKubeServer, eksKubeServer} from '../probe/eks-fixtures.ts';
import {startKubeServersApi, type FakeKubeServersApi} from './kube-servers-api.ts';

const NOW = Date.UTC(2026, 0, 2, 12, 0, 0);
const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

function withStatus(server: KubeServer, status: Partial<NonNullable<KubeServer['status']>>): KubeServer {
  return {...server, status: {...server.status, ...status}};
}

const SERVERS: KubeServer[] = [
  withStatus(eksKubeServer('prod-payments-eks-us-east-1-111111111111', {labels: {env: 'prod', team: 'payments', 'cost-center': '1042'}}), {
    target_health: {status: 'healthy'},
    discovered_at: new Date(NOW - 3 * 86_400_000).toISOString(),
  }),
  withStatus(eksKubeServer('staging-eks-eu-west-1-222222222222', {access: {region: 'eu-west-1'}, account: '222222222222', labels: {env: 'staging'}}), {
    target_health: {status: 'unhealthy', reason: 'unauthorized', message: 'add an access entry'},
    stale: true,
    stale_reason: 'source eks:eu-west-1:222222222222 failed',
    discovered_at: new Date(NOW - 5 * 3_600_000).toISOString(),
  }),
  withStatus(
    aksKubeServer('aks-platform-shared-services-westeurope-rg-platform-networking-00000000-0000-4000-8000-00000000a001', {
      endpoint: 'https://aks.example:443',
      caPem: CA,
      labels: {env: 'prod', team: 'platform', description: 'a very long label value that would push the table far past any terminal width'},
    }),
    {target_health: {status: 'unknown', reason: 'not_probed'}, discovered_at: new Date(NOW - 90_000).toISOString()},
  ),
];

let api: FakeKubeServersApi;
let empty: FakeKubeServersApi;
const ls = lsCommand({clock: new FakeClock(NOW)});

beforeAll(async () => {
  api = await startKubeServersApi(SERVERS);
  empty = await startKubeServersApi([]);
});
afterAll(() => Promise.all([api?.close(), empty?.close()]));

async function run(argv: string[], env: Record<string, string> = {}) {
  const out = captureIo(env);
  const code = await ls(argv, {...out.io, isTty: true});
  return {code, stdout: out.stdout(), stderr: out.stderr()};
}

describe('ls', () => {
  it('prints the key columns first and fits 120 columns (snapshot)', async () => {
    const {code, stdout} = await run(['--server', api.url]);

    expect(code).toBe(0);
    expect(stdout).toMatchInlineSnapshot(`
      "NAME                                                          CLOUD   REGION      HEALTH                     STALE   AGE
      prod-payments-eks-us-east-1-111111111111                      AWS     us-east-1   healthy                    no      3d
      staging-eks-eu-west-1-222222222222                            AWS     eu-west-1   unhealthy (unauthorized)   yes     5h
      aks-platform-shared-services-…0-0000-4000-8000-00000000a001   Azure   eastus      unknown (not_probed)       no      90s
      "
    `);
  });

  it('adds labels with -o wide and --show-labels, cutting names in the middle and labels at the end to fit 120 columns', async () => {
    const wide = await run(['--server', api.url, '-o', 'wide']);
    const shown = await run(['--server', api.url, '--show-labels']);

    expect(wide.stdout).toBe(shown.stdout);
    expect(wide.stdout).toMatchInlineSnapshot(`
      "NAME                                       CLOUD   REGION      HEALTH                     STALE   AGE   LABELS
      prod-payments-eks-us-east-1-111111111111   AWS     us-east-1   healthy                    no      3d    cost-center=104…
      staging-eks-eu-west-1-222222222222         AWS     eu-west-1   unhealthy (unauthorized)   yes     5h    env=staging
      aks-platform-shared-…0-8000-00000000a001   Azure   eastus      unknown (not_probed)       no      90s   description=a v…
      "
    `);
    for (const line of wide.stdout.trimEnd().split('\n')) expect(line.length).toBeLessThanOrEqual(120);
  });

  it('selects with -l like kubectl', async () => {
    const {stdout} = await run(['--server', api.url, '-l', 'env=prod', '-o', 'name']);

    expect(stdout).toBe(
      'kube_server/prod-payments-eks-us-east-1-111111111111\n' +
        'kube_server/aks-platform-shared-services-westeurope-rg-platform-networking-00000000-0000-4000-8000-00000000a001\n',
    );
    expect(api.requests.at(-1)?.url).toContain('labels=env%3Dprod');
  });

  it('reads -l env==prod as kubectl does, and refuses -l env!=prod (exit 2) instead of saying no cluster is found', async () => {
    const equal = await run(['--server', api.url, '-l', 'env==prod', '-o', 'name']);
    expect(equal.code).toBe(0);
    expect(equal.stdout.split('\n').filter(Boolean)).toHaveLength(2);

    const requests = api.requests.length;
    const notEqual = await run(['--server', api.url, '-l', 'env!=prod']);
    expect(notEqual.code).toBe(2);
    expect(notEqual.stderr).toContain('only equality');
    expect(api.requests).toHaveLength(requests);
  });

  it('prints json and yaml with cloud, region, health, stale and labels', async () => {
    const json = JSON.parse((await run(['--server', api.url, '-o', 'json'])).stdout) as unknown[];
    const yaml = parse((await run(['--server', api.url, '-o', 'yaml'])).stdout) as unknown[];

    expect(yaml).toEqual(json);
    expect(json[1]).toMatchObject({
      name: 'staging-eks-eu-west-1-222222222222',
      cloud: 'AWS',
      region: 'eu-west-1',
      health: {status: 'unhealthy', reason: 'unauthorized'},
      stale: true,
      stale_reason: 'source eks:eu-west-1:222222222222 failed',
      labels: {env: 'staging'},
    });
  });

  it('says plainly when there is nothing to list, and where to look', async () => {
    const {code, stdout, stderr} = await run(['--server', empty.url, '-l', 'env=prod']);

    expect(code).toBe(0);
    expect(stdout).toBe('');
    expect(stderr).toBe(`No clusters found at ${empty.url} matching env=prod. A service that just started may still be in its first cycle: see ${empty.url}/v1/status\n`);
  });

  it.each([
    ['localhost:3999', /expected --server to be an http:\/\/ or https:\/\/ URL, got "localhost:3999"; did you mean http:\/\/localhost:3999\?/],
    ['ftp://host', /expected --server to be an http:\/\/ or https:\/\/ URL, got "ftp:\/\/host"$/m],
  ])('rejects --server %s as a usage error (exit 2)', async (server, message) => {
    const {code, stderr} = await run(['--server', server]);

    expect(code).toBe(2);
    expect(stderr).toMatch(message);
  });

  it('rejects an unknown output format with the known ones', async () => {
    const {code, stderr} = await run(['--server', api.url, '-o', 'xml']);

    expect(code).toBe(2);
    expect(stderr).toContain('expected --output to be one of table, wide, name, json, yaml, got "xml"');
  });
});
