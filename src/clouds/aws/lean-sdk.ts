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
import {userAgentMiddleware} from '@aws-sdk/core/client';
import {SignatureV4} from '@smithy/signature-v4';
import {invalidResponse} from './errors.ts';

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

/** Applies the three changes of the file comment to a constructed client; returns it. */
export function leanSdkClient<C extends LeanableClient>(client: C): C {
  const config = client.config as SigV4Config;
  const stack = client.middlewareStack as unknown as StackLike;
  // The SDK's resolver wrapped our credentials (memoized, attributed): the shared signer reads
  // them the same way the per-call signers did, once per request.
  let signer: SignatureV4 | undefined;
  config.signer = () => {
    signer ??= withSigningKeyCache(
      new SignatureV4({
        credentials: config.credentials as never,
        region: config.region as never,
        service: config.signingName ?? config.defaultSigningName ?? config.serviceId ?? '',
        sha256: config.sha256 as never,
        uriEscapePath: config.signingEscapePath ?? true,
        ...(config.applyChecksum === undefined ? {} : {applyChecksum: config.applyChecksum}),
      }),
    );
    return Promise.resolve(signer);
  };
  stack.remove('loggerMiddleware');
  stack.remove('recursionDetectionMiddleware');
  stack.add(memoizedUserAgent(config), {step: 'build', priority: 'low', name: 'getUserAgentMiddleware', tags: ['SET_USER_AGENT', 'USER_AGENT'], override: true});
  // In finalizeRequest, so the short path of lean-read.ts (which keeps only that step) has it too.
  stack.add(refuseErrorTypeOn2xx, {step: 'finalizeRequest', priority: 'low', name: 'kubeDiscoveryErrorTypeOn2xx', tags: [], override: true});
  return client;
}

/**
 * A 2xx answer that names an error type (`x-amzn-ErrorType`) contradicts itself: AWS sends the
 * header only with errors, so the body is not the listing it looks like. The SDK reads it as a
 * success (`{"clusters":[]}` would be an empty region); it is a malformed answer instead.
 */
const refuseErrorTypeOn2xx: Middleware = (next) => async (args) => {
  const result = (await next(args)) as {response?: {statusCode?: unknown; headers?: Record<string, string | undefined>}};
  const status = result.response?.statusCode;
  const type = result.response?.headers?.['x-amzn-errortype'];
  if (typeof status === 'number' && status >= 200 && status < 300 && typeof type === 'string') {
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
const signingKeys = new WeakMap<object, {secret: string; readonly keys: Map<string, string>}>();
/** One string per (day, region, service), shared by every account's map. */
const scopeNames = new Map<string, string>();

/**
 * The signer's key derivation (four HMACs, plus a fifth for the key of the SDK's own 50-entry
 * cache, on every request) looked up as above instead. The derivation itself is still the
 * signer's own.
 */
function withSigningKeyCache(signer: SignatureV4): SignatureV4 {
  const target = signer as unknown as {getSigningKey: DeriveKey; readonly service: string};
  const derive = target.getSigningKey.bind(signer);
  target.getSigningKey = async (credentials, region, shortDate, signingService) => {
    // As the signer does: the call's signing service, else its own. The cache is shared by every client.
    const service = signingService || target.service;
    let kept = signingKeys.get(credentials);
    if (kept?.secret !== credentials.secretAccessKey) {
      kept = {secret: credentials.secretAccessKey, keys: new Map()};
      signingKeys.set(credentials, kept);
    }
    const name = `${shortDate}\n${region}\n${service}`;
    const hit = kept.keys.get(name);
    // A fresh copy per call: the signature's HMAC may hold on to the key object it is given.
    if (hit !== undefined) return Buffer.from(hit, 'latin1');
    // A failed derivation is not remembered (it throws before the set).
    const key = await derive(credentials, region, shortDate, service);
    // Keys of another day are dropped when a new day's first key is derived.
    for (const old of kept.keys.keys()) if (!old.startsWith(shortDate)) kept.keys.delete(old);
    let shared = scopeNames.get(name);
    if (shared === undefined) {
      if (scopeNames.size >= SCOPE_NAMES) scopeNames.clear();
      scopeNames.set(name, name);
      shared = name;
    }
    kept.keys.set(shared, Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('latin1'));
    return key;
  };
  return signer;
}

/** Distinct (day, region, service) names kept for sharing: a few days of every region and service. */
const SCOPE_NAMES = 4_096;

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
