// `kube-discovery kubeconfig`: reads kube_servers from the HTTP API (all pages) or the
// registry, and writes one exec-plugin context per cluster, never a token.
import {existsSync} from 'node:fs';
import {chmod, lstat, mkdtemp, readFile, rm, stat, symlink, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest';
import {parse} from 'yaml';
import {kubeServerKey, type KubeServer} from '../../heartbeats/kube-server.ts';
import type {CliIo} from '../../src/cli/io.ts';
import {runKubeconfig} from '../../src/cli/kubeconfig.ts';
import {systemClock} from '../../src/core/clock.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {aksKubeServer, base64, eksKubeServer} from '../probe/eks-fixtures.ts';
import {startKubeServersApi, type FakeKubeServersApi} from './kube-servers-api.ts';

const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBfakeclusterca\n-----END CERTIFICATE-----\n';
const API_TOKEN = 'api-bearer-token-DO-NOT-EMBED';
const ROLE = 'arn:aws:iam::222222222222:role/kube-discovery';

const SERVERS: KubeServer[] = [
  eksKubeServer('prod-eks-us-east-1-111111111111', {
    endpoint: 'https://prod.gr7.us-east-1.eks.amazonaws.com',
    caPem: CA_PEM,
    access: {cluster_name: 'prod', region: 'us-east-1', role_arn: ROLE, external_id: 'ext-123'},
    labels: {env: 'prod'},
  }),
  eksKubeServer('dev-eks-eu-west-1-111111111111', {endpoint: 'https://dev.eks.example', caPem: CA_PEM, access: {cluster_name: 'dev', region: 'eu-west-1'}, labels: {env: 'dev'}}),
  eksKubeServer('creating-eks-us-east-1-111111111111', {access: {cluster_name: 'creating'}, labels: {env: 'prod'}}),
  aksKubeServer('aks-prod', {endpoint: 'https://aks-prod.hcp.eastus.azmk8s.io:443', caPem: CA_PEM, serverId: '6dae42f8-4368-4678-94ff-3960e28e3630', labels: {env: 'prod'}}),
  eksKubeServer('staging-eks-us-west-2-111111111111', {endpoint: 'https://staging.eks.example', caPem: CA_PEM, access: {cluster_name: 'staging', region: 'us-west-2', role_arn: ROLE}, labels: {env: 'staging'}}),
];

interface Kubeconfig {
  'current-context': string;
  clusters: {name: string; cluster: {server: string; 'certificate-authority-data': string}}[];
  contexts: {name: string; context: {cluster: string; user: string}}[];
  users: {name: string; user: {exec: {apiVersion: string; command: string; args: string[]; interactiveMode: string; provideClusterInfo: boolean}}}[];
}

let api: FakeKubeServersApi;
let dir: string;

beforeAll(async () => {
  api = await startKubeServersApi(SERVERS, {token: API_TOKEN});
  dir = await mkdtemp(path.join(tmpdir(), 'kd-kubeconfig-'));
  await writeFile(path.join(dir, 'api-token'), `${API_TOKEN}\n`);
});

afterAll(async () => {
  await api.close();
  await rm(dir, {recursive: true, force: true});
});

afterEach(() => {
  api.requests.length = 0;
});

function capture(env: Record<string, string> = {}) {
  const out = {stdout: '', stderr: ''};
  const io: CliIo = {stdout: (t) => (out.stdout += t), stderr: (t) => (out.stderr += t), env, isTty: false};
  return {io, out};
}

const execOf = (config: Kubeconfig, name: string) => config.users.find((u) => u.name === name)?.user.exec;

describe('kubeconfig', () => {
  it('writes one exec-plugin context per cluster from every page, readable by the owner only', async () => {
    const file = path.join(dir, 'all.yaml');
    const {io, out} = capture();

    const code = await runKubeconfig(['--server', api.url, '--token-file', path.join(dir, 'api-token'), '-o', file], io);

    expect(code).toBe(0);
    expect(api.requests.map((r) => r.url)).toEqual([
      '/v1/kube_servers?limit=500',
      '/v1/kube_servers?limit=500&next_page_token=2',
      '/v1/kube_servers?limit=500&next_page_token=4',
    ]);
    expect(new Set(api.requests.map((r) => r.authorization))).toEqual(new Set([`Bearer ${API_TOKEN}`]));
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const text = await readFile(file, 'utf8');
    const config = parse(text) as Kubeconfig;
    const names = ['prod-eks-us-east-1-111111111111', 'dev-eks-eu-west-1-111111111111', 'aks-prod', 'staging-eks-us-west-2-111111111111'];
    expect(config.contexts).toEqual(names.map((name) => ({name, context: {cluster: name, user: name}})));
    expect(config['current-context']).toBe(names[0]);
    expect(config.clusters[0]).toEqual({name: names[0], cluster: {server: 'https://prod.gr7.us-east-1.eks.amazonaws.com', 'certificate-authority-data': base64(CA_PEM)}});
    expect(out.stderr).toContain('skipping creating-eks-us-east-1-111111111111: no endpoint, CA recorded yet');

    const prod = execOf(config, names[0]!);
    expect(prod).toMatchObject({apiVersion: 'client.authentication.k8s.io/v1beta1', command: process.execPath, interactiveMode: 'Never', provideClusterInfo: false});
    const [script, ...args] = prod?.args ?? [];
    expect(path.isAbsolute(script ?? '')).toBe(true);
    expect(script).toMatch(/src\/cli\/main\.ts$/);
    expect(existsSync(script ?? '')).toBe(true);
    expect(args).toEqual(['token', 'eks', '--cluster-name', 'prod', '--region', 'us-east-1', '--role-arn', ROLE, '--external-id', 'ext-123']);
    expect(execOf(config, names[1]!)?.args.slice(1)).toEqual(['token', 'eks', '--cluster-name', 'dev', '--region', 'eu-west-1']);
    expect(execOf(config, names[3]!)?.args.slice(1)).toEqual(['token', 'eks', '--cluster-name', 'staging', '--region', 'us-west-2', '--role-arn', ROLE]);
    expect(execOf(config, 'aks-prod')?.args.slice(1)).toEqual([
      'token', 'aks', '--server-id', '6dae42f8-4368-4678-94ff-3960e28e3630', '--subscription', 'sub-1', '--resource-group', 'rg-a', '--name', 'aks-prod',
    ]);
    expect(text).not.toContain(API_TOKEN);
    expect(text).not.toMatch(/token:|k8s-aws-v1/);
  });

  it('tightens an existing file to 0600 and replaces its content', async () => {
    const file = path.join(dir, 'existing.yaml');
    await writeFile(file, `${'old content that is longer than the new kubeconfig\n'.repeat(200)}`);
    await chmod(file, 0o644);

    const code = await runKubeconfig(['--server', api.url, '--labels', 'env=dev', '-o', file], capture({KUBE_DISCOVERY_TOKEN: API_TOKEN}).io);

    expect(code).toBe(0);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const text = await readFile(file, 'utf8');
    expect(text).not.toContain('old content');
    expect((parse(text) as Kubeconfig).contexts.map((c) => c.name)).toEqual(['dev-eks-eu-west-1-111111111111']);
  });

  it('writes through a symlinked kubeconfig: the link stays, its target gets the new content', async () => {
    const target = path.join(dir, 'real-kubeconfig.yaml');
    const link = path.join(dir, 'linked.yaml');
    await writeFile(target, 'old content\n');
    await symlink(target, link);

    const code = await runKubeconfig(['--server', api.url, '--labels', 'env=dev', '-o', link], capture({KUBE_DISCOVERY_TOKEN: API_TOKEN}).io);

    expect(code).toBe(0);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect((parse(await readFile(target, 'utf8')) as Kubeconfig).contexts.map((c) => c.name)).toEqual(['dev-eks-eu-west-1-111111111111']);
    expect((await stat(target)).mode & 0o777).toBe(0o600);
  });

  it('keeps only clusters with every --labels label, printing to stdout', async () => {
    const {io, out} = capture({KUBE_DISCOVERY_TOKEN: API_TOKEN});

    const code = await runKubeconfig(['--server', api.url, '--labels', 'env=prod,region=us-east-1'], io);

    expect(code).toBe(0);
    const config = parse(out.stdout) as Kubeconfig;
    expect(config.contexts.map((c) => c.name)).toEqual(['prod-eks-us-east-1-111111111111']);
    expect(api.requests[0]?.url).toContain('labels=env%3Dprod%2Cregion%3Dus-east-1');
  });

  it('fails with exit 1 and a hint when the API wants a token', async () => {
    const {io, out} = capture();

    const code = await runKubeconfig(['--server', api.url], io);

    expect(code).toBe(1);
    expect(out.stderr).toContain('401');
    expect(out.stdout).toBe('');
  });

  it('reads the registry directly with -c', async () => {
    const db = path.join(dir, 'registry.db');
    const backend = await SqliteBackend.open({path: db, clock: systemClock});
    for (const server of SERVERS.slice(0, 2)) await backend.put(kubeServerKey('g1', server.metadata.name), JSON.stringify(server));
    await backend.put(kubeServerKey('other-group', 'x'), JSON.stringify(SERVERS[4]));
    await backend.close();
    const configFile = path.join(dir, 'discovery.yaml');
    await writeFile(configFile, `version: v1\ndiscovery_service: {discovery_group: g1}\nstorage: {type: sqlite, path: ${JSON.stringify(db)}}\n`);
    const {io, out} = capture();

    const code = await runKubeconfig(['-c', configFile], io);

    expect(code).toBe(0);
    expect((parse(out.stdout) as Kubeconfig).contexts.map((c) => c.name).sort()).toEqual(['dev-eks-eu-west-1-111111111111', 'prod-eks-us-east-1-111111111111']);
  });

  it('refuses -c on a memory registry (which lives inside the service) instead of writing a kubeconfig without contexts over the good one', async () => {
    const file = path.join(dir, 'memory-kubeconfig.yaml');
    const good = await runKubeconfig(['--server', api.url, '--token-file', path.join(dir, 'api-token'), '-o', file], capture().io);
    expect(good).toBe(0);
    const before = await readFile(file, 'utf8');
    const configFile = path.join(dir, 'memory.yaml');
    await writeFile(configFile, 'version: v1\ndiscovery_service: {discovery_group: g1}\nstorage: {type: memory}\n');
    const {io, out} = capture();

    const code = await runKubeconfig(['-c', configFile, '-o', file], io);

    expect(code).toBe(2);
    expect(out.stderr).toContain('use --server URL instead');
    expect(await readFile(file, 'utf8')).toBe(before);
  });

  it('refuses --server together with -c', async () => {
    const {io, out} = capture();
    expect(await runKubeconfig(['--server', api.url, '-c', 'x.yaml'], io)).toBe(2);
    expect(out.stderr).toContain('either --server URL or -c FILE');
  });

  it('gives the plugin the environment named by --exec-env, in every user', async () => {
    const {io, out} = capture({KUBE_DISCOVERY_TOKEN: API_TOKEN});

    expect(await runKubeconfig(['--server', api.url, '--labels', 'env=dev', '--exec-env', 'AWS_PROFILE=dev', '--exec-env', 'X=a=b'], io)).toBe(0);

    const config = parse(out.stdout) as {users: {user: {exec: {env: unknown}}}[]};
    expect(config.users.map((u) => u.user.exec.env)).toEqual([[{name: 'AWS_PROFILE', value: 'dev'}, {name: 'X', value: 'a=b'}]]);
  });

  it.each([
    [['--exec-env', 'NOEQUALS'], 'expected --exec-env NAME=VALUE, got "NOEQUALS"'],
    [['--server', 'localhost:3000'], 'did you mean http://localhost:3000?'],
  ])('rejects %j as a usage error', async (argv, message) => {
    const {io, out} = capture();
    expect(await runKubeconfig(argv, io)).toBe(2);
    expect(out.stderr).toContain(message);
  });
});
