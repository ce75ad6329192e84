/**
 * Credentials are built once in the runtime and shared: discovery lists with the role it assumed
 * and the probes sign their EKS tokens with the same credentials (one AssumeRole, not one per
 * consumer); the AKS token source lives in the runtime too, on the identity discovery signs in with.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AzureIdentities} from '../../src/credentials/azure-identities.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {openRuntime} from '../../src/service/runtime.ts';
import {startService} from '../../src/service/service.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';
import {base64, eksAuthenticator, type EksAuthn} from '../probe/eks-fixtures.ts';

const MGMT = '111111111111';
const PROD = '222222222222';
const ROLE = `arn:aws:iam::${PROD}:role/kube-discovery`;
const KEY = {accessKeyId: 'AKIASHAREDCREDS00001', secretAccessKey: 'shared-credentials-secret'};

describe('AWS credentials shared by discovery and probes', () => {
  let aws: AwsServiceWorld;
  let kube: FakeKubeApi;
  let authn: EksAuthn;

  beforeAll(async () => {
    aws = await startAwsServiceWorld({key: KEY, account: MGMT, populate: (world) => world.addAccount(PROD, {roles: [{arn: ROLE, externalId: 'ext-1', trust: [MGMT]}]})});
    authn = eksAuthenticator({world: aws.world, clusters: [{account: PROD, region: 'us-east-1', name: 'prod'}], stsUrl: aws.fake.url});
    kube = await startFakeKubeApi({authenticate: authn.authenticate});
    aws.world.addCluster(PROD, 'us-east-1', {name: 'prod', endpoint: kube.url, caData: base64(kube.caPem)});
  });

  afterAll(async () => {
    await kube.close();
    await aws.close();
  });

  it('assumes the matcher role once for listing and probing', async () => {
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: shared
  poll_interval: 1h
  aws: [{types: [eks], regions: [us-east-1], assume_role_arn: "${ROLE}", external_id: ext-1}]
storage: {type: memory}
http: {listen_addr: "127.0.0.1:0"}
`,
      'shared.yaml',
    );
    const svc = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger});
    try {
      const report = await svc.nextCycle();
      expect(report.result).toBe('success');
      // The probe reached the cluster with a valid token signed by the assumed role.
      expect(authn.accepted.map((t) => t.principalArn)).toEqual([expect.stringContaining(`:${PROD}:`)]);
      expect(aws.fake.stats.count({operation: 'AssumeRole'})).toBe(1);
    } finally {
      await svc.stop({deregister: false});
    }
  });
});

describe('Azure credentials of the runtime', () => {
  const config = (azure: boolean) =>
    parseConfig(
      `version: v1
discovery_service:
  discovery_group: shared-azure
${azure ? '  azure: [{types: [aks], subscriptions: ["00000000-0000-0000-0000-000000000001"]}]\n' : '  aws: [{types: [eks], regions: [us-east-1]}]\n'}storage: {type: memory}
`,
      'azure.yaml',
    );

  it('mints AKS tokens for probes with the credential discovery signs in with, counted once per mint, across a reconfiguration', async () => {
    const credential = fakeTokenCredential('entra-token');
    const minted: string[] = [];
    const runtime = await openRuntime(config(true), captureIo({}).io, {
      clock: systemClock,
      logTo: 'stderr',
      logger: silentLogger,
      backend: new MemoryBackend({clock: systemClock}),
      discovery: {azure: {credential}},
      events: {tokenMinted: (cloud) => minted.push(cloud)},
    });
    try {
      const aks = runtime.credentials.aks;
      if (!aks) throw new Error('expected an AKS token source');
      const access = {kind: 'aks', subscription_id: '00000000-0000-0000-0000-000000000001', resource_group: 'rg', resource_name: 'c1', server_id: 'server-app'} as const;
      expect(await aks(access)).toBe('entra-token');
      runtime.reconfigure(config(true));
      // Same runtime credentials after DiscoveryConfig changes: the cached token is reused.
      expect(runtime.credentials.aks).toBe(aks);
      expect(await aks(access)).toBe('entra-token');
      expect(credential.scopesRequested).toEqual([['server-app/.default']]);
      expect(minted).toEqual(['Azure']);
      await expect(aks({kind: 'eks', cluster_name: 'x', region: 'us-east-1'})).rejects.toThrow('expected AKS access, got eks');
    } finally {
      await runtime.close();
    }
  });

  it('has no AKS token source without azure matchers', async () => {
    const runtime = await openRuntime(config(false), captureIo({}).io, {clock: systemClock, logTo: 'stderr', logger: silentLogger, backend: new MemoryBackend({clock: systemClock})});
    try {
      expect(runtime.credentials.aks).toBeUndefined();
    } finally {
      await runtime.close();
    }
  });

  it('keeps one bounded credential per identity, or the injected one for all', async () => {
    const made: unknown[] = [];
    const identities = new AzureIdentities({credentialFactory: (identity) => (made.push(identity), fakeTokenCredential()), timeoutMs: 1_000});
    expect(identities.for({})).toBe(identities.for({}));
    expect(identities.for({clientId: 'a'})).not.toBe(identities.for({}));
    expect(made).toEqual([{}, {clientId: 'a'}]);
    const injected = fakeTokenCredential();
    expect(new AzureIdentities({credential: injected, timeoutMs: 1_000}).for({clientId: 'b'})).toBe(injected);
  });
});
