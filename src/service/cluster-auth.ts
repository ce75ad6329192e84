/** Builds the TokenReviewer for `cluster/namespace:serviceaccount` allow-list entries, with the credentials probes mint. */
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import type {TokenReviewer} from '../http/auth.ts';
import {clusterTokenReviewer, parseAllowEntry} from '../http/cluster-token-review.ts';
import type {Inventory} from '../inventory/inventory.ts';
import {eksTokenSource} from '../probe/eks-token-source.ts';
import {tokenSources, type TokenSource} from '../probe/token-source.ts';
import {SharedCredentials} from '../credentials/shared.ts';

/** The reviewer for discovered clusters' tokens, or nothing when no entry names a cluster. */
export function clusterReviewFor(options: {
  readonly config: Config;
  readonly inventory: Pick<Inventory, 'list'>;
  readonly clock: Clock;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The runtime's credentials (the identities probes sign with); default the SDK chain, without AKS. */
  readonly credentials?: SharedCredentials;
  /** Tests inject the credential; production mints it like the probes do. */
  readonly credential?: TokenSource;
}): {clusterTokenReview?: TokenReviewer} {
  const entries = (options.config.http.auth?.allowed_service_accounts ?? []).map(parseAllowEntry).filter((e) => e.cluster !== undefined);
  if (entries.length === 0) return {};
  const credentials = options.credentials ?? new SharedCredentials({clock: options.clock, env: options.env});
  const tokens =
    options.credential ??
    tokenSources({eks: eksTokenSource({clock: options.clock, env: options.env, providers: credentials.aws}), ...(credentials.aks ? {aks: {token: credentials.aks}} : {})});
  return {clusterTokenReview: clusterTokenReviewer({entries, servers: () => options.inventory.list(), credential: (access) => tokens.token(access)})};
}
