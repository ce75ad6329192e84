/**
 * EKS bearer tokens for probes: one cached token per (cluster, region, role, external id),
 * renewed at half its life, with concurrent probes of one cluster sharing one mint. Signed
 * with the AWS default chain, or the matcher's role assumed with it.
 */
import type {KubeAccess} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import {AwsCredentialProviders} from '../credentials/aws-credentials.ts';
import {mintEksToken, type EksToken} from '../credentials/eks-token.ts';
import type {Env} from '../credentials/sts-endpoint.ts';
import {TokenCache} from '../credentials/token-cache.ts';
import type {TokenSource} from './token-source.ts';

/** Options of {@link eksTokenSource}. */
export interface EksTokenSourceOptions {
  readonly clock: Clock;
  /** Read for `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL`. Default `process.env`. */
  readonly env?: Env;
  /** Credential providers; default the SDK chain with this clock and env. Tests pass fixed base credentials. */
  readonly providers?: AwsCredentialProviders;
  /** Counts minted tokens (metrics); never passed the token. */
  readonly onMint?: () => void;
  /** Counts failed mints; the error carries no secret. */
  readonly onError?: (error: unknown) => void;
}

type EksAccess = Extract<KubeAccess, {kind: 'eks'}>;

// The SDK warns on the console about e.g. conflicting credential sources; the service logs
// credential failures itself, once per probe result.
const quietLogger = {debug() {}, info() {}, warn() {}, error() {}};

/** The cache key of a cluster's token: who signs it and for which cluster. */
export function eksTokenKey(access: EksAccess): string {
  return `${access.cluster_name}|${access.region}|${access.role_arn ?? ''}|${access.external_id ?? ''}`;
}

/** A TokenSource minting EKS tokens through a half-life TokenCache. */
export function eksTokenSource(options: EksTokenSourceOptions): TokenSource {
  const {clock, onMint, onError} = options;
  const env = options.env ?? process.env;
  const providers = options.providers ?? new AwsCredentialProviders({env, clock, logger: quietLogger});
  const cache = new TokenCache<EksToken>({
    clock,
    ...(onMint ? {onMint: () => onMint()} : {}),
    ...(onError ? {onError: (_key: string, error: unknown) => onError(error)} : {}),
  });
  const eks = (access: KubeAccess): EksAccess => {
    if (access.kind !== 'eks') throw new TypeError(`expected EKS access, got ${access.kind}`);
    return access;
  };
  return {
    token: async (access) => {
      const a = eks(access);
      const mint = async (): Promise<EksToken> => {
        const credentials = await providers.provider({
          region: a.region,
          ...(a.role_arn ? {roleArn: a.role_arn} : {}),
          ...(a.external_id ? {externalId: a.external_id} : {}),
        })();
        return mintEksToken({clusterName: a.cluster_name, region: a.region, credentials, clock, env});
      };
      return (await cache.get(eksTokenKey(a), mint)).token;
    },
    forget: (access) => {
      if (access.kind === 'eks') cache.delete(eksTokenKey(access));
    },
  };
}
