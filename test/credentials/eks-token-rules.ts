/**
 * A local EKS token validator implementing the verifier rules of
 * /work/shared/vectors/eks-token.json, plus the signature check STS does when the
 * authenticator replays the URL with its own `x-k8s-aws-id`. Written with node:crypto only,
 * so it checks our smithy-based signer against an independent SigV4 implementation.
 */
import {createHash, createHmac} from 'node:crypto';

/** Outcome of validating a token. */
export type TokenVerdict = {readonly ok: true; readonly accessKeyId: string; readonly region: string} | {readonly ok: false; readonly reason: string};

/** What the validator knows: the cluster it guards, the time, and the secret of each access key. */
export interface VerifyOptions {
  readonly clusterId: string;
  readonly now: number;
  readonly secrets: Readonly<Record<string, string>>;
}

const ALLOWED_KEYS = [
  'action',
  'version',
  'x-amz-algorithm',
  'x-amz-credential',
  'x-amz-date',
  'x-amz-expires',
  'x-amz-security-token',
  'x-amz-signature',
  'x-amz-signedheaders',
];
const STS_HOST = /^sts(-fips)?\.([a-z0-9-]+)\.(amazonaws\.com|amazonaws\.com\.cn|api\.aws|c2s\.ic\.gov|sc2s\.sgov\.gov)$/;

/** Validates `token` as the EKS authenticator and STS would. */
export function verifyEksTokenRules(token: string, options: VerifyOptions): TokenVerdict {
  const fail = (reason: string): TokenVerdict => ({ok: false, reason});
  if (Buffer.byteLength(token) > 4096) return fail('token longer than 4096 bytes');
  if (!token.startsWith('k8s-aws-v1.')) return fail('missing k8s-aws-v1. prefix');
  const body = token.slice('k8s-aws-v1.'.length);
  if (!/^[A-Za-z0-9_-]+$/.test(body)) return fail('not base64url without padding');
  const url = new URL(Buffer.from(body, 'base64url').toString('utf8'));
  if (url.protocol !== 'https:') return fail('not https');
  const host = STS_HOST.exec(url.hostname);
  if (!host && url.hostname !== 'sts.amazonaws.com') return fail(`host ${url.hostname} is not an STS endpoint`);
  if (url.pathname !== '/') return fail('path is not /');

  const pairs = url.search
    .slice(1)
    .split('&')
    .map((p) => p.split('=').map(decodeURIComponent) as [string, string]);
  const seen = new Set<string>();
  for (const [key] of pairs) {
    const lower = key.toLowerCase();
    if (!ALLOWED_KEYS.includes(lower)) return fail(`unexpected query key ${key}`);
    if (seen.has(lower)) return fail(`query key ${key} repeated`);
    seen.add(lower);
  }
  const get = (name: string): string | undefined => pairs.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  if (get('Action') !== 'GetCallerIdentity') return fail('Action is not GetCallerIdentity');
  const signedHeaders = get('X-Amz-SignedHeaders') ?? '';
  if (!signedHeaders.split(';').includes('x-k8s-aws-id')) return fail('x-k8s-aws-id is not a signed header');
  const expires = Number(get('X-Amz-Expires'));
  if (!Number.isInteger(expires) || expires < 0 || expires > 900) return fail(`X-Amz-Expires ${get('X-Amz-Expires')} not in [0, 900]`);
  const amzDate = get('X-Amz-Date') ?? '';
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!m) return fail('bad X-Amz-Date');
  const signedAt = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
  if (options.now > signedAt + 15 * 60_000) return fail('expired: older than 15 minutes');

  const [accessKeyId, date, region, service, terminator] = (get('X-Amz-Credential') ?? '').split('/');
  if (!accessKeyId || !date || !region || service !== 'sts' || terminator !== 'aws4_request') return fail('bad credential scope');
  if (url.hostname === 'sts.amazonaws.com' ? region !== 'us-east-1' : host?.[2] !== region) return fail(`scope region ${region} does not match host`);
  const secret = options.secrets[accessKeyId];
  if (secret === undefined) return fail(`unknown access key ${accessKeyId}`);

  // Replay as the authenticator does: same URL, with *its* cluster id in the header.
  const headerValues: Record<string, string> = {host: url.host, 'x-k8s-aws-id': options.clusterId};
  const canonicalQuery = pairs
    .filter(([k]) => k !== 'X-Amz-Signature')
    .map(([k, v]) => [escape(k), escape(v)])
    .sort(([a], [b]) => (a! < b! ? -1 : a! > b! ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const names = signedHeaders.split(';');
  const canonicalHeaders = names.map((n) => `${n}:${headerValues[n] ?? ''}\n`).join('');
  const canonicalRequest = ['GET', '/', canonicalQuery, canonicalHeaders, signedHeaders, sha256('')].join('\n');
  const scope = `${date}/${region}/sts/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonicalRequest)].join('\n');
  let key: Buffer = hmac(`AWS4${secret}`, date);
  for (const part of [region, 'sts', 'aws4_request']) key = hmac(key, part);
  const expected = createHmac('sha256', key).update(stringToSign).digest('hex');
  if (expected !== get('X-Amz-Signature')) return fail('signature does not match (another cluster, or tampered)');
  return {ok: true, accessKeyId, region};
}

function escape(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function hmac(key: string | Buffer, text: string): Buffer {
  return createHmac('sha256', key).update(text).digest();
}
