/**
 * The user credential of one AKS cluster, fetched from Resource Manager
 * (`listClusterUserCredential`, format=exec) for the `token aks` exec plugin: clusters with
 * local accounts and no Entra ID authenticate with the static token it carries. The token is
 * a secret: it only ever goes to the ExecCredential on stdout.
 */
import {ContainerServiceClient} from '@azure/arm-containerservice';
import type {TokenCredential} from '@azure/core-auth';
import {azureCloud, type AzureCloudName} from '../clouds/azure/clouds.ts';
import {armClientOptions, type AzureClientOptions} from '../clouds/azure/pipeline.ts';
import {parseAksKubeconfig, type AksUserKubeconfig} from './aks-kubeconfig.ts';
import type {AksClusterRef} from './aks-local-accounts.ts';
import {errorMessage} from '../core/errors.ts';
import {redactedStart} from '../observability/redact.ts';

/** Where and as whom to ask Resource Manager. */
export interface AksUserCredentialRequest {
  readonly credential: TokenCredential;
  readonly cluster: AksClusterRef;
  readonly cloud?: AzureCloudName;
  /** Resource Manager URL replacing the cloud's (Azure Stack, the simulator). */
  readonly resourceManagerEndpoint?: string;
  /** TLS and pipeline options (tests trust their fake's CA here). */
  readonly clientOptions?: AzureClientOptions;
}

/** Fetches and parses the cluster's user kubeconfig; errors are one line and carry no credential. */
export async function fetchAksUserKubeconfig(request: AksUserCredentialRequest): Promise<AksUserKubeconfig> {
  const cloud = azureCloud(request.cloud, request.resourceManagerEndpoint);
  const {subscriptionId, resourceGroup, name} = request.cluster;
  // An exec plugin runs while kubectl waits: two retries, not the discovery loop's five.
  const options = armClientOptions(cloud.armEndpoint, cloud.armScope, {retryOptions: {maxRetries: 2}, ...request.clientOptions}, {requestTimeoutMs: 20_000});
  const client = new ContainerServiceClient(request.credential, subscriptionId, options);
  let value: Uint8Array | undefined;
  try {
    const result = await client.managedClusters.listClusterUserCredentials(resourceGroup, name, {format: 'exec'});
    value = result.kubeconfigs?.find((k) => k.value !== undefined)?.value;
  } catch (error) {
    // Redacted before it is cut: a credential cut in two is no longer known by its value.
    const message = redactedStart(errorMessage(error).split('\n')[0] ?? '', 300);
    throw new Error(`listClusterUserCredential for AKS cluster ${name} (resource group ${resourceGroup}, subscription ${subscriptionId}) failed: ${message}`, {cause: error});
  }
  if (!value) throw new Error(`listClusterUserCredential for AKS cluster ${name} returned no kubeconfig`);
  return parseAksKubeconfig(value);
}
