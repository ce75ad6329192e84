/**
 * The lean clients' SigV4 signer (src/clouds/aws/lean-sdk.ts) hashes the canonical request and
 * computes the signature with node:crypto instead of smithy's per-byte hex and awaited digests.
 * It must sign exactly as @smithy/signature-v4 does: a table of requests the clients send (and
 * some they never send) is signed by both with the same credentials and date, and every header
 * must be equal.
 */
import {EKSClient} from '@aws-sdk/client-eks';
import {HttpRequest} from '@smithy/protocol-http';
import {SignatureV4} from '@smithy/signature-v4';
import {describe, expect, it} from 'vitest';
import {leanSdkClient} from '../../src/clouds/aws/lean-sdk.ts';
import {NodeSha256} from '../../src/clouds/aws/sha256.ts';

const STATIC = {accessKeyId: 'AKIALEANSIGNER000001', secretAccessKey: 'lean-signer-secret'};
const SESSION = {accessKeyId: 'ASIALEANSIGNER000002', secretAccessKey: 'lean-signer-session-secret', sessionToken: 'FwoGZXIvYXdzEJr//////////session+token/=='};
const HOST = 'eks.eu-west-1.amazonaws.com';
const BASE = {protocol: 'https:', hostname: HOST, headers: {host: HOST, 'x-amz-user-agent': 'aws-sdk-js/3', 'user-agent': 'aws-sdk-js/3 ua/2.1', 'amz-sdk-invocation-id': '7d1d7f0e-2c0c-4b5e-9d9e-1f1f1f1f1f1f', 'amz-sdk-request': 'attempt=1; max=8'}};

/** Requests as the clients send them, and edge cases of canonicalisation. */
const REQUESTS: {name: string; request: () => HttpRequest}[] = [
  {name: 'ListClusters, first page', request: () => new HttpRequest({...BASE, method: 'GET', path: '/clusters', query: {maxResults: '100'}})},
  {name: 'ListClusters, a later page (token needing escapes)', request: () => new HttpRequest({...BASE, method: 'GET', path: '/clusters', query: {maxResults: '100', nextToken: 'eyJ0b2tlbiI6IFsxLCAyXX0=/+ ~*'}})},
  {name: 'DescribeCluster', request: () => new HttpRequest({...BASE, method: 'GET', path: '/clusters/prod-eu_1'})},
  {
    name: 'GetResources (JSON 1.1 POST)',
    request: () =>
      new HttpRequest({
        ...BASE,
        method: 'POST',
        path: '/',
        headers: {...BASE.headers, 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'ResourceGroupsTaggingAPI_20170126.GetResources', 'content-length': '63'},
        body: '{"ResourceTypeFilters":["eks:cluster"],"ResourcesPerPage":100}',
      }),
  },
  {name: 'a binary body', request: () => new HttpRequest({...BASE, method: 'PUT', path: '/x', body: new Uint8Array([0, 1, 2, 250, 255])})},
  {name: 'a non-ASCII body', request: () => new HttpRequest({...BASE, method: 'POST', path: '/', body: '{"Key":"tëst ✓"}'})},
  {name: 'a preset payload hash', request: () => new HttpRequest({...BASE, method: 'POST', path: '/', headers: {...BASE.headers, 'X-Amz-Content-Sha256': 'UNSIGNED-PAYLOAD'}, body: 'x'})},
  {name: 'header values with runs of spaces, tabs and line breaks; mixed-case names', request: () => new HttpRequest({...BASE, method: 'GET', path: '/clusters', headers: {...BASE.headers, 'X-Custom-Thing': '  a   b\t\tc\r\nd  '}})},
  {name: 'unsignable and proxy headers', request: () => new HttpRequest({...BASE, method: 'GET', path: '/clusters', headers: {...BASE.headers, 'x-amzn-trace-id': 'Root=1', 'proxy-authorization': 'p', 'sec-fetch-mode': 'cors', connection: 'keep-alive'}})},
  {name: 'a path with dot segments and characters to escape', request: () => new HttpRequest({...BASE, method: 'GET', path: '/a/./b/../c d/é/', query: {'k e': 'v&w', multi: ['2', '1']}})},
  {name: 'stale signature headers to replace', request: () => new HttpRequest({...BASE, method: 'GET', path: '/clusters', headers: {...BASE.headers, authorization: 'old', 'x-amz-date': '20000101T000000Z'}})},
];

async function leanSignerFor(credentials: typeof STATIC | typeof SESSION): Promise<SignatureV4> {
  const client = leanSdkClient(new EKSClient({region: 'eu-west-1', credentials, sha256: NodeSha256}));
  return (client.config as unknown as {signer: () => Promise<SignatureV4>}).signer();
}

describe('the lean SigV4 signer', () => {
  for (const credentials of [STATIC, SESSION]) {
    for (const {name, request} of REQUESTS) {
      it(`signs ${name} exactly as @smithy/signature-v4 (${credentials === STATIC ? 'static' : 'session'} credentials)`, async () => {
        const lean = await leanSignerFor(credentials);
        const smithy = new SignatureV4({credentials, region: 'eu-west-1', service: 'eks', sha256: NodeSha256});
        for (const signingDate of [new Date('2026-11-24T00:59:59.999Z'), new Date('2026-11-24T01:00:00.001Z')]) {
          const original = request();
          const ours = (await lean.sign(original, {signingDate})) as HttpRequest;
          const theirs = (await smithy.sign(request(), {signingDate})) as HttpRequest;
          expect(ours.headers).toEqual(theirs.headers);
          expect(ours.headers['authorization']).toMatch(/^AWS4-HMAC-SHA256 Credential=/);
          // The caller's request is left as it was (a signed copy is returned).
          expect(original.headers['authorization']).toBe(request().headers['authorization']);
        }
      });
    }
  }

  it('a signer without path escaping (as S3 clients have) keeps its own canonical paths', async () => {
    const escaping = await leanSignerFor(STATIC);
    const client = leanSdkClient(new EKSClient({region: 'eu-west-1', credentials: STATIC, sha256: NodeSha256, signingEscapePath: false}));
    const plain = await (client.config as unknown as {signer: () => Promise<SignatureV4>}).signer();
    const smithy = new SignatureV4({credentials: STATIC, region: 'eu-west-1', service: 'eks', sha256: NodeSha256, uriEscapePath: false});
    const signingDate = new Date('2026-11-24T00:00:00Z');
    const request = (): HttpRequest => new HttpRequest({...BASE, method: 'GET', path: '/a b/./c%2F'});
    // The escaping signer first, so a shared answer would be the escaped one.
    await escaping.sign(request(), {signingDate});
    expect(((await plain.sign(request(), {signingDate})) as HttpRequest).headers).toEqual(((await smithy.sign(request(), {signingDate})) as HttpRequest).headers);
  });

  it('derives its signing keys as smithy does, for every secret, day, region and service', async () => {
    const secrets = ['wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', 'x', 'sëcret ✓ with non-ASCII', 'a'.repeat(200)];
    const request = REQUESTS[3]?.request as () => HttpRequest;
    for (const secretAccessKey of secrets) {
      const credentials = {accessKeyId: 'AKIADERIVE0000000001', secretAccessKey};
      const lean = await (leanSdkClient(new EKSClient({region: 'eu-west-1', credentials, sha256: NodeSha256})).config as unknown as {signer: () => Promise<SignatureV4>}).signer();
      const smithy = new SignatureV4({credentials, region: 'eu-west-1', service: 'eks', sha256: NodeSha256});
      for (const [signingDate, signingRegion, signingService] of [
        [new Date('2026-11-24T23:59:59Z'), 'eu-west-1', 'eks'],
        [new Date('2026-11-25T00:00:00Z'), 'eu-west-1', 'eks'],
        [new Date('2026-11-25T00:00:00Z'), 'ap-southeast-2', 'tagging'],
        [new Date('2026-11-25T00:00:00Z'), 'cn-north-1', 'eks'],
      ] as const) {
        const options = {signingDate, signingRegion, signingService};
        expect(((await lean.sign(request(), options)) as HttpRequest).headers).toEqual(((await smithy.sign(request(), options)) as HttpRequest).headers);
      }
    }
  });

  it('signs with the region and service of the call when given, as smithy does', async () => {
    const lean = await leanSignerFor(SESSION);
    const smithy = new SignatureV4({credentials: SESSION, region: 'eu-west-1', service: 'eks', sha256: NodeSha256});
    const options = {signingDate: new Date('2026-11-24T00:00:00Z'), signingRegion: 'us-gov-west-1', signingService: 'tagging'};
    const request = REQUESTS[0]?.request as () => HttpRequest;
    expect(((await lean.sign(request(), options)) as HttpRequest).headers).toEqual(((await smithy.sign(request(), options)) as HttpRequest).headers);
  });
});
