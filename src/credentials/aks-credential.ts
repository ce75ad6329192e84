/**
 * The Entra ID identity discovery runs as: `@azure/identity`'s DefaultAzureCredential
 * (environment, workload identity, managed identity, Azure CLI ...), signing in against the
 * matcher's cloud. Token acquisition and its retries are the library's; nothing here talks
 * to Entra ID until a token is asked for.
 */
import type {TokenCredential} from '@azure/core-auth';
import {DefaultAzureCredential} from '@azure/identity';
import {azureCloud, type AzureCloudName} from '../clouds/azure/clouds.ts';

export type {TokenCredential} from '@azure/core-auth';

/** Which identity to sign in as. */
export interface AzureCredentialOptions {
  readonly cloud?: AzureCloudName;
  /** Client id of a user-assigned managed identity or of the workload identity's application. */
  readonly clientId?: string;
  /** Home tenant of the identity; default the environment's (`AZURE_TENANT_ID`) or the identity's own. */
  readonly tenantId?: string;
}

/** Builds a credential from options; injected by tests so no test reaches Entra ID or IMDS. */
export type AzureCredentialFactory = (options: AzureCredentialOptions) => TokenCredential;

/** DefaultAzureCredential for the cloud, with the matcher's `client_id` for managed and workload identity. */
export const defaultAzureCredential: AzureCredentialFactory = (options) =>
  new DefaultAzureCredential({
    authorityHost: azureCloud(options.cloud).authorityHost,
    ...(options.tenantId ? {tenantId: options.tenantId} : {}),
    ...(options.clientId ? {managedIdentityClientId: options.clientId, workloadIdentityClientId: options.clientId} : {}),
    // Clusters may trust another tenant than the identity's home (Azure Lighthouse); tokens are still only
    // issued where the identity exists.
    additionallyAllowedTenants: ['*'],
  });

/** Stable text naming an identity, for cache keys and logs (never a secret). */
export function identityKey(options: AzureCredentialOptions): string {
  return `${options.cloud ?? 'AzurePublicCloud'}/${options.clientId ?? 'default'}/${options.tenantId ?? ''}`;
}

/**
 * One plain line for "no Azure identity could sign in" (what DefaultAzureCredential tried and
 * what to set), in place of @azure/identity's multi-line AggregateAuthenticationError; undefined
 * for any other error (a wrong secret, Entra ID refusing a token) so those keep their own message.
 */
export function noAzureCredentialsMessage(error: unknown): string | undefined {
  const e = error as {name?: unknown; message?: unknown; errors?: unknown} | undefined;
  if (e?.name !== 'AggregateAuthenticationError' && e?.name !== 'CredentialUnavailableError') return undefined;
  const inner = Array.isArray(e.errors) ? (e.errors as {name?: unknown}[]) : [];
  // A credential that was present but refused (AuthenticationError) is not "no credentials".
  if (inner.some((x) => x?.name !== undefined && x.name !== 'CredentialUnavailableError')) return undefined;
  const text = [String(e.message ?? ''), ...inner.map((x) => String((x as {message?: unknown}).message ?? ''))].join(' ');
  const tried = [...new Set(text.match(/\b[A-Z][A-Za-z]*Credential\b/g) ?? [])].filter((n) => n !== 'DefaultAzureCredential' && n !== 'ChainedTokenCredential');
  return (
    `no Azure credentials found${tried.length > 0 ? ` (tried ${tried.join(', ')})` : ''}: ` +
    'set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (or AZURE_CLIENT_CERTIFICATE_PATH), run with a managed or workload identity, or sign in with `az login`'
  );
}
