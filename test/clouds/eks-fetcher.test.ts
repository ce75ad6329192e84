import {DescribeClusterCommand, EKSClient, ListClustersCommand, type Cluster} from '@aws-sdk/client-eks';
import {mockClient} from 'aws-sdk-client-mock';
import PQueue from 'p-queue';
import {afterEach, describe, expect, it} from 'vitest';
import {createEksFetcher} from '../../src/clouds/aws/eks-fetcher.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';

const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
const ACCOUNT = '123456789012';

function cluster(name: string, extra: Partial<Cluster> = {}): Cluster {
  return {
    name,
    arn: `arn:aws:eks:us-east-1:${ACCOUNT}:cluster/${name}`,
    status: 'ACTIVE',
    endpoint: `https://${name}.gr7.us-east-1.eks.amazonaws.com`,
    certificateAuthority: {data: CA},
    tags: {env: 'prod'},
    version: '1.31',
    ...extra,
  };
}

function error(name: string, status: number): Error {
  return Object.assign(new Error(`${name} happened`), {name, $metadata: {httpStatusCode: status, requestId: 'req-1'}});
}

const eks = mockClient(EKSClient);
afterEach(() => eks.reset());

function fetcher(options: {skipNotEnabledRegion?: boolean} = {}, region = 'us-east-1') {
  return createEksFetcher({
    source: eksSource(0, region, ACCOUNT),
    client: new EKSClient({region: 'us-east-1', credentials: {accessKeyId: 'AKID', secretAccessKey: 'secret'}}),
    describeQueue: new PQueue({concurrency: 4}),
    ...options,
  });
}

function paged(pages: string[][]): void {
  pages.forEach((names, i) => {
    const input = i === 0 ? {nextToken: undefined} : {nextToken: `t${i}`};
    eks.on(ListClustersCommand, input).resolves({clusters: names, ...(i < pages.length - 1 ? {nextToken: `t${i + 1}`} : {})});
  });
}

describe('EKS fetcher', () => {
  it('reads every page of ListClusters and describes each cluster', async () => {
    paged([['a', 'b'], ['c'], ['d']]);
    for (const name of ['a', 'b', 'c', 'd']) eks.on(DescribeClusterCommand, {name}).resolves({cluster: cluster(name)});
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.ok).toBe(true);
    expect(result.clusters.map((c) => c.name)).toEqual(['a', 'b', 'c', 'd']);
    expect(eks.commandCalls(ListClustersCommand)).toHaveLength(3);
    const a = result.clusters[0]!;
    expect(a).toMatchObject({cloud: 'AWS', region: 'us-east-1', account: ACCOUNT, statusOk: true, tags: {env: 'prod'}});
    expect(a.endpoint).toMatch(/^https:/);
  });

  it('records the issuer of the cluster\'s service-account tokens; one that is not an https URL is left out, never failing the record', async () => {
    paged([['a', 'b', 'c']]);
    eks.on(DescribeClusterCommand, {name: 'a'}).resolves({cluster: cluster('a', {identity: {oidc: {issuer: 'https://oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F60718293A4B5C6D7E8F9'}}})});
    eks.on(DescribeClusterCommand, {name: 'b'}).resolves({cluster: cluster('b', {identity: {oidc: {issuer: 'not a url'}}})});
    eks.on(DescribeClusterCommand, {name: 'c'}).resolves({cluster: cluster('c')});
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.ok).toBe(true);
    expect(result.malformed).toEqual([]);
    expect(result.clusters.map((c) => [c.name, c.oidcIssuer, c.endpoint !== undefined])).toEqual([
      ['a', 'https://oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F60718293A4B5C6D7E8F9', true],
      ['b', undefined, true],
      ['c', undefined, true],
    ]);
  });

  it('keeps clusters of other statuses listed but not kept', async () => {
    paged([['live', 'new'], ['old']]);
    eks.on(DescribeClusterCommand, {name: 'live'}).resolves({cluster: cluster('live', {status: 'UPDATING'})});
    eks.on(DescribeClusterCommand, {name: 'new'}).resolves({cluster: cluster('new', {status: 'CREATING', endpoint: undefined})});
    eks.on(DescribeClusterCommand, {name: 'old'}).resolves({cluster: cluster('old', {status: 'DELETING'})});
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.clusters.map((c) => [c.name, c.statusOk])).toEqual([['live', true], ['new', false], ['old', false]]);
    expect(result.malformed).toEqual([]);
  });

  it('fails the source on throttling exhaustion and on AccessDenied, never returning partial lists', async () => {
    eks.on(ListClustersCommand).rejects(error('ThrottlingException', 429));
    const throttled = await fetcher().fetch(new AbortController().signal);
    expect(throttled).toMatchObject({ok: false, clusters: [], error: {reason: 'throttled', code: 'ThrottlingException', operation: 'ListClusters', requestId: 'req-1'}});

    eks.reset();
    paged([['a', 'b'], ['c']]);
    eks.on(DescribeClusterCommand).resolves({cluster: cluster('a')});
    eks.on(DescribeClusterCommand, {name: 'c'}).rejects(error('AccessDeniedException', 403));
    const denied = await fetcher().fetch(new AbortController().signal);
    expect(denied).toMatchObject({ok: false, clusters: [], error: {reason: 'access_denied', operation: 'DescribeCluster'}});
  });

  it('skips a record without a usable name, and reports unreachable clusters with the reason', async () => {
    paged([['good', 'noendpoint'], ['badca', 'badname']]);
    eks.on(DescribeClusterCommand, {name: 'good'}).resolves({cluster: cluster('good')});
    eks.on(DescribeClusterCommand, {name: 'noendpoint'}).resolves({cluster: cluster('noendpoint', {endpoint: undefined})});
    eks.on(DescribeClusterCommand, {name: 'badca'}).resolves({cluster: cluster('badca', {certificateAuthority: {data: '%%%not-base64'}})});
    eks.on(DescribeClusterCommand, {name: 'badname'}).resolves({cluster: cluster('bad name!')});
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.ok).toBe(true);
    expect(result.clusters.map((c) => [c.name, c.unreachable?.reason])).toEqual([['badca', 'invalid_ca'], ['good', undefined], ['noendpoint', 'no_endpoint']]);
    expect(result.malformed.map((m) => [m.name, m.reason])).toEqual([['badname', expect.stringContaining('invalid cluster name')]]);
  });

  it('treats a cluster deleted between list and describe as gone', async () => {
    paged([['a', 'gone']]);
    eks.on(DescribeClusterCommand, {name: 'a'}).resolves({cluster: cluster('a')});
    eks.on(DescribeClusterCommand, {name: 'gone'}).rejects(error('ResourceNotFoundException', 404));
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.ok).toBe(true);
    expect(result.clusters.map((c) => c.name)).toEqual(['a']);
  });

  it('skips an opt-in region the account has not enabled only when regions are a wildcard', async () => {
    eks.on(ListClustersCommand).rejects(error('UnrecognizedClientException', 403));
    const wildcard = await fetcher({skipNotEnabledRegion: true}, 'af-south-1').fetch(new AbortController().signal);
    expect(wildcard).toMatchObject({ok: true, clusters: [], skippedReason: expect.stringContaining('not enabled')});
    const explicit = await fetcher({}, 'af-south-1').fetch(new AbortController().signal);
    expect(explicit).toMatchObject({ok: false, error: {reason: 'access_denied'}});
    // In a default region the same answer means bad credentials: the source fails, nothing is emptied.
    const badCredentials = await fetcher({skipNotEnabledRegion: true}, 'us-east-1').fetch(new AbortController().signal);
    expect(badCredentials).toMatchObject({ok: false, error: {reason: 'access_denied', code: 'UnrecognizedClientException'}});
  });

  it('reports a record without a status as malformed instead of dropping the cluster', async () => {
    paged([['a', 'nostatus']]);
    eks.on(DescribeClusterCommand, {name: 'a'}).resolves({cluster: cluster('a')});
    eks.on(DescribeClusterCommand, {name: 'nostatus'}).resolves({cluster: cluster('nostatus', {status: undefined})});
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.clusters.map((c) => c.name)).toEqual(['a']);
    expect(result.malformed).toMatchObject([{name: 'nostatus', reason: 'status is missing'}]);
  });

  it('refuses a nextToken that repeats instead of looping forever', async () => {
    eks.on(ListClustersCommand).resolves({clusters: ['a'], nextToken: 'same'});
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result).toMatchObject({ok: false, error: {operation: 'ListClusters'}});
  });
});
