/**
 * AWS credentials for signing EKS tokens: the SDK's default chain (env, SSO, profile, web
 * identity / IRSA, container / pod identity, instance profile), then optionally a role per
 * matcher assumed with that chain's credentials. Assumed-role credentials are cached per
 * (role, external id) until five minutes before they expire; the base chain is memoized by
 * the SDK itself. Every role is assumed through one STS client per region (the base
 * credentials sign every AssumeRole): the SDK's `fromTemporaryCredentials` keeps a client per
 * role, ~21 KB each, which an organization of 1,000 accounts held a thousand times.
 */
import {AssumeRoleCommand, STSClient} from '@aws-sdk/client-sts';
import {fromNodeProviderChain} from '@aws-sdk/credential-providers';
import {registerSecret, retireSecret} from '../observability/redact.ts';
import {systemClock, type Clock} from '../core/clock.ts';
import type {AwsCredentials} from './eks-token.ts';
import {configuredStsEndpoint, partitionOf, type Env} from './sts-endpoint.ts';
import {halfLife, TokenCache} from './token-cache.ts';
import {errorMessage} from '../core/errors.ts';

/** Resolves credentials; call it per use, it caches. */
export type AwsCredentialProvider = () => Promise<AwsCredentials>;

/** Which identity to sign as. */
export interface AwsIdentityOptions {
  /** Region whose regional STS endpoint AssumeRole calls. */
  readonly region: string;
  readonly roleArn?: string;
  readonly externalId?: string;
}

/** The SDK's logger shape; the SDK warns through it (e.g. about conflicting credential sources). */
export interface SdkLogger {
  debug(...content: unknown[]): void;
  info(...content: unknown[]): void;
  warn(...content: unknown[]): void;
  error(...content: unknown[]): void;
}

/** Options of an AwsCredentialProviders. */
export interface AwsCredentialProvidersOptions {
  /**
   * Read for `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL`, passed to the AssumeRole client.
   * The SDK's chain itself reads `process.env`. Default `process.env`.
   */
  readonly env?: Env;
  readonly clock?: Clock;
  /** Base credentials; default the SDK's node provider chain. */
  readonly base?: AwsCredentialProvider;
  readonly logger?: SdkLogger;
}

/** Getting credentials failed; the message says which identity and why, never a secret. */
export class AwsCredentialError extends Error {
  override readonly name = 'AwsCredentialError';
  /** AWS error code (`AccessDenied`, ...) or `CredentialsProviderError` when none were found. */
  readonly code: string;
  readonly roleArn: string | undefined;

  constructor(message: string, code: string, roleArn: string | undefined, options?: {cause?: unknown}) {
    super(message, options);
    this.code = code;
    this.roleArn = roleArn;
  }
}

/** Name of the assumed-role session, visible in CloudTrail and in the cluster's audit log. */
export const ROLE_SESSION_NAME = 'kube-discovery';
// Renew assumed-role credentials this long before they expire, like the SDK does for its own.
// The life STS gives assumed-role credentials when no DurationSeconds is asked (AssumeRole's default).
const ASSUME_ROLE_DURATION_MS = 3_600_000;
const CREDENTIAL_REFRESH_WINDOW_MS = 5 * 60_000;
const NO_CREDENTIALS_HINT =
  'set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an IAM role (IRSA, pod identity, instance profile)';

interface CachedCredentials {
  readonly credentials: AwsCredentials;
  readonly expiresAt: Date;
}

/** Credential providers by identity, each built once and reused. */
export class AwsCredentialProviders {
  readonly #env: Env;
  readonly #clock: Clock;
  readonly #logger: SdkLogger | undefined;
  readonly #base: AwsCredentialProvider;
  readonly #roleCredentials: TokenCache<CachedCredentials>;
  readonly #providers = new Map<string, AwsCredentialProvider>();
  /** Per role: the secrets of the current generation and of the one before it (still possibly in flight). */
  readonly #current = new Map<string, readonly (string | undefined)[]>();
  readonly #previous = new Map<string, readonly (string | undefined)[]>();
  /** AssumeRole clients by region, shared by every role. */
  readonly #stsClients = new Map<string, STSClient>();

  constructor(options: AwsCredentialProvidersOptions = {}) {
    this.#env = options.env ?? process.env;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger;
    const base = options.base ?? fromNodeProviderChain(this.#logger ? {logger: this.#logger} : {});
    this.#base = async () => {
      try {
        const credentials = await base();
        // Held by the process: removed by value from every message that could echo it.
        registerSecret(credentials.secretAccessKey);
        registerSecret(credentials.sessionToken);
        return credentials;
      } catch (error) {
        throw new AwsCredentialError(`no AWS credentials found: ${errorMessage(error)}; ${NO_CREDENTIALS_HINT}`, 'CredentialsProviderError', undefined, {cause: error});
      }
    };
    this.#roleCredentials = new TokenCache<CachedCredentials>({
      clock: this.#clock,
      renewAt: (mintedAt, expiresAt) => Math.max(halfLife(mintedAt, expiresAt), expiresAt - CREDENTIAL_REFRESH_WINDOW_MS),
    });
  }

  /** The provider for an identity: the base chain, or the role assumed with it. */
  provider(identity: AwsIdentityOptions): AwsCredentialProvider {
    const {region, roleArn, externalId} = identity;
    if (!roleArn) return this.#base;
    partitionOf(region); // a typo'd region fails here, not as an opaque network error later
    // Credentials are shared per (role, external id); the STS client is per region so an
    // AssumeRole for a region's clusters goes to that region's STS endpoint.
    const cacheKey = `${roleArn}|${externalId ?? ''}`;
    const providerKey = `${cacheKey}|${region}`;
    let provider = this.#providers.get(providerKey);
    if (!provider) {
      const params = {RoleArn: roleArn, RoleSessionName: ROLE_SESSION_NAME, ...(externalId ? {ExternalId: externalId} : {})};
      const assume = async (): Promise<AwsCredentials> => {
        const {Credentials: out, AssumedRoleUser: user} = await this.#stsClient(region).send(new AssumeRoleCommand(params));
        // Malformed is not a credential: an answer without keys fails the mint (nothing cached).
        if (!out?.AccessKeyId || !out.SecretAccessKey) {
          throw Object.assign(new Error(`STS answered AssumeRole for ${roleArn} without credentials`), {name: 'InvalidResponse'});
        }
        // Another role's answer (a proxy or cache mixing answers up) would sign this account's
        // listings as another account: a listing without this account's clusters, which deletes them.
        if (!assumedRoleMatches(roleArn, user?.Arn)) {
          throw Object.assign(new Error(`STS answered AssumeRole for ${roleArn} with credentials of ${typeof user?.Arn === 'string' ? user.Arn.slice(0, 200) : 'no AssumedRoleUser'}`), {
            name: 'InvalidResponse',
          });
        }
        return {
          accessKeyId: out.AccessKeyId,
          secretAccessKey: out.SecretAccessKey,
          ...(out.SessionToken ? {sessionToken: out.SessionToken} : {}),
          ...(out.Expiration ? {expiration: out.Expiration} : {}),
        };
      };
      const mint = async (): Promise<CachedCredentials> => {
        try {
          const credentials = await assume();
          // AssumeRole always reports an expiry; an hour is its default should one be missing. No
          // DurationSeconds is asked, so STS grants at most that hour: a later Expiration would keep
          // credentials past their end (every call refused), one already past would mint again for
          // every signed call. Checked before the secrets are registered: a refused renewal must not
          // retire the secrets of the credentials still served.
          const now = this.#clock.now();
          const reported = credentials.expiration?.getTime();
          if (reported !== undefined && !(reported > now)) {
            throw Object.assign(new Error(`STS answered AssumeRole for ${roleArn} with credentials that expired at ${credentials.expiration?.toISOString() ?? '?'}`), {
              name: 'InvalidResponse',
            });
          }
          registerSecret(credentials.secretAccessKey);
          registerSecret(credentials.sessionToken);
          this.#retireOlder(cacheKey, [credentials.secretAccessKey, credentials.sessionToken]);
          const expiresAt = new Date(Math.min(reported ?? Infinity, now + ASSUME_ROLE_DURATION_MS));
          return {credentials: {...credentials, expiration: expiresAt}, expiresAt};
        } catch (error) {
          throw assumeRoleError(roleArn, error);
        }
      };
      provider = async () => (await this.#roleCredentials.get(cacheKey, mint)).credentials;
      this.#providers.set(providerKey, provider);
    }
    return provider;
  }

  /**
   * Keeps the redaction set the size of the live credentials: a renewal retires the generation
   * before the one it replaces (that one may still sign requests in flight, so it stays).
   */
  #retireOlder(cacheKey: string, minted: readonly (string | undefined)[]): void {
    const current = this.#current.get(cacheKey);
    if (current) for (const value of this.#previous.get(cacheKey) ?? []) if (!minted.includes(value)) retireSecret(value);
    if (current) this.#previous.set(cacheKey, current);
    this.#current.set(cacheKey, minted);
  }

  /** The region's AssumeRole client, signed with the base credentials. */
  #stsClient(region: string): STSClient {
    let client = this.#stsClients.get(region);
    if (!client) {
      const endpoint = configuredStsEndpoint(this.#env);
      client = new STSClient({
        region,
        credentials: this.#base,
        // A hung STS must fail the AssumeRole, not stall every source of the role (see awsRequestHandler).
        requestHandler: {connectionTimeout: 5_000, requestTimeout: 20_000, throwOnRequestTimeout: true, socketTimeout: 20_000},
        // The SDK reads AWS_ENDPOINT_URL_STS from process.env by itself; passing it from our
        // env as well keeps an injected environment (tests, CLI) effective.
        ...(endpoint ? {endpoint: endpoint.href} : {}),
        ...(this.#logger ? {logger: this.#logger} : {}),
      });
      this.#stsClients.set(region, client);
    }
    return client;
  }
}

// One registry per environment object, so callers passing the same env share cached credentials.
const registries = new WeakMap<Env, AwsCredentialProviders>();

/**
 * The credential provider for an identity, from a process-wide registry per `env` (default
 * `process.env`), so every caller shares the cached assumed-role credentials.
 */
export function awsCredentialProvider(options: AwsIdentityOptions & {readonly env?: Env}): AwsCredentialProvider {
  const env = options.env ?? process.env;
  let registry = registries.get(env);
  if (!registry) {
    registry = new AwsCredentialProviders({env});
    registries.set(env, registry);
  }
  return registry.provider(options);
}

function assumeRoleError(roleArn: string, error: unknown): AwsCredentialError {
  if (error instanceof AwsCredentialError) {
    return new AwsCredentialError(`cannot assume role ${roleArn}: ${error.message}`, error.code, roleArn, {cause: error});
  }
  const code = codeOf(error);
  if (code === 'CredentialsProviderError') {
    return new AwsCredentialError(`cannot assume role ${roleArn}: no AWS credentials found: ${errorMessage(error)}; ${NO_CREDENTIALS_HINT}`, code, roleArn, {cause: error});
  }
  return new AwsCredentialError(`cannot assume role ${roleArn}: ${code}: ${errorMessage(error)}`, code, roleArn, {cause: error});
}

/**
 * Whether an AssumeRole answer's `AssumedRoleUser.Arn` (`arn:<partition>:sts::<account>:assumed-role/<name>/<session>`)
 * is a session of the role asked for (`arn:<partition>:iam::<account>:role/<path/><name>`): same partition, account
 * and role name, ignoring case (a role's path is not in its sessions' ARNs).
 */
export function assumedRoleMatches(roleArn: string, assumedArn: unknown): boolean {
  if (typeof assumedArn !== 'string') return false;
  const role = /^arn:([\w-]+):iam::(\d{12}):role\/(?:.*\/)?([^/]+)$/.exec(roleArn);
  const session = /^arn:([\w-]+):sts::(\d{12}):assumed-role\/([^/]+)\/[^/]+$/.exec(assumedArn);
  if (!role || !session) return false;
  // IAM role names are unique without regard to case; a session's ARN spells the role as IAM stored it.
  return role[1] === session[1] && role[2] === session[2] && role[3]?.toLowerCase() === session[3]?.toLowerCase();
}

/** The AWS error code: query-protocol errors carry it as `Code`, SDK errors as `name`. */
function codeOf(error: unknown): string {
  if (!(error instanceof Error)) return 'Error';
  const code = (error as {Code?: unknown}).Code;
  return typeof code === 'string' && code ? code : error.name;
}
