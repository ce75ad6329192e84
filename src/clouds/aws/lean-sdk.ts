/**
 * Per-call work the AWS SDK v3 repeats on every request although its result cannot change for a
 * given client, removed from the clients of the discovery call path (EKS, tagging, Account). An
 * organization cycle makes ~34,000 calls (one `ListClusters` and one `GetResources` per account ×
 * region), so each microsecond here is ~34 ms of CPU a cycle. What stays as the SDK has it: the
 * middleware order, retries and their token bucket, endpoint rules, serialisation, SigV4 signing
 * of every request with the identity of the call (credentials are still read on every call, so
 * clients shared by several accounts never sign with another account's keys).
 *
 * - The signer: by default every request builds a new `SignatureV4` from a copy of the whole
 *   resolved client config (~80 keys). One per client does the same job: it holds no request
 *   state, only the client's credential provider, sha256, and defaults the SDK overrides per call
 *   (signing region and service from the endpoint's auth scheme).
 * - The user agent: rebuilt and re-escaped on every request from values fixed per client. The
 *   SDK's own middleware still builds it on a client's first request; later requests reuse the
 *   two header values it set.
 * - The logger middleware (runs the schema's sensitive-data filters over the input and output of
 *   every call only to hand them to the no-op logger: the service logs nothing through the SDK)
 *   and recursion detection (copies the Lambda trace id from the environment; the service is
 *   never a Lambda function) are taken off the stack.
 */
import {createHmac, hash} from 'node:crypto';
import {userAgentMiddleware} from '@aws-sdk/core/client';
import {ALGORITHM_IDENTIFIER, ALWAYS_UNSIGNABLE_HEADERS, KEY_TYPE_IDENTIFIER, AMZ_DATE_HEADER, AUTH_HEADER, createScope, getCanonicalHeaders, getCanonicalQuery, getPayloadHash, hasHeader, prepareRequest, PROXY_HEADER_PATTERN, SEC_HEADER_PATTERN, SHA256_HEADER, SignatureV4, TOKEN_HEADER} from '@smithy/signature-v4';
import type {HttpRequest as SignableRequest, RequestSigningArguments} from '@smithy/types';
import {invalidResponse} from './errors.ts';
import {NodeSha256} from './sha256.ts';
import {bodyErrorType, partialStatusProblem, refuseDuplicateKeys} from './unique-keys.ts';

/** The parts of an SDK v3 client used here; any generated client (EKSClient, ...) has them. */
export interface LeanableClient {
  readonly config: object;
  readonly middlewareStack: {add(...args: never[]): void; remove(name: string): boolean};
}

/** What the signer needs from a resolved client config (set by the SDK's SigV4 config resolver). */
interface SigV4Config {
  credentials: unknown;
  region: unknown;
  sha256: unknown;
  signingName?: string;
  defaultSigningName?: string;
  serviceId?: string;
  signingEscapePath?: boolean;
  applyChecksum?: boolean;
  signer: (authScheme?: unknown) => Promise<unknown>;
}

type Handler = (args: {request?: unknown; input: unknown}) => Promise<unknown>;
type Middleware = (next: Handler, context: object) => Handler;
interface StackLike {
  add(middleware: Middleware, options: {step: 'build' | 'finalizeRequest'; priority: 'low'; name: string; tags: string[]; override: boolean}): void;
  remove(name: string): boolean;
}

const USER_AGENT = 'user-agent';
const X_AMZ_USER_AGENT = 'x-amz-user-agent';

/**
 * Applies the three changes of the file comment to a constructed client, and the check of its
 * listings' answers for a key given twice (unique-keys.ts); returns it.
 */
export function leanSdkClient<C extends LeanableClient>(client: C): C {
  const config = client.config as SigV4Config;
  const stack = client.middlewareStack as unknown as StackLike;
  // The SDK's resolver wrapped our credentials (memoized, attributed): the shared signer reads
  // them the same way the per-call signers did, once per request.
  // Built on first use, then the same settled promise for every request (the SDK awaits it per call).
  let signer: Promise<SignatureV4> | undefined;
  config.signer = () => {
    signer ??= Promise.resolve(
      leanSigner(
        new SignatureV4({
          credentials: config.credentials as never,
          region: config.region as never,
          service: config.signingName ?? config.defaultSigningName ?? config.serviceId ?? '',
          sha256: config.sha256 as never,
          uriEscapePath: config.signingEscapePath ?? true,
          ...(config.applyChecksum === undefined ? {} : {applyChecksum: config.applyChecksum}),
        }),
      ),
    );
    return signer;
  };
  stack.remove('loggerMiddleware');
  stack.remove('recursionDetectionMiddleware');
  stack.add(memoizedUserAgent(config), {step: 'build', priority: 'low', name: 'getUserAgentMiddleware', tags: ['SET_USER_AGENT', 'USER_AGENT'], override: true});
  // In finalizeRequest, so the short path of lean-read.ts (which keeps only that step) has it too.
  stack.add(refuseErrorTypeOn2xx, {step: 'finalizeRequest', priority: 'low', name: 'kubeDiscoveryErrorTypeOn2xx', tags: [], override: true});
  // Listings with a key given twice are malformed, on the SDK's way too (the short path judges its own).
  return refuseDuplicateKeys(client);
}

/**
 * A 2xx answer that names an error type contradicts itself: AWS names one only on errors, in the
 * `x-amzn-ErrorType` header or, in the JSON protocols (the tagging API, Organizations), in the
 * body's `__type`. The SDK reads either as a success (`{"clusters":[]}` would be an empty
 * region); it is a malformed answer instead (unique-keys.ts judges a listing's answer on the
 * SDK's own way, before its deserialiser, as well).
 */
const refuseErrorTypeOn2xx: Middleware = (next, context) => async (args) => {
  const result = (await next(args)) as {response?: {statusCode?: unknown; headers?: Record<string, string | undefined>; body?: unknown}};
  const status = result.response?.statusCode;
  if (typeof status !== 'number' || status < 200 || status >= 300) return result;
  // The short path reads any 2xx as the SDK would: a listing or a describe answered 206 or 203 is no whole answer (unique-keys.ts).
  const partial = status === 200 ? undefined : partialStatusProblem((context as {commandName?: unknown}).commandName, status);
  if (partial !== undefined) throw Object.assign(invalidResponse(partial), {$metadata: {httpStatusCode: status}});
  const type = result.response?.headers?.['x-amzn-errortype'] ?? bodyErrorType(result.response?.body);
  if (typeof type === 'string') {
    throw Object.assign(invalidResponse(`an answer with status ${status} names the error type ${JSON.stringify(type.slice(0, 60))}`), {$metadata: {httpStatusCode: status}});
  }
  return result;
};

interface Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}
type DeriveKey = (credentials: Credentials, region: string, shortDate: string, service?: string) => Promise<Uint8Array>;

/**
 * Signing keys remembered per credentials object (a weak key: keys of credentials that are no
 * longer held go with them), by (day, region, service). An organization signs with ~34,000
 * (account, region, service) keys a cycle, each once: a bounded cache shared by every account
 * was emptied by the cycle's own later sources before its next use (every call derived anew, five
 * HMACs). Kept per credentials object, an entry is one 32-character string (~50 bytes) and
 * lives as long as the account's cached credentials; it is used only for the same secret key,
 * so a secret rotated under the same object derives anew.
 */
const signingKeys = new WeakMap<object, {readonly secret: string; readonly day: string; readonly keys: Map<string, string>}>();
/**
 * One name per (region, service), shared by every account's map, by service then region: found
 * from the two strings a request has, so a lookup on every call builds no key string.
 */
const scopeNames = new Map<string, Map<string, string>>();

/**
 * Which headers smithy's `getCanonicalHeaders` signs for one set of header names, and in which
 * order: `order` holds [name as given, lower-case name] sorted as the canonical request lists
 * them, `signed` the `SignedHeaders` list. The names of the clients' requests are the same call
 * after call, so this is worked out once per set instead of three sorts per request.
 */
interface HeaderPlan {
  readonly order: readonly (readonly [string, string])[];
  /** Per entry of `order`, its canonical line's start (`name:`). */
  readonly prefixes: readonly string[];
  readonly signed: string;
}

/** Plans by the request's header names (in their order); a handful of sets in practice, bounded as a guard. */
const headerPlans = new Map<string, HeaderPlan | null>();
const HEADER_PLANS = 256;

/** The header sets met last, with their plans: checked name by name first, so a call builds no lookup key. */
interface RecentPlan {
  readonly names: readonly string[];
  readonly plan: HeaderPlan | null;
}
const recentPlans: RecentPlan[] = [];
const RECENT_PLANS = 8;

/** Whether `headers` has exactly `names` (with a value), in that order. */
function hasNames(headers: Record<string, string | undefined>, names: readonly string[]): boolean {
  let i = 0;
  for (const name in headers) {
    if (headers[name] === undefined || headers[name] === null) continue;
    if (names[i] !== name) return false;
    i++;
  }
  return i === names.length;
}

/** The plan of a request's headers, or null when smithy's own functions must canonicalise them. */
function headerPlanOf(headers: Record<string, string | undefined>): HeaderPlan | null {
  for (let i = 0; i < recentPlans.length; i++) {
    const recent = recentPlans[i] as RecentPlan;
    if (hasNames(headers, recent.names)) return recent.plan;
  }
  const names = Object.keys(headers).filter((name) => headers[name] !== undefined && headers[name] !== null);
  const id = names.map((name) => `${name}\n`).join('');
  let plan = headerPlans.get(id);
  if (plan === undefined) {
    plan = buildHeaderPlan(names);
    if (headerPlans.size >= HEADER_PLANS) headerPlans.clear();
    headerPlans.set(id, plan);
  }
  if (recentPlans.length >= RECENT_PLANS) recentPlans.pop();
  recentPlans.unshift({names, plan});
  return plan;
}

/** smithy's selection of signed headers (getCanonicalHeaders): sorted names, unsignable ones left out, the last of two spellings kept. */
function buildHeaderPlan(names: readonly string[]): HeaderPlan | null {
  const byLower = new Map<string, string>();
  for (const name of [...names].sort()) {
    const lower = name.toLowerCase();
    if (Object.hasOwn(ALWAYS_UNSIGNABLE_HEADERS, lower) || PROXY_HEADER_PATTERN.test(lower) || SEC_HEADER_PATTERN.test(lower)) continue;
    // smithy writes this one with a special key: its own code canonicalises such a request.
    if (lower === '__proto__') return null;
    byLower.set(lower, name);
  }
  if (byLower.size === 0) return null;
  const lowers = [...byLower.keys()].sort();
  return {order: lowers.map((lower) => [byLower.get(lower) as string, lower] as const), prefixes: lowers.map((lower) => `${lower}:`), signed: lowers.join(';')};
}

/** smithy's canonical header value: line breaks to spaces, runs of spaces and tabs to one space, trimmed of one space each end. */
function canonicalValue(value: string): string {
  return /[\r\n\t]| {2}|^ | $/.test(value) ? value.replace(/[\r\n]/g, ' ').replace(/[ \t]+/g, ' ').replace(/^ | $/g, '') : value;
}

/** The signer's canonical path, remembered per path (the clients ask a few paths, one per cluster at most). */
const canonicalPaths = new Map<string, string>();
const CANONICAL_PATHS = 4_096;

function canonicalPathOf(signer: SignerInternals, path: string): string {
  // Only answers of the default escaping are shared between signers; a signer without it asks its own code.
  if ((signer as unknown as {uriEscapePath?: unknown}).uriEscapePath !== true) return signer.getCanonicalPath({path});
  let canonical = canonicalPaths.get(path);
  if (canonical === undefined) {
    canonical = signer.getCanonicalPath({path});
    if (canonicalPaths.size >= CANONICAL_PATHS) canonicalPaths.clear();
    canonicalPaths.set(path, canonical);
  }
  return canonical;
}

/**
 * Hex SHA-256 of small string bodies remembered: every source's first GetResources page sends the
 * same body. Bounded: cleared when full (later pages carry their own tokens and rarely repeat).
 */
const payloadHashes = new Map<string, string>();
const PAYLOAD_HASHES = 64;
const PAYLOAD_HASH_MAX_LENGTH = 256;

function payloadHashOf(body: string | Uint8Array): string {
  if (typeof body !== 'string' || body.length > PAYLOAD_HASH_MAX_LENGTH) return hash('sha256', body, 'hex');
  let digest = payloadHashes.get(body);
  if (digest === undefined) {
    digest = hash('sha256', body, 'hex');
    if (payloadHashes.size >= PAYLOAD_HASHES) payloadHashes.clear();
    payloadHashes.set(body, digest);
  }
  return digest;
}

/** A query without members, whose canonical form is the empty string (smithy's getCanonicalQuery of `{}`, without its arrays). */
function isEmptyQuery(query: SignableRequest['query'] | undefined): boolean {
  for (const key in query) if (Object.hasOwn(query, key)) return false;
  return true;
}

/** The pieces of the canonical request being built (signRequest fills and joins it without awaiting in between). */
const canonicalParts: string[] = [];

/** SHA-256 of an empty payload (smithy's constant for a request without a body). */
const EMPTY_PAYLOAD_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** The members of smithy's SignatureV4 used here (protected or private in its types, public at run time). */
interface SignerInternals {
  readonly service: string;
  readonly sha256: unknown;
  readonly applyChecksum: boolean;
  readonly credentialProvider: () => Promise<Credentials>;
  readonly regionProvider: () => Promise<string>;
  validateResolvedCredentials(credentials: unknown): void;
  formatDate(date: Date): {longDate: string; shortDate: string};
  createCanonicalRequest(request: SignableRequest, canonicalHeaders: Record<string, string>, payloadHash: string): string;
  getCanonicalHeaderList(headers: object): string;
  getCanonicalPath(request: {path: string}): string;
  getSigningKey: DeriveKey;
  sign(toSign: unknown, options?: unknown): Promise<unknown>;
}

/**
 * The SDK's SigV4 signer with two costs of every request removed; what it signs and how is the
 * same (test/clouds/aws-lean-signer.test.ts signs a table of requests with both and compares).
 *
 * - The key derivation (four HMACs, plus a fifth for the key of the SDK's own 50-entry cache,
 *   on every request) is looked up as described at `signingKeys` instead. With the clients' own
 *   SHA-256 a missing key is derived by `deriveSigningKey` (the same four HMACs in node:crypto);
 *   with any other hash, by the signer's own code.
 * - A header-signed request (every call the clients make) is canonicalised by smithy's own code
 *   (`prepareRequest`, `getCanonicalHeaders`, the signer's `createCanonicalRequest`), but the
 *   canonical request's hash and the signature are computed in one node:crypto call each, as hex:
 *   smithy's own way awaits four promises and turns each digest to hex one string at a time,
 *   the largest share of a steady organization call's garbage. Only with the clients' own
 *   SHA-256 (`NodeSha256`); any other hash, a streamed body, or signing options the clients
 *   never pass (signable / unsignable header sets) take the signer's whole way.
 */
function leanSigner(signer: SignatureV4): SignatureV4 {
  const target = signer as unknown as SignerInternals;
  const derive = target.getSigningKey.bind(signer);
  // As the signer does: the call's signing service, else its own. The cache is shared by every client.
  target.getSigningKey = async (credentials, region, shortDate, signingService) => {
    const service = signingService || target.service;
    const hit = rememberedKey(credentials, region, shortDate, service);
    // A fresh copy per call: the signature's HMAC may hold on to the key object it is given.
    if (hit !== undefined) return Buffer.from(hit, 'latin1');
    // A failed derivation is not remembered (it throws before the set).
    const key = target.sha256 === NodeSha256 ? deriveSigningKey(credentials.secretAccessKey, shortDate, region, service) : latin1Of(await derive(credentials, region, shortDate, service));
    rememberKey(credentials, region, shortDate, service, key);
    return Buffer.from(key, 'latin1');
  };
  /** The key signRequest signs with (its clients hash with NodeSha256): no promise, no Buffer, no KeyObject per call. */
  const signingKeyOf = (credentials: Credentials, region: string, shortDate: string, service: string): string => {
    let key = rememberedKey(credentials, region, shortDate, service);
    if (key === undefined) {
      key = deriveSigningKey(credentials.secretAccessKey, shortDate, region, service);
      rememberKey(credentials, region, shortDate, service, key);
    }
    return key;
  };

  const sign = target.sign.bind(signer);
  // The last signing second's formatted dates: one Date formatting per second, not per request.
  let dates: {second: number; longDate: string; shortDate: string} | undefined;
  const signRequest = async (requestToSign: SignableRequest, options: RequestSigningArguments): Promise<SignableRequest> => {
    const {signingDate = new Date(), signingRegion, signingService} = options;
    const credentials = await target.credentialProvider();
    target.validateResolvedCredentials(credentials);
    const region = signingRegion ?? (await target.regionProvider());
    const request = prepareRequest(requestToSign);
    const date = signingDate as Date;
    const second = Math.floor(date.getTime() / 1000);
    if (dates?.second !== second) dates = {second, ...target.formatDate(date)};
    const {longDate, shortDate} = dates;
    const scope = createScope(shortDate, region, signingService ?? target.service);
    request.headers[AMZ_DATE_HEADER] = longDate;
    if (credentials.sessionToken) request.headers[TOKEN_HEADER] = credentials.sessionToken;
    // smithy's payload hash: the header's value when set, its constant for no body, else the body's SHA-256.
    const {body} = request;
    const preset = hasHeader(SHA256_HEADER, request.headers);
    const payloadHash = preset ? await getPayloadHash(request, target.sha256 as never) : body === undefined || body === null ? EMPTY_PAYLOAD_SHA256 : payloadHashOf(body as string | Uint8Array);
    if (!preset && target.applyChecksum) request.headers[SHA256_HEADER] = payloadHash;
    const headers = request.headers;
    const plan = headerPlanOf(headers);
    let canonicalRequest: string;
    let signedHeaders: string;
    if (plan) {
      // smithy's canonical request (createCanonicalRequest over getCanonicalHeaders), without re-sorting the same names on every call.
      // Joined once from its parts: concatenated, its ~40 pieces were as many strings, then copied flat to be hashed.
      const parts = canonicalParts;
      parts.length = 0;
      parts.push(request.method, '\n', canonicalPathOf(target, request.path), '\n', isEmptyQuery(request.query) ? '' : getCanonicalQuery(request), '\n');
      const {order, prefixes} = plan;
      for (let i = 0; i < order.length; i++) parts.push(prefixes[i] as string, canonicalValue(headers[(order[i] as readonly [string, string])[0]] as string), '\n');
      parts.push('\n', plan.signed, '\n', payloadHash);
      canonicalRequest = parts.join('');
      parts.length = 0;
      signedHeaders = plan.signed;
    } else {
      const canonicalHeaders = getCanonicalHeaders(request);
      canonicalRequest = target.createCanonicalRequest(request, canonicalHeaders, payloadHash);
      signedHeaders = target.getCanonicalHeaderList(canonicalHeaders);
    }
    const stringToSign = `${ALGORITHM_IDENTIFIER}\n${longDate}\n${scope}\n${hash('sha256', canonicalRequest, 'hex')}`;
    const key = signingKeyOf(credentials, region, shortDate, signingService || target.service);
    // The key as a latin1 string: createHmac on raw key bytes runs two failing key-type checks
    // first (sha256.ts), and a KeyObject per call costs a native handle the collector finalises.
    const signature = createHmac('sha256', key, LATIN1).update(stringToSign).digest('hex');
    request.headers[AUTH_HEADER] = `${ALGORITHM_IDENTIFIER} Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
    return request;
  };
  target.sign = (toSign, options) => {
    const request = toSign as Partial<SignableRequest & {payload: unknown; message: unknown}> | string;
    const o = (options ?? {}) as RequestSigningArguments;
    const body = typeof request === 'object' ? request.body : undefined;
    // Only what smithy's sign hands to signRequest (a request, not a string, event or message), signed its common way.
    const common =
      typeof request === 'object' &&
      !(request.headers && request.payload) &&
      !request.message &&
      target.sha256 === NodeSha256 &&
      !o.signableHeaders &&
      !o.unsignableHeaders &&
      (o.signingDate === undefined || o.signingDate instanceof Date) &&
      (body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array);
    return common ? signRequest(request as SignableRequest, o) : sign(toSign, options);
  };
  return signer;
}

/** The signing key of (credentials, day, region, service) remembered, as a latin1 string (see `signingKeys`). */
function rememberedKey(credentials: Credentials, region: string, shortDate: string, service: string): string | undefined {
  const kept = signingKeys.get(credentials);
  return kept?.secret === credentials.secretAccessKey && kept.day === shortDate ? kept.keys.get(scopeName(region, service)) : undefined;
}

/** Remembers a derived key (a secret rotated under the same object, or another day, starts a new map). */
function rememberKey(credentials: Credentials, region: string, shortDate: string, service: string, key: string): void {
  let kept = signingKeys.get(credentials);
  if (kept?.secret !== credentials.secretAccessKey || kept.day !== shortDate) {
    kept = {secret: credentials.secretAccessKey, day: shortDate, keys: new Map()};
    signingKeys.set(credentials, kept);
  }
  kept.keys.set(scopeName(region, service), key);
}

/** The shared name of (region, service) (see `scopeNames`). */
function scopeName(region: string, service: string): string {
  let byRegion = scopeNames.get(service);
  if (byRegion === undefined) {
    if (scopeNames.size >= SCOPE_SERVICES) scopeNames.clear();
    byRegion = new Map();
    scopeNames.set(service, byRegion);
  }
  let name = byRegion.get(region);
  if (name === undefined) {
    if (byRegion.size >= SCOPE_NAMES) byRegion.clear();
    name = `${region}\n${service}`;
    byRegion.set(region, name);
  }
  return name;
}

const latin1Of = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');

/** createHmac's option for a key given as a latin1 string of its bytes. */
const LATIN1 = {encoding: 'latin1'} as const;

/**
 * SigV4's signing key (kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, day), region), service),
 * "aws4_request")), what smithy's `getSigningKey` computes with the clients' SHA-256, in four
 * node:crypto calls. smithy's way also builds a cache key (a fifth HMAC and a string holding the
 * session token, ~1 KB) for a 50-entry cache that an organization's ~34,000 keys a day always miss,
 * and each step through sha256.ts passes its bounded memo, which they overflow as well: a second
 * cycle derives every tagging key (~17,000) and that garbage made its young collections twice as
 * slow.
 * Keys are latin1 strings of their bytes: createHmac takes them without the failing key-type
 * checks raw bytes run (sha256.ts) and without a KeyObject per HMAC.
 */
function deriveSigningKey(secret: string, shortDate: string, region: string, service: string): string {
  // The secret is UTF-8, as smithy encodes it; each derived key a latin1 ('binary') string of its bytes.
  let key = createHmac('sha256', `AWS4${secret}`).update(shortDate, 'utf8').digest('binary');
  for (const step of [region, service, KEY_TYPE_IDENTIFIER]) key = createHmac('sha256', key, LATIN1).update(step, 'utf8').digest('binary');
  return key;
}

/** Regions per service whose names are kept for sharing (every region of every partition, with room). */
const SCOPE_NAMES = 4_096;
/** Services whose names are kept for sharing (the clients sign for a handful). */
const SCOPE_SERVICES = 64;

/** The SDK's user-agent middleware for the first request; its two header values for the later ones. */
function memoizedUserAgent(config: object): Middleware {
  const sdk = userAgentMiddleware(config as never) as unknown as Middleware;
  let remembered: {userAgent: string; amzUserAgent: string | undefined} | undefined;
  return (next, context) => async (args) => {
    const headers = (args.request as {headers?: Record<string, string>} | undefined)?.headers;
    if (!headers) return next(args);
    if (remembered) {
      headers[USER_AGENT] = remembered.userAgent;
      if (remembered.amzUserAgent !== undefined) headers[X_AMZ_USER_AGENT] = remembered.amzUserAgent;
      return next(args);
    }
    return sdk(async (built) => {
      const set = (built.request as {headers?: Record<string, string>} | undefined)?.headers;
      const userAgent = set?.[USER_AGENT];
      if (userAgent !== undefined) remembered ??= {userAgent, amzUserAgent: set?.[X_AMZ_USER_AGENT]};
      return next(built);
    }, context)(args);
  };
}
