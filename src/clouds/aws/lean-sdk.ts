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
  add(middleware: Middleware, options: {step: 'build'; priority: 'low'; name: string; tags: string[]; override: boolean}): void;
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
  return client;
}

interface Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}
type DeriveKey = (credentials: Credentials, region: string, shortDate: string, service?: string) => Promise<Uint8Array>;

/** Signing keys remembered (a few per (account, region, service) in flight; ~200 bytes each). */
const SIGNING_KEYS = 4_096;
const signingKeys = new Map<string, {readonly secret: string; readonly key: Promise<Uint8Array>}>();

/**
 * The signer's key derivation (four HMACs, plus a fifth for the key of the SDK's own 50-entry
 * cache, on every request) looked up by (day, region, service, access key id, session token)
 * instead; an entry is used only for the same secret key, so a rotated secret derives anew.
 * The derivation itself is still the signer's own.
 */
function withSigningKeyCache(signer: SignatureV4): SignatureV4 {
  const target = signer as unknown as {getSigningKey: DeriveKey; readonly service: string};
  const derive = target.getSigningKey.bind(signer);
  target.getSigningKey = (credentials, region, shortDate, signingService) => {
    // As the signer does: the call's signing service, else its own. The cache is shared by every client.
    const service = signingService || target.service;
    const name = `${shortDate}\n${region}\n${service}\n${credentials.accessKeyId}\n${credentials.sessionToken ?? ''}`;
    const hit = signingKeys.get(name);
    if (hit && hit.secret === credentials.secretAccessKey) return hit.key;
    const key = derive(credentials, region, shortDate, service);
    // A failed derivation is not remembered.
    key.catch(() => {
      if (signingKeys.get(name)?.key === key) signingKeys.delete(name);
    });
    if (signingKeys.size >= SIGNING_KEYS) signingKeys.delete(signingKeys.keys().next().value as string);
    signingKeys.set(name, {secret: credentials.secretAccessKey, key});
    return key;
  };
  return signer;
}

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
