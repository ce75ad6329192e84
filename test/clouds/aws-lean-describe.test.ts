/**
 * EKS `DescribeCluster` on the short path (src/clouds/aws/lean-read.ts) gives exactly what the
 * SDK gives for the same answer: the same output (timestamps as Date, unknown members dropped,
 * nulls left out) for plain answers, and the SDK's own output or error for everything else
 * (odd values, malformed bodies, error statuses). Two real EKS clients, one plain and one wrapped
 * as the service wraps it, read the same bytes from a loopback server, from the wire-level AWS
 * fake, and from moto.
 */
import {createServer, type Server} from 'node:http';
import {CreateClusterCommand, DescribeClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import {NormalizedSchema} from '@smithy/core/schema';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {describeClusterOperation, leanReads} from '../../src/clouds/aws/lean-read.ts';
import {leanSdkClient} from '../../src/clouds/aws/lean-sdk.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {describeWithMoto, startMoto, type Moto} from '../helpers/moto.ts';

const KEY = {accessKeyId: 'AKIALEANDESCRIBE0001', secretAccessKey: 'lean-describe-secret'};
const REGION = 'eu-west-1';

/** A plain SDK client and the service's wrapped one, on the same endpoint; `sdkCalls` counts the wrapped client's serialised calls. */
function clients(endpoint: string, credentials = KEY): {sdk: EKSClient; lean: Pick<EKSClient, 'send'>; sdkCalls: () => number; destroy(): void} {
  const options = {region: REGION, endpoint, credentials, maxAttempts: 1};
  const sdk = new EKSClient(options);
  const wrapped = leanSdkClient(new EKSClient(options));
  let serialized = 0;
  wrapped.middlewareStack.add(
    (next) => (args) => {
      serialized++;
      return next(args);
    },
    {step: 'serialize', name: 'testSerializeCounter'},
  );
  const lean = leanReads(wrapped, [describeClusterOperation(DescribeClusterCommand)]);
  return {sdk, lean, sdkCalls: () => serialized, destroy: () => (sdk.destroy(), wrapped.destroy())};
}

/** The fake and moto give every answer its own request id: compared as "an id"; this file's fixed ones (`req-…`) as themselves. */
const requestIdOf = (id: string | undefined): string | undefined => (id === undefined || id.startsWith('req-') ? id : 'a fresh id');

/** What a caller sees of a call: the output without the per-attempt metadata, or the error's visible parts. */
async function outcome(call: Promise<unknown>): Promise<unknown> {
  try {
    const {$metadata, ...output} = (await call) as {$metadata: {httpStatusCode?: number; requestId?: string}};
    return {output, status: $metadata.httpStatusCode, requestId: requestIdOf($metadata.requestId)};
  } catch (error) {
    const e = error as Error & {$metadata?: {httpStatusCode?: number; requestId?: string}; $fault?: unknown};
    const fields = Object.fromEntries(Object.entries(e).filter(([k]) => k !== '$metadata' && k !== '$response'));
    return {error: e.constructor.name, name: e.name, message: e.message, fault: e.$fault, status: e.$metadata?.httpStatusCode, requestId: requestIdOf(e.$metadata?.requestId), fields};
  }
}

/** A value for every member of a shape, from the SDK's own schema: the answer with every optional member present. */
function sample(ns: NormalizedSchema, depth = 0): unknown {
  if (ns.isStructSchema()) {
    const out: Record<string, unknown> = {};
    if (depth > 8) return out;
    for (const [name, member] of ns.structIterator()) out[name] = sample(member, depth + 1);
    return out;
  }
  if (ns.isListSchema()) return [sample(ns.getValueSchema(), depth + 1), sample(ns.getValueSchema(), depth + 1)];
  if (ns.isMapSchema()) return {first: sample(ns.getValueSchema(), depth + 1), second: sample(ns.getValueSchema(), depth + 1)};
  if (ns.isTimestampSchema()) return 1_700_000_000.25 + depth;
  if (ns.isBooleanSchema()) return depth % 2 === 0;
  if (ns.isNumericSchema()) return 7 + depth;
  return `value-${depth}`;
}

const FULL_CLUSTER = sample(NormalizedSchema.of((new DescribeClusterCommand({name: 'x'}) as unknown as {schema: unknown[]}).schema[5] as never)) as {cluster: Record<string, unknown>};
const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
const NORMAL = {
  name: 'normal',
  arn: `arn:aws:eks:${REGION}:123456789012:cluster/normal`,
  createdAt: 1_700_000_000.123,
  version: '1.31',
  endpoint: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com',
  roleArn: 'arn:aws:iam::123456789012:role/eks',
  resourcesVpcConfig: {subnetIds: ['subnet-1', 'subnet-2'], securityGroupIds: [], vpcId: 'vpc-1', endpointPublicAccess: true, endpointPrivateAccess: false, publicAccessCidrs: ['0.0.0.0/0']},
  kubernetesNetworkConfig: {serviceIpv4Cidr: '10.100.0.0/16', ipFamily: 'ipv4'},
  logging: {clusterLogging: [{types: ['api', 'audit'], enabled: true}]},
  identity: {oidc: {issuer: 'https://oidc.eks.eu-west-1.amazonaws.com/id/ABC'}},
  status: 'ACTIVE',
  certificateAuthority: {data: CA},
  platformVersion: 'eks.9',
  tags: {env: 'prod', team: 'platform'},
  health: {issues: []},
  accessConfig: {authenticationMode: 'API_AND_CONFIG_MAP', bootstrapClusterCreatorAdminPermissions: true},
  upgradePolicy: {supportType: 'EXTENDED'},
};
const json = (v: unknown): string => JSON.stringify(v);
const plain = (cluster: unknown): string => json({cluster});

interface Answer {
  readonly status?: number;
  readonly body: string;
  readonly headers?: Record<string, string>;
}
/** Answers the short path reads itself. */
const PLAIN_ANSWERS: Record<string, Answer> = {
  normal: {body: plain(NORMAL), headers: {'x-amzn-requestid': 'req-normal'}},
  'every-member': {body: json(FULL_CLUSTER)},
  'no-member': {body: plain({})},
  'name-only': {body: plain({name: 'name-only'})},
  'no-cluster': {body: '{}'},
  'null-cluster': {body: '{"cluster":null}'},
  creating: {body: plain({...NORMAL, name: 'creating', status: 'CREATING', endpoint: undefined, certificateAuthority: {}})},
  'nulls-everywhere': {body: plain({name: 'nulls-everywhere', arn: null, createdAt: null, tags: null, endpoint: null, resourcesVpcConfig: {subnetIds: null, vpcId: null}, certificateAuthority: {data: null}})},
  'null-tag-value': {body: plain({...NORMAL, tags: {env: null, team: 'x'}})},
  'unknown-members': {body: plain({...NORMAL, brandNew: {deep: [1, 2]}, resourcesVpcConfig: {...NORMAL.resourcesVpcConfig, future: true}, accessConfig: {authenticationMode: 'API', later: 'x'}})},
  'odd-types': {body: plain({name: 42, status: ['ACTIVE'], version: {}, endpoint: false, tags: {a: 1, b: {c: 'd'}}, certificateAuthority: {data: 7}, deletionProtection: 'yes'})},
  'integer-epoch': {body: plain({...NORMAL, createdAt: 1_700_000_000})},
  'negative-epoch': {body: plain({...NORMAL, createdAt: -5.5})},
  'health-issues': {body: plain({...NORMAL, health: {issues: [{code: 'IamRoleNotFound', message: 'gone', resourceIds: ['r1']}, {code: 'Other'}]}})},
  'encryption-list': {body: plain({...NORMAL, encryptionConfig: [{resources: ['secrets'], provider: {keyArn: 'arn:aws:kms:eu-west-1:123456789012:key/k'}}]})},
  'connector-expiry': {body: plain({...NORMAL, connectorConfig: {activationId: 'a', activationExpiry: 1_800_000_000, provider: 'OTHER'}})},
  'proto-tag': {body: '{"cluster":{"name":"proto-tag","tags":{"__proto__":"x","constructor":"y"}}}'},
  'unicode': {body: plain({...NORMAL, tags: {'ключ': 'значение ✓', emoji: '🚀'}})},
};
/** Answers the short path hands to the SDK: the SDK's output or error is the one both give. */
const SDK_ANSWERS: Record<string, Answer> = {
  'string-epoch': {body: plain({...NORMAL, createdAt: '1700000000.5'})},
  'bad-epoch': {body: plain({...NORMAL, createdAt: true})},
  'nan-epoch': {body: plain({...NORMAL, createdAt: 'NaN'})},
  'object-epoch': {body: plain({...NORMAL, createdAt: {tag: 1, value: 5}})},
  'typed-record': {body: plain({...NORMAL, __type: 'Cluster', extra: 'copied'})},
  'cluster-string': {body: plain('normal')},
  'cluster-array': {body: plain([NORMAL])},
  'tags-array': {body: plain({...NORMAL, tags: ['env']})},
  'subnets-object': {body: plain({...NORMAL, resourcesVpcConfig: {subnetIds: {a: 1}}})},
  'health-null-issue': {body: plain({...NORMAL, health: {issues: [null]}})},
  'body-array': {body: '[]'},
  'body-string': {body: '"cluster"'},
  'body-number': {body: '42'},
  'body-empty': {body: ''},
  'body-truncated': {body: plain(NORMAL).slice(0, 80)},
  'body-html': {body: '<html>gateway</html>', headers: {'content-type': 'text/html'}},
  'not-found': {status: 404, body: json({message: 'No cluster found for name: not-found.'}), headers: {'x-amzn-errortype': 'ResourceNotFoundException', 'x-amzn-requestid': 'req-404'}},
  'access-denied': {status: 403, body: json({Message: 'User is not authorized'}), headers: {'x-amzn-errortype': 'AccessDeniedException'}},
  'invalid-parameter': {status: 400, body: json({message: 'bad', clusterName: 'invalid-parameter'}), headers: {'x-amzn-errortype': 'InvalidParameterException:http://internal.amazon.com/coral/'}},
  throttled: {status: 429, body: json({message: 'Rate exceeded'}), headers: {'x-amzn-errortype': 'ThrottlingException'}},
  'server-error': {status: 500, body: json({message: 'oops'}), headers: {'x-amzn-errortype': 'ServerException'}},
  'unavailable-html': {status: 503, body: '<html>down</html>'},
};
/** 2xx answers naming an error type at the top of the body, as JSON protocols name errors: the service's client refuses what the bare SDK reads as a success. */
/** 2xx answers other than the 200 EKS answers DescribeCluster with: the short path refuses them, the bare SDK reads them. */
const PARTIAL_ANSWERS: Record<string, Answer> = {
  'status-204': {status: 204, body: ''},
  'status-203-deleting': {status: 203, body: json({cluster: {...NORMAL, status: 'DELETING'}})},
  'status-206': {status: 206, body: json({cluster: NORMAL})},
};

const TYPED_ANSWERS: Record<string, Answer> = {
  'typed-body': {body: json({__type: 'x', cluster: NORMAL})},
  'error-in-200': {body: json({__type: 'ResourceNotFoundException', message: 'in a 200'})},
  'escaped-type': {body: '{"\\u005f_type":"ResourceNotFoundException","cluster":' + json(NORMAL) + '}'},
};

describe('DescribeCluster on the short path reads exactly what the SDK reads', () => {
  let server: Server;
  let url: string;
  let pair: ReturnType<typeof clients>;

  beforeAll(async () => {
    server = createServer((req, res) => {
      const name = decodeURIComponent((req.url ?? '').split('?')[0]?.split('/').pop() ?? '');
      const answer = PLAIN_ANSWERS[name] ?? SDK_ANSWERS[name] ?? PARTIAL_ANSWERS[name] ?? TYPED_ANSWERS[name] ?? {body: plain({...NORMAL, name})};
      res.writeHead(answer.status ?? 200, {'content-type': 'application/json', ...answer.headers});
      res.end(answer.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as {port: number}).port}`;
    pair = clients(url);
    // The SDK's first call shows the short path its request.
    await pair.lean.send(new DescribeClusterCommand({name: 'first'}));
  });

  afterAll(async () => {
    pair.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('the full schema sample reaches every member of the SDK model (a guard for the test itself)', () => {
    expect(Object.keys(FULL_CLUSTER.cluster).length).toBeGreaterThan(25);
    expect(FULL_CLUSTER.cluster).toHaveProperty('createdAt');
    expect(FULL_CLUSTER.cluster).toHaveProperty('connectorConfig.activationExpiry');
  });

  it.each(Object.keys(PLAIN_ANSWERS))('%s: same output, read without the SDK deserialiser', async (name) => {
    const before = pair.sdkCalls();
    const short = await outcome(pair.lean.send(new DescribeClusterCommand({name})));
    expect(pair.sdkCalls()).toBe(before);
    expect(short).toStrictEqual(await outcome(pair.sdk.send(new DescribeClusterCommand({name}))));
    expect(short).toHaveProperty('status', 200);
  });

  it.each(Object.keys(SDK_ANSWERS))('%s: the SDK decides, the same output or error', async (name) => {
    expect(await outcome(pair.lean.send(new DescribeClusterCommand({name})))).toStrictEqual(await outcome(pair.sdk.send(new DescribeClusterCommand({name}))));
  });

  it.each(Object.keys(PARTIAL_ANSWERS))('%s: refused as not a whole answer, where the bare SDK reads a cluster or nothing', async (name) => {
    const status = PARTIAL_ANSWERS[name]?.status;
    expect(await outcome(pair.lean.send(new DescribeClusterCommand({name})))).toMatchObject({name: 'InvalidResponse', status, message: expect.stringContaining('not a whole answer') as unknown});
    expect(await outcome(pair.sdk.send(new DescribeClusterCommand({name})))).toMatchObject({status, output: expect.any(Object) as unknown});
  });

  it.each(Object.keys(TYPED_ANSWERS))('%s: refused as malformed, where the bare SDK reads a cluster or nothing', async (name) => {
    expect(await outcome(pair.lean.send(new DescribeClusterCommand({name})))).toMatchObject({name: 'InvalidResponse', status: 200, message: expect.stringContaining('names the error type') as unknown});
    expect(await outcome(pair.sdk.send(new DescribeClusterCommand({name})))).toMatchObject({status: 200, output: expect.any(Object) as unknown});
  });

  it('dates are Dates, as the SDK gives them', async () => {
    const out = (await pair.lean.send(new DescribeClusterCommand({name: 'normal'}))) as {cluster: {createdAt: unknown; tags: unknown}};
    expect(out.cluster.createdAt).toBeInstanceOf(Date);
    expect((out.cluster.createdAt as Date).getTime()).toBe(1_700_000_000_123);
    expect(out.cluster.tags).toEqual({env: 'prod', team: 'platform'});
  });

  it('a name that would need escaping in the path, or another input member, goes the SDK way', async () => {
    for (const input of [{name: 'a b'}, {name: 'dotted.name'}, {name: '-leading'}, {name: 'normal', extra: 1} as never]) {
      const before = pair.sdkCalls();
      expect(await outcome(pair.lean.send(new DescribeClusterCommand(input)))).toStrictEqual(await outcome(pair.sdk.send(new DescribeClusterCommand(input))));
      expect(pair.sdkCalls()).toBe(before + 1);
    }
  });

  it('calls started together before the first answer take the short path after the first one', async () => {
    const fresh = clients(url);
    try {
      const names = Array.from({length: 20}, (_, i) => `burst-${i}`);
      const [short, sdk] = await Promise.all([
        Promise.all(names.map((name) => outcome(fresh.lean.send(new DescribeClusterCommand({name}))))),
        Promise.all(names.map((name) => outcome(fresh.sdk.send(new DescribeClusterCommand({name}))))),
      ]);
      expect(short).toStrictEqual(sdk);
      expect(fresh.sdkCalls()).toBe(1);
    } finally {
      fresh.destroy();
    }
  });
});

describe('DescribeCluster on the short path against the wire-level AWS fake', () => {
  let fake: FakeAws;
  let pair: ReturnType<typeof clients>;
  const ACCOUNT = '123456789012';

  beforeAll(async () => {
    const world = new FakeAwsWorld();
    world.addAccount(ACCOUNT, {accessKeys: [KEY]});
    world.addCluster(ACCOUNT, REGION, {name: 'active', tags: {env: 'prod', 'team/name': 'a b'}});
    world.addCluster(ACCOUNT, REGION, {name: 'creating', status: 'CREATING'});
    world.addCluster(ACCOUNT, REGION, {name: 'untagged'});
    world.addCluster(ACCOUNT, REGION, {name: 'updating', status: 'UPDATING', authenticationMode: 'CONFIG_MAP'});
    fake = await startFakeAws({world});
    pair = clients(fake.url);
    await pair.lean.send(new DescribeClusterCommand({name: 'active'}));
  });

  afterAll(async () => {
    pair.destroy();
    await fake.close();
  });

  it.each(['active', 'creating', 'untagged', 'updating'])('%s: the same cluster as the SDK reads, on the short path', async (name) => {
    const before = pair.sdkCalls();
    const short = await outcome(pair.lean.send(new DescribeClusterCommand({name})));
    expect(pair.sdkCalls()).toBe(before);
    expect(short).toStrictEqual(await outcome(pair.sdk.send(new DescribeClusterCommand({name}))));
    expect(short).toMatchObject({output: {cluster: {name}}});
  });

  it('a cluster that does not exist: the same ResourceNotFoundException', async () => {
    const short = await outcome(pair.lean.send(new DescribeClusterCommand({name: 'missing'})));
    expect(short).toStrictEqual(await outcome(pair.sdk.send(new DescribeClusterCommand({name: 'missing'}))));
    expect(short).toMatchObject({name: 'ResourceNotFoundException', status: 404});
  });

  it('unknown credentials: the same error', async () => {
    const stranger = clients(fake.url, {accessKeyId: 'AKIAUNKNOWNKEY000001', secretAccessKey: 'x'});
    try {
      await outcome(stranger.lean.send(new DescribeClusterCommand({name: 'active'})));
      const short = await outcome(stranger.lean.send(new DescribeClusterCommand({name: 'active'})));
      expect(short).toStrictEqual(await outcome(stranger.sdk.send(new DescribeClusterCommand({name: 'active'}))));
      expect(short).toHaveProperty('status', 403);
    } finally {
      stranger.destroy();
    }
  });
});

describeWithMoto('DescribeCluster on the short path against moto', () => {
  let moto: Moto;
  let pair: ReturnType<typeof clients>;

  beforeAll(async () => {
    moto = await startMoto();
    const credentials = {accessKeyId: moto.env['AWS_ACCESS_KEY_ID'] ?? '', secretAccessKey: moto.env['AWS_SECRET_ACCESS_KEY'] ?? ''};
    const admin = new EKSClient({region: REGION, endpoint: moto.endpoint, credentials});
    for (const [name, tags] of [['alpha', {env: 'prod', team: 'a'}], ['beta', undefined]] as const) {
      await admin.send(
        new CreateClusterCommand({
          name,
          roleArn: 'arn:aws:iam::123456789012:role/eks',
          resourcesVpcConfig: {subnetIds: ['subnet-1', 'subnet-2'], endpointPublicAccess: true},
          logging: {clusterLogging: [{types: ['api'], enabled: true}]},
          encryptionConfig: [{resources: ['secrets'], provider: {keyArn: 'arn:aws:kms:eu-west-1:123456789012:key/k'}}],
          ...(tags ? {tags} : {}),
        }),
      );
    }
    admin.destroy();
    pair = clients(moto.endpoint, credentials);
    await pair.lean.send(new DescribeClusterCommand({name: 'alpha'}));
  }, 60_000);

  afterAll(async () => {
    pair?.destroy();
    await moto?.stop();
  });

  it.each(['alpha', 'beta'])('%s: the same cluster as the SDK reads', async (name) => {
    const short = await outcome(pair.lean.send(new DescribeClusterCommand({name})));
    expect(short).toStrictEqual(await outcome(pair.sdk.send(new DescribeClusterCommand({name}))));
    expect(short).toMatchObject({output: {cluster: {name, status: expect.any(String) as unknown}}});
    expect((short as {output: {cluster: {createdAt: unknown}}}).output.cluster.createdAt).toBeInstanceOf(Date);
  });

  it('a cluster moto does not have: the same error', async () => {
    const short = await outcome(pair.lean.send(new DescribeClusterCommand({name: 'nope'})));
    expect(short).toStrictEqual(await outcome(pair.sdk.send(new DescribeClusterCommand({name: 'nope'}))));
    expect(short).toMatchObject({name: 'ResourceNotFoundException'});
  });
});
