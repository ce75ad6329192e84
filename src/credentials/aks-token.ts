/**
 * AKS bearer tokens for the probe: Entra ID access tokens for the cluster's server
 * application (`<server-id>/.default`) from the discovery identity, cached per
 * (server, tenant, identity) and renewed at half-life; or, for clusters with local accounts
 * and no Entra ID, the static token of the local account.
 */
import type {AccessToken, TokenCredential} from '@azure/core-auth';
import type {KubeAccess} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import {noAzureCredentialsMessage} from './aks-credential.ts';
import {AksLocalAccounts} from './aks-local-accounts.ts';
import {TokenCache} from './token-cache.ts';
import {errorMessage} from '../core/errors.ts';
import {redactedStart} from '../observability/redact.ts';

/** Entra ID application of the AKS API server: the audience of AKS-managed Entra ID tokens in every Azure cloud. */
export const AKS_SERVER_ID = '6dae42f8-4368-4678-94ff-3960e28e3630';

/** The `aks` variant of a kube_server's `status.access`. */
export type AksKubeAccess = Extract<KubeAccess, {kind: 'aks'}>;

/** A minted Entra ID token. */
export interface EntraToken {
  readonly token: string;
  readonly expiresAt: Date;
}

/** Entra ID would not issue a token; the message is one line and carries no secret. */
export class EntraTokenError extends Error {
  override readonly name = 'EntraTokenError';
}

/** Per-call options of a token source. */
export interface AksTokenRequest {
  /** Tenant the cluster trusts (its `spec.azure.tenant_id`); default the identity's home tenant. */
  readonly tenantId?: string;
}

/** Mints the bearer token for one AKS cluster. */
export type AksTokenSource = (access: AksKubeAccess, request?: AksTokenRequest) => Promise<string>;

/** Options of {@link AksTokens}. */
export interface AksTokensOptions {
  readonly credential: TokenCredential;
  readonly clock: Clock;
  /** Names the credential in cache keys, so two identities never share a token. Default `default`. */
  readonly identity?: string;
  /** Store of local-account tokens (discovery fills it); default an empty one. */
  readonly localAccounts?: AksLocalAccounts;
  /** Called after each minted Entra ID token / failed mint (metrics). Never passed a token. */
  readonly onMint?: (key: string) => void;
  readonly onError?: (key: string, error: unknown) => void;
}

/** Entra ID and local-account tokens for AKS clusters. */
export class AksTokens {
  readonly #credential: TokenCredential;
  readonly #identity: string;
  readonly #cache: TokenCache<EntraToken>;
  readonly localAccounts: AksLocalAccounts;

  constructor(options: AksTokensOptions) {
    this.#credential = options.credential;
    this.#identity = options.identity ?? 'default';
    this.localAccounts = options.localAccounts ?? new AksLocalAccounts({clock: options.clock});
    this.#cache = new TokenCache<EntraToken>({
      clock: options.clock,
      ...(options.onMint ? {onMint: options.onMint} : {}),
      ...(options.onError ? {onError: options.onError} : {}),
    });
  }

  /** An Entra ID token for `serverId` (shared by every cluster with the same server app and tenant). */
  async entra(serverId: string = AKS_SERVER_ID, tenantId?: string): Promise<EntraToken> {
    const key = `${serverId}|${tenantId ?? ''}|${this.#identity}`;
    return this.#cache.get(key, () => mintEntraToken(this.#credential, serverId, tenantId));
  }

  /** The token for a kube_server's access: Entra ID when it names a server app, else the local account. */
  async forAccess(access: AksKubeAccess, request: AksTokenRequest = {}): Promise<string> {
    if (access.server_id) return (await this.entra(access.server_id, request.tenantId)).token;
    return this.localAccounts.token({subscriptionId: access.subscription_id, resourceGroup: access.resource_group, name: access.resource_name});
  }
}

/** The probe's AKS token source on a shared cache (see {@link AksTokens}). */
export function aksTokenSource(options: AksTokensOptions): AksTokenSource {
  const tokens = new AksTokens(options);
  return (access, request) => tokens.forAccess(access, request);
}

/** Asks the credential for `<serverId>/.default` once; errors become one readable line. */
export async function mintEntraToken(credential: TokenCredential, serverId: string, tenantId?: string): Promise<EntraToken> {
  const scope = `${serverId}/.default`;
  let token: AccessToken | null;
  try {
    token = await credential.getToken(scope, tenantId ? {tenantId} : {});
  } catch (error) {
    throw new EntraTokenError(`could not get an Entra ID token for ${scope}: ${noAzureCredentialsMessage(error) ?? firstLine(error)}`, {cause: error});
  }
  if (!token?.token) throw new EntraTokenError(`could not get an Entra ID token for ${scope}: the credential returned none`);
  return {token: token.token, expiresAt: new Date(token.expiresOnTimestamp)};
}

/** An identity error in one line: DefaultAzureCredential lists every credential it tried, one per line. */
function firstLine(error: unknown): string {
  const lines = errorMessage(error).split('\n');
  // Some credentials append a stack frame to their message; an exec plugin's stderr must not carry one.
  const text = lines.map((l) => l.trim()).filter((l) => l !== '' && !/^at \S.*:\d+(?::\d+)?\)?$/.test(l)).join(' ');
  // Redacted before it is cut: a credential cut in two is no longer known by its value.
  const quoted = redactedStart(text, 400);
  return text.length > 400 ? `${quoted}…` : quoted || 'unknown error';
}
