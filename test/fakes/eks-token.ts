/**
 * Verifies an EKS bearer token the way aws-iam-authenticator's server does, against a
 * FakeAwsWorld instead of calling STS: used by the fake Kubernetes API server. A token is
 * `k8s-aws-v1.` + base64url (no padding) of a presigned STS GetCallerIdentity URL whose
 * signed header `x-k8s-aws-id` names the cluster (rules: ../../../shared/vectors/eks-token.json).
 */
import {parseQuery, verifyPresigned} from './aws-sigv4.ts';
import type {FakeAwsWorld} from './aws-world.ts';

/** Outcome of `verifyEksToken`; `reason` says which rule failed, never the token. */
export type EksTokenVerdict =
  | {
      readonly ok: true;
      /** Caller ARN as STS reports it (`...:assumed-role/<role>/<session>` or a user ARN). */
      readonly arn: string;
      /** The ARN access entries and aws-auth map: the role ARN for an assumed role, else `arn`. */
      readonly principalArn: string;
      readonly account: string;
      readonly accessKeyId: string;
      readonly userId: string;
    }
  | {readonly ok: false; readonly reason: string};

/** Prefix of every EKS token. */
export const EKS_TOKEN_PREFIX = 'k8s-aws-v1.';

const MAX_TOKEN_BYTES = 4096;
const ALLOWED_KEYS = new Set(
  ['Action', 'Version', 'X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Expires', 'X-Amz-Security-Token', 'X-Amz-Signature', 'X-Amz-SignedHeaders'].map(
    (k) => k.toLowerCase(),
  ),
);

/** Region an STS hostname serves, or undefined when it is not an STS endpoint of its partition. */
export function stsHostRegion(host: string): string | undefined {
  if (host === 'sts.amazonaws.com') return 'us-east-1';
  const m = /^sts(?:-fips)?\.([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d)\.(amazonaws\.com|amazonaws\.com\.cn|api\.aws|api\.amazonwebservices\.com\.cn)$/.exec(host);
  if (!m?.[1] || !m[2]) return undefined;
  const chinaRegion = m[1].startsWith('cn-');
  const chinaDomain = m[2].endsWith('.cn');
  return chinaRegion === chinaDomain ? m[1] : undefined;
}

/** `arn:aws:sts::A:assumed-role/R/S` becomes `arn:aws:iam::A:role/R`; other ARNs are kept. */
export function canonicalPrincipalArn(arn: string): string {
  const m = /^arn:([\w-]+):sts::(\d{12}):assumed-role\/([^/]+)\/[^/]+$/.exec(arn);
  return m ? `arn:${m[1]}:iam::${m[2]}:role/${m[3]}` : arn;
}

/** Checks an EKS bearer token for `clusterName` at `now` (epoch ms, default the world's clock). */
export async function verifyEksToken(
  world: FakeAwsWorld,
  token: string,
  options: {readonly clusterName: string; readonly now?: number},
): Promise<EksTokenVerdict> {
  const no = (reason: string): EksTokenVerdict => ({ok: false, reason});
  if (Buffer.byteLength(token) > MAX_TOKEN_BYTES) return no(`token is longer than ${MAX_TOKEN_BYTES} bytes`);
  if (!token.startsWith(EKS_TOKEN_PREFIX)) return no(`token does not start with ${EKS_TOKEN_PREFIX}`);
  const encoded = token.slice(EKS_TOKEN_PREFIX.length);
  if (!/^[A-Za-z0-9_-]+$/.test(encoded)) return no('token body is not base64url without padding');
  let url: URL;
  const raw = Buffer.from(encoded, 'base64url').toString('utf8');
  try {
    url = new URL(raw);
  } catch {
    return no('token body is not a URL');
  }
  if (url.protocol !== 'https:') return no(`presigned URL must use https, got ${url.protocol}`);
  const hostRegion = stsHostRegion(url.host);
  if (hostRegion === undefined) return no(`presigned URL host ${url.host} is not an STS endpoint`);
  if (url.pathname !== '/' || !raw.startsWith(`https://${url.host}/?`)) return no(`presigned URL path must be '/', got ${url.pathname}`);

  const rawQuery = url.search.slice(1);
  const query = parseQuery(rawQuery);
  const seen = new Set<string>();
  for (const [key] of query) {
    const k = key.toLowerCase();
    if (!ALLOWED_KEYS.has(k)) return no(`query parameter ${key} is not allowed`);
    if (seen.has(k)) return no(`query parameter ${key} appears more than once`);
    seen.add(k);
  }
  const get = (name: string): string | undefined => query.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  if (get('Action') !== 'GetCallerIdentity') return no(`Action must be GetCallerIdentity, got ${get('Action') ?? '(none)'}`);
  const signedHeaders = (get('X-Amz-SignedHeaders') ?? '').split(';');
  if (!signedHeaders.includes('x-k8s-aws-id')) return no('X-Amz-SignedHeaders does not include x-k8s-aws-id');
  const expires = get('X-Amz-Expires') ?? '';
  if (!/^\d+$/.test(expires) || Number(expires) > 900) return no(`X-Amz-Expires must be an integer in [0, 900], got ${expires || '(none)'}`);
  const scopeRegion = (get('X-Amz-Credential') ?? '').split('/')[2];
  if (scopeRegion !== hostRegion) return no(`credential scope region ${scopeRegion ?? '(none)'} does not match STS host ${url.host}`);

  const verdict = await verifyPresigned(
    world,
    {method: 'GET', rawPath: '/', rawQuery, headers: {'host': url.host, 'x-k8s-aws-id': options.clusterName}, body: new Uint8Array()},
    query,
    options.now ?? world.now(),
  );
  if (!verdict.ok) {
    return no(
      verdict.kind === 'bad-signature'
        ? `signature does not match (token altered, or signed for a cluster other than ${options.clusterName})`
        : verdict.message,
    );
  }
  if (verdict.scope.service !== 'sts') return no(`credential scope service must be sts, got ${verdict.scope.service}`);
  const c = verdict.caller;
  return {ok: true, arn: c.arn, principalArn: canonicalPrincipalArn(c.arn), account: c.account, accessKeyId: c.accessKeyId, userId: c.userId};
}
