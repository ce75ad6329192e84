// `kube-discovery token aks`: a kubelogin-style exec credential plugin with an injected
// Entra ID credential (nothing reaches Entra ID or IMDS).
import type {AccessToken, GetTokenOptions, TokenCredential} from '@azure/core-auth';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {CliIo} from '../../src/cli/io.ts';
import {tokenCommand} from '../../src/cli/token.ts';
import type {AzureCredentialOptions} from '../../src/credentials/aks-credential.ts';
import {AKS_SERVER_ID} from '../../src/credentials/aks-token.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {FAKE_ARM_TOKEN, startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';

const SECRET = 'azure-client-secret~DO-NOT-PRINT';
const EXPIRES = Date.UTC(2026, 0, 1, 1, 0, 0, 500);

function capture(env: Record<string, string | undefined> = {}) {
  const out = {stdout: '', stderr: ''};
  const io: CliIo = {stdout: (t) => (out.stdout += t), stderr: (t) => (out.stderr += t), env, isTty: false};
  return {io, out};
}

/** A credential factory recording what it was built with and which scopes were asked for. */
function fakeFactory(answer: (scopes: string[]) => Promise<AccessToken>) {
  const built: AzureCredentialOptions[] = [];
  const asked: {scopes: string[]; options?: GetTokenOptions}[] = [];
  const factory = (options: AzureCredentialOptions): TokenCredential => {
    built.push(options);
    return {
      getToken(scopes, options) {
        const list = [scopes].flat();
        asked.push({scopes: list, ...(options ? {options} : {})});
        return answer(list);
      },
    };
  };
  return {factory, built, asked};
}

const ok = () => Promise.resolve({token: 'eyJ.entra.token', expiresOnTimestamp: EXPIRES, tokenType: 'Bearer' as const});

function expectOneCleanLine(stderr: string): void {
  expect(stderr.endsWith('\n')).toBe(true);
  expect(stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(stderr).not.toMatch(/\bat .*\(.*:\d+:\d+\)/);
  expect(stderr).not.toContain(SECRET);
}

describe('token aks', () => {
  it('prints an ExecCredential with an Entra ID token for <server-id>/.default', async () => {
    const fake = fakeFactory(ok);
    const {io, out} = capture();

    const code = await tokenCommand({azureCredential: fake.factory})(['aks', '--server-id', AKS_SERVER_ID], io);

    expect({code, stderr: out.stderr}).toEqual({code: 0, stderr: ''});
    expect(JSON.parse(out.stdout)).toEqual({
      kind: 'ExecCredential',
      apiVersion: 'client.authentication.k8s.io/v1beta1',
      spec: {},
      status: {token: 'eyJ.entra.token', expirationTimestamp: '2026-01-01T01:00:00Z'},
    });
    expect(fake.asked.map((a) => a.scopes)).toEqual([[`${AKS_SERVER_ID}/.default`]]);
    expect(fake.built).toEqual([{cloud: 'AzurePublicCloud'}]);
  });

  it('passes tenant, client id and cloud to the credential, and answers in the version kubectl asks for', async () => {
    const fake = fakeFactory(ok);
    const info = JSON.stringify({kind: 'ExecCredential', apiVersion: 'client.authentication.k8s.io/v1', spec: {interactive: false}});
    const {io, out} = capture({KUBERNETES_EXEC_INFO: info});
    const tenant = 'aaaaaaaa-0000-0000-0000-000000000001';
    const client = 'bbbbbbbb-0000-0000-0000-000000000002';

    const code = await tokenCommand({azureCredential: fake.factory})(
      ['aks', '--server-id', AKS_SERVER_ID, '--tenant-id', tenant, '--client-id', client, '--environment', 'AzureUSGovernment'], io);

    expect(code).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({apiVersion: 'client.authentication.k8s.io/v1'});
    expect(fake.built).toEqual([{cloud: 'AzureUSGovernment', tenantId: tenant, clientId: client}]);
  });

  it('fails with one line and exit 1 when no credential works, without a stack or a secret', async () => {
    const fake = fakeFactory(() => Promise.reject(new Error(
      `DefaultAzureCredential failed to retrieve a token from the included credentials.\n` +
      `Attempted credentials:\n\tEnvironmentCredential: AADSTS7000215: Invalid client secret provided (${SECRET}).\n` +
      `\tManagedIdentityCredential: ManagedIdentityCredential authentication unavailable.\n    at getToken (identity.js:1:1)`,
    )));
    const {io, out} = capture({AZURE_CLIENT_SECRET: SECRET});

    const code = await tokenCommand({azureCredential: fake.factory})(['aks', '--server-id', AKS_SERVER_ID], io);

    expect(code).toBe(1);
    expect(out.stdout).toBe('');
    expectOneCleanLine(out.stderr);
    expect(out.stderr).toMatch(new RegExp(`^kube-discovery token: could not get an Entra ID token for ${AKS_SERVER_ID}/\\.default: DefaultAzureCredential failed`));
  });

  it.each([
    [['aks'], /expected --server-id ID .*got none/],
    [['aks', '--server-id', AKS_SERVER_ID, '--environment', 'AzureMars'], /expected --environment to be one of AzurePublicCloud, AzureChinaCloud, AzureUSGovernment, got "AzureMars"/],
    [['aks', '--server-id', AKS_SERVER_ID, '--bogus'], /Unknown option '--bogus'/],
  ])('rejects bad usage %j with exit 2 and never builds a credential', async (argv, message) => {
    const fake = fakeFactory(ok);
    const {io, out} = capture();

    expect(await tokenCommand({azureCredential: fake.factory})(argv, io)).toBe(2);
    expectOneCleanLine(out.stderr);
    expect(out.stderr).toMatch(message);
    expect(fake.built).toEqual([]);
  });
});

// What `kubeconfig` writes for an AKS cluster without Entra ID: no --server-id, so the
// plugin asks Resource Manager for the cluster's user credential (the real SDK client against
// the fake ARM) and hands kubectl the local account's token.
describe('token aks for a local-account cluster', () => {
  const SUB = '00000000-0000-4000-8000-00000000a001';
  let arm: FakeArm;
  let world: ArmWorld;

  beforeAll(async () => {
    world = new ArmWorld();
    world.addSubscription({subscriptionId: SUB});
    world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'local-1'});
    world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'entra-1', aadProfile: {managed: true, enableAzureRBAC: true}, disableLocalAccounts: true});
    world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'locked-1', disableLocalAccounts: true});
    arm = await startFakeArm({world});
  });
  afterAll(() => arm?.close());

  const run = async (name: string, env: Record<string, string> = {}) => {
    const fake = fakeFactory(() => Promise.resolve({token: FAKE_ARM_TOKEN, expiresOnTimestamp: EXPIRES, tokenType: 'Bearer' as const}));
    const {io, out} = capture({KUBE_DISCOVERY_ARM_ENDPOINT: arm.url, ...env});
    const code = await tokenCommand({azureCredential: fake.factory, azureClientOptions: {tlsOptions: {ca: arm.caPem}}, clock: new FakeClock(Date.UTC(2026, 0, 1))})(
      ['aks', '--subscription', SUB, '--resource-group', 'rg-a', '--name', name], io);
    return {code, out, fake};
  };

  it('prints the local account token from listClusterUserCredential', async () => {
    const {code, out, fake} = await run('local-1');

    expect({code, stderr: out.stderr}).toEqual({code: 0, stderr: ''});
    const token = (JSON.parse(out.stdout) as {status: {token: string; expirationTimestamp: string}}).status;
    expect(world.localAccountIdentity(token.token)?.cluster.name).toBe('local-1');
    expect(token.expirationTimestamp).toBe('2026-01-01T00:10:00Z');
    expect(fake.asked.map((a) => a.scopes)).toEqual([['https://management.azure.com/.default']]);
    expect(arm.stats.requests.map((r) => r.operation)).toContain('managedClusters.listClusterUserCredentials');
  });

  it('signs in with Entra ID when the user credential says the cluster uses it', async () => {
    const {code, out, fake} = await run('entra-1');

    expect(code).toBe(0);
    expect(fake.asked.map((a) => a.scopes).at(-1)).toEqual([`${AKS_SERVER_ID}/.default`]);
    expect(JSON.parse(out.stdout)).toMatchObject({status: {token: FAKE_ARM_TOKEN}});
  });

  it('fails with one line naming the cluster when local accounts are disabled', async () => {
    const {code, out} = await run('locked-1');

    expect(code).toBe(1);
    expectOneCleanLine(out.stderr);
    expect(out.stderr).toMatch(/listClusterUserCredential for AKS cluster locked-1 .*disable local accounts/);
  });

  it('rejects a Resource Manager endpoint that is neither https nor loopback http', async () => {
    const {code, out} = await run('local-1', {KUBE_DISCOVERY_ARM_ENDPOINT: 'http://arm.example.com'});

    expect(code).toBe(2);
    expect(out.stderr).toMatch(/expected --resource-manager-endpoint .* got "http:\/\/arm.example.com"/);
  });
});
