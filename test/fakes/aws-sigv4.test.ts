/**
 * The fake's SigV4 verifier against the SDK's own signer: requests of every shape the SDK
 * sends (query lists, escaped paths, bodies, session tokens, unsigned payloads) signed by
 * @smithy/signature-v4 are accepted, and changing any signed part afterwards is refused.
 */
import {Hash} from '@smithy/hash-node';
import {SignatureV4} from '@smithy/signature-v4';
import {describe, expect, it} from 'vitest';
import {verifySigV4, type WireRequest} from './aws-sigv4.ts';
import {FakeAwsWorld} from './aws-world.ts';

const STATIC = {accessKeyId: 'AKIDSIGV4TEST', secretAccessKey: 'static-secret/+=='};

function world(): {world: FakeAwsWorld; session: {accessKeyId: string; secretAccessKey: string; sessionToken: string}} {
  const w = new FakeAwsWorld();
  w.addAccount('111111111111', {accessKeys: [STATIC], roles: [{arn: 'arn:aws:iam::111111111111:role/r', trust: []}]});
  const issued = w.issueRoleCredentials('arn:aws:iam::111111111111:role/r', 'sess', 3600);
  return {world: w, session: {accessKeyId: issued.accessKeyId, secretAccessKey: issued.secretAccessKey, sessionToken: issued.sessionToken ?? ''}};
}

interface Shape {
  readonly method: string;
  readonly path: string;
  readonly query?: Record<string, string | string[]>;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly region?: string;
  readonly service?: string;
}

const SHAPES: Record<string, Shape> = {
  'GET with a query': {method: 'GET', path: '/clusters', query: {maxResults: '100', nextToken: 'eyJzY29wZSI6IjEvdXMtZWFzdC0xIn0='}},
  'GET of an escaped path': {method: 'GET', path: `/clusters/${encodeURIComponent('a:b c')}/access-entries/${encodeURIComponent('arn:aws:iam::1:role/x')}`},
  'a query list and odd characters': {method: 'GET', path: '/clusters', query: {b: ['2', '1'], 'a key': "it's (here)*!", empty: ''}},
  'POST JSON 1.1 with a body': {
    method: 'POST',
    path: '/',
    headers: {'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'ResourceGroupsTaggingAPI_20170126.GetResources'},
    body: '{"ResourceTypeFilters":["eks:cluster"],"ResourcesPerPage":100}',
    service: 'tagging',
  },
  'a payload hash header': {method: 'POST', path: '/', headers: {'x-amz-content-sha256': 'UNSIGNED-PAYLOAD'}, body: 'Action=GetCallerIdentity', service: 'sts'},
  'spaces in a header value': {method: 'GET', path: '/clusters', headers: {'x-custom': '  a   b  '}, region: 'eu-west-3'},
};

async function signed(shape: Shape, creds: {accessKeyId: string; secretAccessKey: string; sessionToken?: string}): Promise<WireRequest> {
  const signer = new SignatureV4({credentials: creds, region: shape.region ?? 'us-east-1', service: shape.service ?? 'eks', sha256: Hash.bind(null, 'sha256'), applyChecksum: false});
  const request = {
    method: shape.method,
    protocol: 'https:',
    hostname: '127.0.0.1',
    port: 4566,
    path: shape.path,
    query: shape.query ?? {},
    headers: {host: '127.0.0.1:4566', ...shape.headers},
    ...(shape.body === undefined ? {} : {body: shape.body}),
  };
  const out = await signer.sign(request);
  const rawQuery = Object.entries(shape.query ?? {})
    .flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x) => `${encodeURIComponent(k)}=${encodeURIComponent(x)}`))
    .join('&');
  // As Node's HTTP server hands them over: lower-case names, values trimmed.
  const headers = Object.fromEntries(Object.entries(out.headers).map(([k, v]) => [k.toLowerCase(), String(v).trim()]));
  return {method: shape.method, rawPath: shape.path, rawQuery, headers, body: Buffer.from(shape.body ?? '')};
}

describe('verifySigV4 against the SDK signer', () => {
  for (const [name, shape] of Object.entries(SHAPES)) {
    it(`accepts ${name}, static and session credentials, and refuses it once any signed part changes`, async () => {
      const {world: w, session} = world();
      for (const creds of [STATIC, session]) {
        const good = await signed(shape, creds);
        const verdict = await verifySigV4(w, good);
        expect(verdict).toMatchObject({ok: true, caller: {accessKeyId: creds.accessKeyId, account: '111111111111'}});

        const tampered: Array<[string, WireRequest]> = [
          ['method', {...good, method: good.method === 'GET' ? 'DELETE' : 'PUT'}],
          ['path', {...good, rawPath: `${good.rawPath}x`}],
          ['query', {...good, rawQuery: good.rawQuery === '' ? 'extra=1' : `${good.rawQuery}&extra=1`}],
          ['host', {...good, headers: {...good.headers, host: '127.0.0.1:4567'}}],
          ['date', {...good, headers: {...good.headers, 'x-amz-date': String(good.headers['x-amz-date']).replace(/\d{2}Z$/, (s) => `${(Number(s.slice(0, 2)) + 1) % 60}`.padStart(2, '0') + 'Z')}}],
          ['signature', {...good, headers: {...good.headers, authorization: String(good.headers['authorization']).replace(/.$/, (c) => (c === '0' ? '1' : '0'))}}],
        ];
        // An UNSIGNED-PAYLOAD body is, by definition, not signed.
        if (shape.body !== undefined && shape.headers?.['x-amz-content-sha256'] !== 'UNSIGNED-PAYLOAD') tampered.push(['body', {...good, body: Buffer.from(`${shape.body} `)}]);
        for (const [part, req] of tampered) {
          const bad = await verifySigV4(w, req);
          expect({part, ok: bad.ok}).toEqual({part, ok: false});
        }
      }
    });
  }

  it('refuses a session key whose token is not signed, and a key signed with the wrong secret', async () => {
    const {world: w, session} = world();
    const good = await signed(SHAPES['GET with a query'] as Shape, session);
    // The SDK signs the token; one added after signing is not in SignedHeaders.
    const unsigned = await signed(SHAPES['GET with a query'] as Shape, {accessKeyId: session.accessKeyId, secretAccessKey: session.secretAccessKey});
    expect(await verifySigV4(w, {...unsigned, headers: {...unsigned.headers, 'x-amz-security-token': session.sessionToken}})).toMatchObject({ok: false, kind: 'bad-signature'});
    expect(await verifySigV4(w, good)).toMatchObject({ok: true});
    const wrong = await signed(SHAPES['GET with a query'] as Shape, {...STATIC, secretAccessKey: 'not-the-secret'});
    expect(await verifySigV4(w, wrong)).toMatchObject({ok: false, kind: 'bad-signature'});
  });
});
