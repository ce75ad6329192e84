/**
 * SigV4 verification for the AWS fakes, shared by EKS, STS and the EKS token verifier.
 * The signature is recomputed from exactly what arrived on the wire, and compared; the secret
 * comes from the world. Clock skew of header-signed requests is not checked: the SDK signs with
 * the real clock, while the world may run on a FakeClock.
 *
 * Header-signed requests (every SDK call): the canonical request is built by
 * @smithy/signature-v4's own code (the signer the SDK itself uses: its canonical headers, path
 * and query), then hashed and signed here with node:crypto under a signing key derived once per
 * (secret, day, region, service) — the SDK signer re-derives it per request through a 50-entry
 * cache and checks its HMAC keys' types each time, which made the fake cost more CPU per request
 * than the service in the organization bench. Presigned requests (tokens, rare) still go through
 * the whole SDK signer.
 */
import {createHmac, createSecretKey, hash, timingSafeEqual, type KeyObject} from 'node:crypto';
import {Hash} from '@smithy/hash-node';
import {getCanonicalHeaders, SignatureV4, SignatureV4Base} from '@smithy/signature-v4';
import type {HttpRequest} from '@smithy/types';
import type {FakeAwsWorld, ResolvedCredentials} from './aws-world.ts';

/** The credential scope of a signed request: `AKID/yyyymmdd/region/service/aws4_request`. */
export interface SigV4Scope {
  readonly accessKeyId: string;
  readonly date: string;
  readonly region: string;
  readonly service: string;
}

/** Why a request was not authenticated; each API maps the kind to its own error code. */
export type AuthFailureKind = 'missing' | 'malformed' | 'unknown-key' | 'bad-signature' | 'expired';

/** Outcome of verifying one request. */
export type SigV4Verdict =
  | {readonly ok: true; readonly scope: SigV4Scope; readonly caller: ResolvedCredentials}
  | {readonly ok: false; readonly scope?: SigV4Scope; readonly kind: AuthFailureKind; readonly message: string};

/** A request as it arrived: raw path and query (still percent-encoded), lower-case headers. */
export interface WireRequest {
  readonly method: string;
  readonly rawPath: string;
  readonly rawQuery: string;
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly body: Uint8Array;
}

/** How long a presigned GetCallerIdentity stays valid, whatever X-Amz-Expires says (STS and aws-iam-authenticator). */
export const PRESIGNED_MAX_AGE_MS = 15 * 60_000;

const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const sha256 = Hash.bind(null, 'sha256');

/** Splits a raw query string into decoded [key, value] pairs, keeping order and duplicates. */
export function parseQuery(rawQuery: string): Array<[string, string]> {
  if (rawQuery === '') return [];
  return rawQuery.split('&').map((pair) => {
    const i = pair.indexOf('=');
    const [k, v] = i < 0 ? [pair, ''] : [pair.slice(0, i), pair.slice(i + 1)];
    return [safeDecode(k), safeDecode(v)];
  });
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** Parses `AKID/yyyymmdd/region/service/aws4_request`. */
export function parseCredentialScope(credential: string): SigV4Scope | undefined {
  const parts = credential.split('/');
  const [accessKeyId, date, region, service, terminator] = parts;
  if (parts.length !== 5 || !accessKeyId || !date || !region || !service || terminator !== 'aws4_request') return undefined;
  if (!/^\d{8}$/.test(date)) return undefined;
  return {accessKeyId, date, region, service};
}

/** Parses a SigV4 long date (`20240101T000000Z`) to epoch ms. */
export function parseAmzDate(value: string): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number) as [number, number, number, number, number, number, number];
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  return Number.isNaN(ms) ? undefined : ms;
}

function header(req: WireRequest, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : v?.join(',');
}

/** The scope of a request signed in the Authorization header or in the query, without verifying it. */
export function readScope(req: WireRequest): SigV4Scope | undefined {
  const auth = header(req, 'authorization');
  if (auth !== undefined) {
    const m = /Credential=([^,\s]+)/.exec(auth);
    return m?.[1] ? parseCredentialScope(m[1]) : undefined;
  }
  const credential = parseQuery(req.rawQuery).find(([k]) => k.toLowerCase() === 'x-amz-credential')?.[1];
  return credential ? parseCredentialScope(credential) : undefined;
}

function fail(kind: AuthFailureKind, message: string, scope?: SigV4Scope): SigV4Verdict {
  return {ok: false, kind, message, ...(scope ? {scope} : {})};
}

function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Looks up the key of a scope and checks session token and expiry, the part shared by every signing style. */
function resolveCaller(
  world: FakeAwsWorld,
  scope: SigV4Scope,
  sessionToken: string | undefined,
  now: number,
): ResolvedCredentials | SigV4Verdict {
  const caller = world.lookupAccessKey(scope.accessKeyId);
  if (!caller) return fail('unknown-key', 'The security token included in the request is invalid.', scope);
  if (caller.sessionToken !== undefined && caller.sessionToken !== sessionToken) {
    return fail('unknown-key', 'The security token included in the request is invalid.', scope);
  }
  if (caller.expiresAt !== undefined && now >= caller.expiresAt) {
    return fail('expired', 'The security token included in the request is expired', scope);
  }
  return caller;
}

/** Verifies a request signed in the Authorization header, or presigned in its query (then at most 15 minutes old). */
export async function verifySigV4(world: FakeAwsWorld, req: WireRequest, now = world.now()): Promise<SigV4Verdict> {
  const auth = header(req, 'authorization');
  if (auth === undefined) {
    const query = parseQuery(req.rawQuery);
    if (!query.some(([k]) => k.toLowerCase() === 'x-amz-signature')) {
      return fail('missing', 'Missing Authentication Token');
    }
    return verifyPresigned(world, req, query, now);
  }
  const m = /^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/.exec(auth);
  const scope = m?.[1] ? parseCredentialScope(m[1]) : undefined;
  if (!m?.[2] || !m[3] || !scope) {
    return fail('malformed', `Authorization header is not 'AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...'`);
  }
  const signedHeaders = m[2].split(';');
  const amzDate = header(req, 'x-amz-date');
  const signedAt = amzDate === undefined ? undefined : parseAmzDate(amzDate);
  if (signedAt === undefined || !amzDate?.startsWith(scope.date)) {
    return fail('malformed', `x-amz-date must be a SigV4 date on the credential scope's day ${scope.date}`, scope);
  }
  const caller = resolveCaller(world, scope, header(req, 'x-amz-security-token'), now);
  if ('ok' in caller) return caller;

  const headers: Record<string, string> = {};
  for (const name of signedHeaders) {
    const value = header(req, name);
    if (value === undefined) return fail('bad-signature', `signed header ${name} is missing from the request`, scope);
    headers[name] = value;
  }
  const claimedHash = headers['x-amz-content-sha256'];
  if (claimedHash !== undefined && claimedHash !== 'UNSIGNED-PAYLOAD' && claimedHash !== sha256Hex(req.body)) {
    return fail('bad-signature', 'x-amz-content-sha256 does not match the body', scope);
  }
  // What the SDK's signer would sign: it drops `authorization` and `date`, and sets x-amz-date
  // (from the parsed date) and the caller's session token itself.
  delete headers['authorization'];
  delete headers['date'];
  headers['x-amz-date'] = rememberedLongDate(amzDate, signedAt);
  if (caller.sessionToken) headers['x-amz-security-token'] = caller.sessionToken;
  const request: HttpRequest = {
    method: req.method,
    protocol: 'https:',
    hostname: 'fake',
    path: req.rawPath,
    query: queryRecord(parseQuery(req.rawQuery)),
    headers,
  };
  const canonicalHeaders = getCanonicalHeaders(request, undefined, new Set(signedHeaders));
  const expectedHeaders = Object.keys(canonicalHeaders).sort().join(';');
  const payloadHash = headers['x-amz-content-sha256'] ?? sha256Hex(req.body);
  const canonicalRequest = CANONICAL.request(request, canonicalHeaders, payloadHash);
  const credentialScope = `${scope.date}/${scope.region}/${scope.service}/aws4_request`;
  const stringToSign = `AWS4-HMAC-SHA256\n${headers['x-amz-date']}\n${credentialScope}\n${hash('sha256', canonicalRequest, 'hex')}`;
  const expected = createHmac('sha256', signingKey(caller.secretAccessKey, scope)).update(stringToSign).digest('hex');
  if (expectedHeaders !== m[2] || !sameHex(expected, m[3])) {
    return fail(
      'bad-signature',
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.',
      scope,
    );
  }
  return {ok: true, scope, caller};
}

/**
 * Verifies a query-presigned request (`X-Amz-Signature` in the query). `query` is the parsed
 * query of `req`; callers that already validated its keys pass it in.
 */
export async function verifyPresigned(
  world: FakeAwsWorld,
  req: WireRequest,
  query: ReadonlyArray<readonly [string, string]>,
  now = world.now(),
): Promise<SigV4Verdict> {
  const get = (name: string): string | undefined => query.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  const scope = parseCredentialScope(get('X-Amz-Credential') ?? '');
  const signature = get('X-Amz-Signature') ?? '';
  const amzDate = get('X-Amz-Date') ?? '';
  const signedAt = parseAmzDate(amzDate);
  const signedHeaders = (get('X-Amz-SignedHeaders') ?? '').split(';').filter((h) => h !== '');
  const expires = Number(get('X-Amz-Expires'));
  if (!scope || get('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256' || !/^[0-9a-f]{64}$/.test(signature)) {
    return fail('malformed', 'presigned query needs X-Amz-Algorithm=AWS4-HMAC-SHA256, X-Amz-Credential and a hex X-Amz-Signature');
  }
  if (signedAt === undefined || !amzDate.startsWith(scope.date) || !Number.isInteger(expires) || signedHeaders.length === 0) {
    return fail('malformed', 'presigned query needs X-Amz-Date on the scope day, an integer X-Amz-Expires and X-Amz-SignedHeaders', scope);
  }
  if (now > signedAt + PRESIGNED_MAX_AGE_MS) {
    return fail('expired', `Request has expired: signed at ${amzDate}, older than 15 minutes`, scope);
  }
  const caller = resolveCaller(world, scope, get('X-Amz-Security-Token'), now);
  if ('ok' in caller) return caller;

  const headers: Record<string, string> = {};
  for (const name of signedHeaders) {
    const value = header(req, name);
    if (value === undefined) return fail('bad-signature', `signed header ${name} is missing from the request`, scope);
    headers[name] = value;
  }
  // The signer re-adds its own auth parameters; hand it only the request's own parameters.
  const authParams = new Set(['x-amz-algorithm', 'x-amz-credential', 'x-amz-date', 'x-amz-expires', 'x-amz-signedheaders', 'x-amz-signature', 'x-amz-security-token']);
  const presigned = await signerFor(caller).presign(
    {
      method: req.method,
      protocol: 'https:',
      hostname: 'fake',
      path: req.rawPath,
      query: queryRecord(query.filter(([k]) => !authParams.has(k.toLowerCase()))),
      headers,
      body: req.body.length === 0 ? undefined : req.body,
    },
    {
      signingDate: new Date(signedAt),
      expiresIn: expires,
      signingRegion: scope.region,
      signingService: scope.service,
      signableHeaders: new Set(signedHeaders),
    },
  );
  const expected = String(presigned.query?.['X-Amz-Signature'] ?? '');
  if (presigned.query?.['X-Amz-SignedHeaders'] !== signedHeaders.join(';') || !sameHex(expected, signature)) {
    return fail('bad-signature', 'The request signature we calculated does not match the signature you provided.', scope);
  }
  return {ok: true, scope, caller};
}

function signerFor(caller: ResolvedCredentials): SignatureV4 {
  return new SignatureV4({
    credentials: {
      accessKeyId: caller.accessKeyId,
      secretAccessKey: caller.secretAccessKey,
      ...(caller.sessionToken === undefined ? {} : {sessionToken: caller.sessionToken}),
    },
    region: 'unused',
    service: 'unused',
    sha256,
    applyChecksum: false,
  });
}

/** The SDK signer's canonical request (method, path, query, headers, payload hash), reached through its base class. */
class CanonicalRequests extends SignatureV4Base {
  constructor() {
    super({credentials: {accessKeyId: 'unused', secretAccessKey: 'unused'}, region: 'unused', service: 'unused', sha256, uriEscapePath: true});
  }

  request(request: HttpRequest, canonicalHeaders: Record<string, string>, payloadHash: string): string {
    return this.createCanonicalRequest(request, canonicalHeaders, payloadHash);
  }
}

const CANONICAL = new CanonicalRequests();

/** Signing keys by secret, day, region and service (derivation as in the SigV4 specification). */
const signingKeys = new Map<string, KeyObject>();
/** Keys kept at most; a bench organization signs with ~34,000 (account, region, service) keys a day. */
const SIGNING_KEYS = 200_000;

function signingKey(secret: string, scope: SigV4Scope): KeyObject {
  const name = `${secret}\n${scope.date}\n${scope.region}\n${scope.service}`;
  let key = signingKeys.get(name);
  if (key === undefined) {
    // Each step's key as a KeyObject: Node checks a Buffer key's type at ~20 µs an HMAC.
    key = createSecretKey(createHmac('sha256', `AWS4${secret}`).update(scope.date).digest());
    for (const part of [scope.region, scope.service, 'aws4_request']) key = createSecretKey(createHmac('sha256', key).update(part).digest());
    if (signingKeys.size >= SIGNING_KEYS) signingKeys.clear();
    signingKeys.set(name, key);
  }
  return key;
}

/** The last x-amz-date seen and its long date: calls signed in the same second share it (a bench makes thousands a second). */
let lastDate: {readonly sent: string; readonly long: string} | undefined;

/** {@link longDate} of a request's parsed x-amz-date, remembered for the next request with the same header. */
function rememberedLongDate(sent: string, signedAt: number): string {
  if (lastDate?.sent !== sent) lastDate = {sent, long: longDate(signedAt)};
  return lastDate.long;
}

/** `20240101T000000Z` for an epoch ms, as the SDK's signer formats its signing date. */
function longDate(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z').replace(/[-:]/g, '');
}

function queryRecord(pairs: ReadonlyArray<readonly [string, string]>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of pairs) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

function sha256Hex(body: Uint8Array): string {
  return body.length === 0 ? EMPTY_SHA256 : hash('sha256', body, 'hex');
}
