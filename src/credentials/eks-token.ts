/**
 * EKS bearer tokens: a presigned STS GetCallerIdentity URL carrying the signed header
 * `x-k8s-aws-id: <cluster>`, which the cluster's authenticator replays to learn who we are.
 * Signed with @smithy/signature-v4 directly; the URL is serialised in botocore's parameter
 * order so our tokens are byte-identical to `aws eks get-token`'s.
 */
import {HttpRequest} from '@smithy/protocol-http';
import {SignatureV4} from '@smithy/signature-v4';
import {systemClock, type Clock} from '../core/clock.ts';
import {Sha256} from './sha256.ts';
import {stsEndpoint, type Env} from './sts-endpoint.ts';

/** The static credentials a token is signed with (what an SDK credential provider resolves to). */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  /** When the credentials stop working; the token's reported expiry never goes past it. */
  readonly expiration?: Date;
}

/** A minted token and when to stop using it. */
export interface EksToken {
  readonly token: string;
  readonly expiresAt: Date;
  readonly region: string;
  readonly clusterName: string;
}

/** Inputs of one mint. */
export interface MintEksTokenOptions {
  readonly clusterName: string;
  readonly region: string;
  readonly credentials: AwsCredentials;
  /** Signing time comes from here; tests pass a FakeClock. */
  readonly clock?: Clock;
  /** Read for `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL` only; defaults to none. */
  readonly env?: Env;
}

/** Prefix every EKS bearer token carries. */
export const EKS_TOKEN_PREFIX = 'k8s-aws-v1.';
/** Header naming the cluster; signed so a token for one cluster is refused by another. */
export const CLUSTER_ID_HEADER = 'x-k8s-aws-id';
/** Longest token the EKS authenticator accepts. */
export const MAX_TOKEN_BYTES = 4096;

// The presigned URL lives 60 s (the authenticator checks 15 min from X-Amz-Date regardless);
// we report expiry one minute before the authenticator's limit to absorb clock skew.
const PRESIGN_EXPIRES_SECONDS = 60;
const TOKEN_LIFETIME_MS = 14 * 60_000;

// botocore's order; the authenticator doesn't care, but byte-identical tokens make the
// reference vectors checkable and diffs against `aws eks get-token` meaningful.
const QUERY_ORDER = [
  'Action',
  'Version',
  'X-Amz-Algorithm',
  'X-Amz-Credential',
  'X-Amz-Date',
  'X-Amz-Expires',
  'X-Amz-SignedHeaders',
  'X-Amz-Security-Token',
  'X-Amz-Signature',
] as const;

/** Mints an EKS bearer token for `clusterName` in `region`. */
export async function mintEksToken(options: MintEksTokenOptions): Promise<EksToken> {
  const {clusterName, region, credentials, clock = systemClock, env = {}} = options;
  if (!clusterName) throw new TypeError('expected a non-empty cluster name, got ""');
  const endpoint = stsEndpoint(region, env);
  // SigV4 dates have second precision; expiry counts from the second that was signed.
  const signingMs = Math.floor(clock.now() / 1000) * 1000;

  const request = new HttpRequest({
    method: 'GET',
    protocol: endpoint.protocol,
    hostname: endpoint.hostname,
    ...(endpoint.port ? {port: Number(endpoint.port)} : {}),
    path: endpoint.pathname,
    query: {Action: 'GetCallerIdentity', Version: '2011-06-15'},
    headers: {host: endpoint.host, [CLUSTER_ID_HEADER]: clusterName},
  });
  const signer = new SignatureV4({credentials, region, service: 'sts', sha256: Sha256});
  const signed = await signer.presign(request, {
    expiresIn: PRESIGN_EXPIRES_SECONDS,
    signingDate: new Date(signingMs),
    // Keep the cluster header a header: the authenticator requires it among the signed headers.
    unhoistableHeaders: new Set([CLUSTER_ID_HEADER]),
  });

  const url = `${endpoint.protocol}//${endpoint.host}${endpoint.pathname}?${serialiseQuery(signed.query ?? {})}`;
  const token = EKS_TOKEN_PREFIX + Buffer.from(url, 'utf8').toString('base64url');
  if (token.length > MAX_TOKEN_BYTES) {
    throw new Error(`EKS token for cluster ${clusterName} is ${token.length} bytes, expected at most ${MAX_TOKEN_BYTES} (session token too long?)`);
  }
  const tokenExpiry = signingMs + TOKEN_LIFETIME_MS;
  const credentialExpiry = credentials.expiration?.getTime() ?? Number.POSITIVE_INFINITY;
  return {token, expiresAt: new Date(Math.min(tokenExpiry, credentialExpiry)), region, clusterName};
}

/** Query string in botocore's order, percent-encoded like SigV4's canonical query. */
function serialiseQuery(query: Readonly<Record<string, string | string[] | null>>): string {
  const unexpected = Object.keys(query).filter((k) => !(QUERY_ORDER as readonly string[]).includes(k));
  if (unexpected.length > 0) {
    // A signer change adding parameters must not silently produce tokens the authenticator refuses.
    throw new Error(`unexpected presign query parameters ${unexpected.join(', ')}; expected only ${QUERY_ORDER.join(', ')}`);
  }
  const parts: string[] = [];
  for (const key of QUERY_ORDER) {
    const value = query[key];
    if (typeof value === 'string') parts.push(`${key}=${uriEscape(value)}`);
  }
  return parts.join('&');
}

/** RFC 3986 escaping, as SigV4 requires (encodeURIComponent leaves !'()* alone). */
function uriEscape(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
