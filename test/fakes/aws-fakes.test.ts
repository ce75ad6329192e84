/**
 * The AWS fakes, driven by the real SDK clients: what @aws-sdk/client-eks and client-sts send
 * must be authenticated, answered and spoiled exactly as the discovery code will see it.
 */
import {
  CreateAccessEntryCommand,
  DescribeAccessEntryCommand,
  DescribeClusterCommand,
  EKSClient,
  ListAccessEntriesCommand,
  ListClustersCommand,
  paginateListAccessEntries,
  paginateListClusters,
} from '@aws-sdk/client-eks';
import {AssumeRoleCommand, GetCallerIdentityCommand, STSClient} from '@aws-sdk/client-sts';
import {afterEach, beforeEach, describe, expect, it, vi} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';
import {failRegion, FakeAwsWorld, startFakeAws, throttleFirst, type FakeAws} from './aws-fakes.ts';

const MGMT = '111111111111';
const PROD = '222222222222';
const KEY = {accessKeyId: 'AKIAMGMTEXAMPLE00001', secretAccessKey: 'mgmt-secret-key/+example'};
const ROLE_ARN = `arn:aws:iam::${PROD}:role/kube-discovery`;
const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nTUlJQ0NB\n-----END CERTIFICATE-----\n').toString('base64');

let clock: FakeClock;
let world: FakeAwsWorld;
let fake: FakeAws;

beforeEach(async () => {
  clock = new FakeClock(Date.now());
  world = new FakeAwsWorld({clock});
  world.addAccount(MGMT, {accessKeys: [KEY]});
  world.addAccount(PROD, {roles: [{arn: ROLE_ARN, externalId: 'ext-123', trust: [MGMT]}]});
  fake = await startFakeAws({world});
});

afterEach(async () => {
  await fake.close();
});

type Creds = {accessKeyId: string; secretAccessKey: string; sessionToken?: string};

function eks(region = 'us-east-1', credentials: Creds = KEY, maxAttempts = 3): EKSClient {
  return new EKSClient({region, endpoint: fake.url, credentials, maxAttempts});
}

function sts(credentials: Creds = KEY): STSClient {
  return new STSClient({region: 'us-east-1', endpoint: fake.url, credentials});
}

async function listAll(client: EKSClient): Promise<string[]> {
  const names: string[] = [];
  for await (const page of paginateListClusters({client}, {})) names.push(...(page.clusters ?? []));
  return names;
}

async function rejection(p: Promise<unknown>): Promise<{name: string; $metadata: {httpStatusCode?: number; requestId?: string}}> {
  try {
    await p;
  } catch (e) {
    return e as {name: string; $metadata: {httpStatusCode?: number; requestId?: string}};
  }
  throw new Error('expected the call to fail, it succeeded');
}

async function assumeProdRole(): Promise<Creds> {
  const out = await sts().send(new AssumeRoleCommand({RoleArn: ROLE_ARN, RoleSessionName: 'discovery', ExternalId: 'ext-123'}));
  const c = out.Credentials;
  if (!c?.AccessKeyId || !c.SecretAccessKey || !c.SessionToken) throw new Error('AssumeRole returned no credentials');
  return {accessKeyId: c.AccessKeyId, secretAccessKey: c.SecretAccessKey, sessionToken: c.SessionToken};
}

describe('EKS', () => {
  it('pages ListClusters in pages of two, and the paginator reads every page', async () => {
    for (const name of ['a', 'b', 'c', 'd', 'e']) world.addCluster(MGMT, 'us-east-1', {name});
    expect(await listAll(eks())).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(fake.stats.count({operation: 'ListClusters', status: 200})).toBe(3);
  });

  it('rejects a nextToken it did not issue for this region', async () => {
    for (const name of ['a', 'b', 'c']) world.addCluster(MGMT, 'us-east-1', {name});
    const first = await eks().send(new ListClustersCommand({}));
    expect(first.nextToken).toBeDefined();
    const err = await rejection(eks('eu-west-1').send(new ListClustersCommand({nextToken: first.nextToken})));
    expect(err.name).toBe('InvalidParameterException');
    expect(err.$metadata.httpStatusCode).toBe(400);
  });

  it('describes a cluster in the shape the SDK parses', async () => {
    world.addCluster(MGMT, 'us-east-1', {name: 'prod', tags: {env: 'prod'}, endpoint: 'https://127.0.0.1:6443', caData: CA, createdAt: 1_700_000_000_000});
    const {cluster} = await eks().send(new DescribeClusterCommand({name: 'prod'}));
    expect(cluster).toMatchObject({
      name: 'prod',
      arn: `arn:aws:eks:us-east-1:${MGMT}:cluster/prod`,
      status: 'ACTIVE',
      endpoint: 'https://127.0.0.1:6443',
      certificateAuthority: {data: CA},
      tags: {env: 'prod'},
      accessConfig: {authenticationMode: 'API_AND_CONFIG_MAP'},
      identity: {oidc: {issuer: expect.stringMatching(/^https:\/\/oidc\.eks\.us-east-1\.amazonaws\.com\/id\/[0-9A-F]{32}$/)}},
    });
    expect(cluster?.createdAt).toEqual(new Date(1_700_000_000_000));

    const missing = await rejection(eks().send(new DescribeClusterCommand({name: 'nope'})));
    expect(missing.name).toBe('ResourceNotFoundException');
    expect(missing.$metadata.httpStatusCode).toBe(404);
    expect(missing.$metadata.requestId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("answers each region from the credential scope's region, concurrently", async () => {
    world.addCluster(MGMT, 'us-east-1', {name: 'east'});
    world.addCluster(MGMT, 'eu-west-1', {name: 'west'});
    fake.latencyMs = {'*': 50};
    const pending = Promise.all(['us-east-1', 'eu-west-1', 'ap-south-1'].map((r) => listAll(eks(r))));
    // Latency runs on the fake clock: all three are held in flight until time moves.
    await vi.waitFor(() => expect(fake.stats.inFlight()).toBe(3), ROUND_TRIP);
    await clock.advance(50);
    expect(await pending).toEqual([['east'], ['west'], []]);
    expect(fake.stats.overlapped({region: 'us-east-1'}, {region: 'eu-west-1'})).toBe(true);
    expect(fake.stats.maxInFlight()).toBe(3);
  });

  it('surfaces ThrottlingException, which the SDK retries', async () => {
    world.addCluster(MGMT, 'us-east-1', {name: 'a'});
    fake.fault = throttleFirst(1);
    expect(await listAll(eks())).toEqual(['a']);
    expect(fake.stats.find({operation: 'ListClusters'}).map((c) => c.status)).toEqual([429, 200]);

    fake.fault = throttleFirst(1);
    const err = await rejection(eks('us-east-1', KEY, 1).send(new ListClustersCommand({})));
    expect(err.name).toBe('ThrottlingException');
    expect(err.$metadata.httpStatusCode).toBe(429);
  });

  it('fails one region with AccessDeniedException or ServiceUnavailableException', async () => {
    fake.fault = failRegion('eu-west-1', 'AccessDeniedException');
    const denied = await rejection(eks('eu-west-1').send(new ListClustersCommand({})));
    expect(denied.name).toBe('AccessDeniedException');
    expect(denied.$metadata.httpStatusCode).toBe(403);
    await expect(eks('us-east-1').send(new ListClustersCommand({}))).resolves.toBeDefined();

    fake.fault = failRegion('eu-west-1', 'ServiceUnavailableException');
    const down = await rejection(eks('eu-west-1', KEY, 1).send(new ListClustersCommand({})));
    expect(down.name).toBe('ServiceUnavailableException');
    expect(down.$metadata.httpStatusCode).toBe(503);
  });

  it('answers a region not enabled for the account like AWS does', async () => {
    fake.fault = (ctx) => (ctx.region === 'ap-east-1' ? {optInRequired: true} : undefined);
    const err = await rejection(eks('ap-east-1').send(new ListClustersCommand({})));
    expect(err.name).toBe('UnrecognizedClientException');
    expect(err.$metadata.httpStatusCode).toBe(403);
  });

  it('serves malformed answers and requests that never get one', async () => {
    world.addCluster(MGMT, 'us-east-1', {name: 'a'});
    fake.fault = () => ({malformed: 'missing-fields'});
    const {cluster} = await eks().send(new DescribeClusterCommand({name: 'a'}));
    expect(cluster).toEqual({name: 'a'});
    fake.fault = () => ({malformed: true});
    await expect(eks('us-east-1', KEY, 1).send(new DescribeClusterCommand({name: 'a'}))).rejects.toThrow();

    fake.fault = () => ({hang: true});
    const abort = new AbortController();
    const hanging = eks('us-east-1', KEY, 1).send(new ListClustersCommand({}), {abortSignal: abort.signal});
    await vi.waitFor(() => expect(fake.stats.inFlight({operation: 'ListClusters'})).toBe(1), ROUND_TRIP);
    abort.abort();
    await expect(hanging).rejects.toThrow();
    await vi.waitFor(() => expect(fake.stats.inFlight()).toBe(0), ROUND_TRIP);
    expect(fake.stats.find({operation: 'ListClusters'}).at(-1)?.status).toBe(0);
  });

  it('verifies signatures: wrong secret, unknown key and expired session are refused', async () => {
    const badSig = await rejection(eks('us-east-1', {...KEY, secretAccessKey: 'not-the-secret'}).send(new ListClustersCommand({})));
    expect(badSig.name).toBe('InvalidSignatureException');
    expect(badSig.$metadata.httpStatusCode).toBe(403);
    const unknown = await rejection(eks('us-east-1', {accessKeyId: 'AKIAUNKNOWN000000000', secretAccessKey: 'x'}).send(new ListClustersCommand({})));
    expect(unknown.name).toBe('UnrecognizedClientException');

    const session = await assumeProdRole();
    await expect(eks('us-east-1', session).send(new ListClustersCommand({}))).resolves.toBeDefined();
    await clock.advance(3600_000);
    const expired = await rejection(eks('us-east-1', session).send(new ListClustersCommand({})));
    expect(expired.name).toBe('ExpiredTokenException');
    expect(fake.stats.count({status: 403})).toBe(3);
  });

  it('creates, describes and lists access entries', async () => {
    world.addCluster(MGMT, 'us-east-1', {name: 'prod'});
    const principals = ['a', 'b', 'c'].map((n) => `arn:aws:iam::${MGMT}:role/path/${n}`);
    for (const principalArn of principals) {
      const out = await eks().send(new CreateAccessEntryCommand({clusterName: 'prod', principalArn, kubernetesGroups: ['discovery'], type: 'STANDARD'}));
      expect(out.accessEntry).toMatchObject({clusterName: 'prod', principalArn, kubernetesGroups: ['discovery'], type: 'STANDARD'});
    }
    const dup = await rejection(eks().send(new CreateAccessEntryCommand({clusterName: 'prod', principalArn: principals[0]})));
    expect(dup.name).toBe('ResourceInUseException');
    expect(dup.$metadata.httpStatusCode).toBe(409);

    const {accessEntry} = await eks().send(new DescribeAccessEntryCommand({clusterName: 'prod', principalArn: principals[1]}));
    expect(accessEntry?.username).toBe(`arn:aws:sts::${MGMT}:assumed-role/b/{{SessionName}}`);
    const listed: string[] = [];
    for await (const p of paginateListAccessEntries({client: eks()}, {clusterName: 'prod'})) listed.push(...(p.accessEntries ?? []));
    expect(listed).toEqual(principals);
    expect(fake.stats.count({operation: 'ListAccessEntries'})).toBe(2);

    world.addCluster(MGMT, 'us-east-1', {name: 'legacy', authenticationMode: 'CONFIG_MAP'});
    const legacy = await rejection(eks().send(new CreateAccessEntryCommand({clusterName: 'legacy', principalArn: principals[0]})));
    expect(legacy.name).toBe('InvalidRequestException');
    const none = await rejection(eks().send(new ListAccessEntriesCommand({clusterName: 'ghost'})));
    expect(none.name).toBe('ResourceNotFoundException');
  });

  it('is reached through AWS_ENDPOINT_URL_EKS', async () => {
    world.addCluster(MGMT, 'us-west-2', {name: 'via-env'});
    const saved = process.env['AWS_ENDPOINT_URL_EKS'];
    process.env['AWS_ENDPOINT_URL_EKS'] = fake.env.AWS_ENDPOINT_URL_EKS;
    try {
      const client = new EKSClient({region: 'us-west-2', credentials: KEY});
      expect((await client.send(new ListClustersCommand({}))).clusters).toEqual(['via-env']);
    } finally {
      if (saved === undefined) delete process.env['AWS_ENDPOINT_URL_EKS'];
      else process.env['AWS_ENDPOINT_URL_EKS'] = saved;
    }
  });
});

describe('STS', () => {
  it('tells a static key who it is', async () => {
    const me = await sts().send(new GetCallerIdentityCommand({}));
    expect(me).toMatchObject({Account: MGMT, Arn: `arn:aws:iam::${MGMT}:user/fake-user`});
    expect(me.UserId).toMatch(/^AIDA/);
  });

  it('assumes a trusted role with the right external id, and the session belongs to the role account', async () => {
    world.addCluster(PROD, 'us-east-1', {name: 'prod-cluster'});
    const out = await sts().send(new AssumeRoleCommand({RoleArn: ROLE_ARN, RoleSessionName: 'discovery', ExternalId: 'ext-123'}));
    expect(out.Credentials?.Expiration).toEqual(new Date(clock.now() + 3600_000 - (clock.now() % 1000)));
    expect(out.AssumedRoleUser?.Arn).toBe(`arn:aws:sts::${PROD}:assumed-role/kube-discovery/discovery`);

    const session = await assumeProdRole();
    expect(await sts(session).send(new GetCallerIdentityCommand({}))).toMatchObject({
      Account: PROD,
      Arn: `arn:aws:sts::${PROD}:assumed-role/kube-discovery/discovery`,
    });
    expect(await listAll(eks('us-east-1', session))).toEqual(['prod-cluster']);
  });

  it('denies AssumeRole without the external id, with a wrong one, or from an untrusted account', async () => {
    world.addAccount('333333333333', {accessKeys: [{accessKeyId: 'AKIAOTHER00000000001', secretAccessKey: 'other'}]});
    const attempts = [
      sts().send(new AssumeRoleCommand({RoleArn: ROLE_ARN, RoleSessionName: 's'.repeat(2)})),
      sts().send(new AssumeRoleCommand({RoleArn: ROLE_ARN, RoleSessionName: 'ss', ExternalId: 'wrong'})),
      sts({accessKeyId: 'AKIAOTHER00000000001', secretAccessKey: 'other'}).send(
        new AssumeRoleCommand({RoleArn: ROLE_ARN, RoleSessionName: 'ss', ExternalId: 'ext-123'}),
      ),
    ];
    for (const attempt of attempts) {
      const err = await rejection(attempt);
      expect(err.name).toBe('AccessDenied');
      expect(err.$metadata.httpStatusCode).toBe(403);
    }
    const open = 'arn:aws:iam::222222222222:role/open';
    world.addRole({arn: open, trust: [MGMT]});
    await expect(sts().send(new AssumeRoleCommand({RoleArn: open, RoleSessionName: 'ss'}))).resolves.toBeDefined();
  });

  it('refuses a bad STS signature and is reached through AWS_ENDPOINT_URL_STS', async () => {
    const err = await rejection(sts({...KEY, secretAccessKey: 'wrong'}).send(new GetCallerIdentityCommand({})));
    expect(err.name).toBe('SignatureDoesNotMatch');
    const saved = process.env['AWS_ENDPOINT_URL_STS'];
    process.env['AWS_ENDPOINT_URL_STS'] = fake.env.AWS_ENDPOINT_URL_STS;
    try {
      const me = await new STSClient({region: 'eu-central-1', credentials: KEY}).send(new GetCallerIdentityCommand({}));
      expect(me.Account).toBe(MGMT);
      expect(fake.stats.find({service: 'sts', operation: 'GetCallerIdentity'}).at(-1)?.region).toBe('eu-central-1');
    } finally {
      if (saved === undefined) delete process.env['AWS_ENDPOINT_URL_STS'];
      else process.env['AWS_ENDPOINT_URL_STS'] = saved;
    }
  });
});
