import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest';
import type {CliIo} from '../../src/cli/io.ts';
import {runToken, tokenCommand} from '../../src/cli/token.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {startFakeAws, type FakeAws} from '../fakes/aws-server.ts';
import {FakeAwsWorld} from '../fakes/aws-world.ts';
import {verifyEksTokenRules} from './eks-token-rules.ts';

const KEY_ID = 'AKIDTOKENCLI';
const SECRET = 'cli-secret-key/DO-NOT-PRINT+xyz';
const SESSION = 'cli-session-token/DO-NOT-PRINT=';
const ROLE = 'arn:aws:iam::222222222222:role/kube-discovery';

/** A CliIo that records what the command printed. */
function capture(env: Record<string, string | undefined> = {}) {
  const out = {stdout: '', stderr: ''};
  const io: CliIo = {stdout: (t) => (out.stdout += t), stderr: (t) => (out.stderr += t), env, isTty: false};
  return {io, out};
}

const ENV_NAMES = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_REGION', 'AWS_DEFAULT_REGION'];
const saved = Object.fromEntries(ENV_NAMES.map((n) => [n, process.env[n]]));

/** The SDK's credential chain reads process.env; tests set it and restore it after each test. */
function useEnvCredentials(withSession = false): void {
  process.env['AWS_ACCESS_KEY_ID'] = KEY_ID;
  process.env['AWS_SECRET_ACCESS_KEY'] = SECRET;
  if (withSession) process.env['AWS_SESSION_TOKEN'] = SESSION;
}

afterEach(() => {
  for (const name of ENV_NAMES) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
});

function expectOneCleanLine(stderr: string): void {
  expect(stderr.endsWith('\n')).toBe(true);
  expect(stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(stderr).not.toMatch(/\n\s+at /);
  expect(stderr).not.toContain(SECRET);
  expect(stderr).not.toContain(SESSION);
}

describe('token eks', () => {
  const start = Date.UTC(2024, 0, 1);

  it('prints a v1beta1 ExecCredential whose token the authenticator accepts', async () => {
    useEnvCredentials();
    const {io, out} = capture();
    const code = await tokenCommand({clock: new FakeClock(start)})(['eks', '--cluster-name', 'prod', '--region', 'us-west-2'], io);
    expect({code, stderr: out.stderr}).toEqual({code: 0, stderr: ''});
    const cred = JSON.parse(out.stdout) as {status: {token: string}};
    expect(cred).toEqual({
      kind: 'ExecCredential',
      apiVersion: 'client.authentication.k8s.io/v1beta1',
      spec: {},
      status: {expirationTimestamp: '2024-01-01T00:14:00Z', token: expect.stringMatching(/^k8s-aws-v1\./)},
    });
    expect(verifyEksTokenRules(cred.status.token, {clusterId: 'prod', now: start, secrets: {[KEY_ID]: SECRET}}).ok).toBe(true);
  });

  it.each([
    ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1'],
    ['client.authentication.k8s.io/v1beta1', 'client.authentication.k8s.io/v1beta1'],
  ])('answers in the apiVersion KUBERNETES_EXEC_INFO asks for (%s)', async (asked, answered) => {
    useEnvCredentials();
    const info = JSON.stringify({kind: 'ExecCredential', apiVersion: asked, spec: {interactive: false}});
    const {io, out} = capture({KUBERNETES_EXEC_INFO: info, AWS_REGION: 'eu-central-1'});
    expect(await runToken(['eks', '--cluster-name', 'prod'], io)).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({apiVersion: answered, status: {expirationTimestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)}});
  });

  it('refuses an ExecCredential version it cannot speak', async () => {
    useEnvCredentials();
    const {io, out} = capture({KUBERNETES_EXEC_INFO: '{"apiVersion":"client.authentication.k8s.io/v1alpha1"}'});
    expect(await runToken(['eks', '--cluster-name', 'prod', '--region', 'us-east-1'], io)).toBe(2);
    expect(out.stderr).toMatch(/^kube-discovery token: expected KUBERNETES_EXEC_INFO apiVersion to be one of .*v1beta1.*got "client\.authentication\.k8s\.io\/v1alpha1"\n$/);
    expect(out.stdout).toBe('');
  });

  it('without credentials: exit 1 and one line saying what to set', async () => {
    const {io, out} = capture();
    expect(await runToken(['eks', '--cluster-name', 'prod', '--region', 'us-east-1'], io)).toBe(1);
    expect(out.stdout).toBe('');
    expectOneCleanLine(out.stderr);
    expect(out.stderr).toMatch(/^kube-discovery token: no AWS credentials found: .*AWS_ACCESS_KEY_ID/);
  });

  it.each([
    [['eks', '--region', 'us-east-1'], /expected --cluster-name NAME, got none/],
    [['eks', '--cluster-name', 'prod'], /expected --region REGION/],
    [['eks', '--cluster-name', 'prod', '--region', 'us-east-1', '--bogus'], /Unknown option '--bogus'/],
    [['eks', '--cluster-name', 'prod', '--region', 'mars-1'], /expected an AWS region .* got "mars-1"/],
    [['gke'], /expected one of eks, aks, got "gke"/],
    [['aks'], /expected --server-id ID/],
  ])('usage error %j: exit 2', async (argv, message) => {
    useEnvCredentials();
    const {io, out} = capture();
    expect(await runToken(argv, io)).toBe(2);
    expect(out.stderr).toMatch(message);
    expect(out.stdout).toBe('');
  });
});

describe('token eks --role-arn, against the fake STS', () => {
  let fake: FakeAws;

  beforeAll(async () => {
    const world = new FakeAwsWorld();
    world.addAccount('111111111111', {accessKeys: [{accessKeyId: KEY_ID, secretAccessKey: SECRET, sessionToken: SESSION}]});
    world.addAccount('222222222222', {roles: [{arn: ROLE, externalId: 'ext-123', trust: ['111111111111']}]});
    fake = await startFakeAws({world});
  });
  afterAll(() => fake.close());

  it('assumes the role and mints a token STS resolves to the assumed role', async () => {
    useEnvCredentials(true);
    const {io, out} = capture({...fake.env});
    const code = await runToken(['eks', '--cluster-name', 'prod', '--region', 'us-east-1', '--role-arn', ROLE, '--external-id', 'ext-123'], io);
    expect({code, stderr: out.stderr}).toEqual({code: 0, stderr: ''});
    expect(fake.stats.count({operation: 'AssumeRole'})).toBe(1);

    // Replay the token as the EKS authenticator does: GET the URL with the cluster header.
    const {status} = (JSON.parse(out.stdout) as {status: {token: string}});
    const url = Buffer.from(status.token.slice('k8s-aws-v1.'.length), 'base64url').toString();
    expect(url.startsWith(`${fake.url}/?Action=GetCallerIdentity&Version=2011-06-15&`)).toBe(true);
    const res = await fetch(url, {headers: {'x-k8s-aws-id': 'prod'}});
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('<Arn>arn:aws:sts::222222222222:assumed-role/kube-discovery/kube-discovery</Arn>');
    const other = await fetch(url, {headers: {'x-k8s-aws-id': 'staging'}});
    expect(other.status).toBe(403);
  });

  it('AccessDenied on AssumeRole: exit 1, one line naming the role, no secret', async () => {
    useEnvCredentials(true);
    const {io, out} = capture({...fake.env});
    const code = await runToken(['eks', '--cluster-name', 'prod', '--region', 'us-east-1', '--role-arn', ROLE, '--external-id', 'wrong'], io);
    expect(code).toBe(1);
    expect(out.stdout).toBe('');
    expectOneCleanLine(out.stderr);
    expect(out.stderr).toMatch(
      /^kube-discovery token: cannot assume role arn:aws:iam::222222222222:role\/kube-discovery: AccessDenied: User: arn:aws:iam::111111111111:user\/fake-user is not authorized/,
    );
  });

  it('credentials STS does not know: exit 1, one line, no secret', async () => {
    process.env['AWS_ACCESS_KEY_ID'] = 'AKIDUNKNOWN';
    process.env['AWS_SECRET_ACCESS_KEY'] = SECRET;
    const {io, out} = capture({...fake.env});
    expect(await runToken(['eks', '--cluster-name', 'prod', '--region', 'us-east-1', '--role-arn', ROLE], io)).toBe(1);
    expectOneCleanLine(out.stderr);
    expect(out.stderr).toMatch(/cannot assume role .*: InvalidClientTokenId: /);
  });
});
