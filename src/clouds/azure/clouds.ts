/** The Azure clouds a matcher can name, and the endpoints each one implies. */

/** Cloud names accepted in `azure[].cloud` (the names kubelogin's `--environment` takes). */
export const AZURE_CLOUD_NAMES = ['AzurePublicCloud', 'AzureChinaCloud', 'AzureUSGovernment'] as const;

/** One of AZURE_CLOUD_NAMES. */
export type AzureCloudName = (typeof AZURE_CLOUD_NAMES)[number];

/** Where a cloud's Resource Manager and Entra ID live. */
export interface AzureCloudEndpoints {
  /** Resource Manager base URL, without a trailing slash. */
  readonly armEndpoint: string;
  /** Scope of the token Resource Manager accepts. */
  readonly armScope: string;
  /** Entra ID authority host the credential signs in against. */
  readonly authorityHost: string;
}

const CLOUDS: Readonly<Record<AzureCloudName, AzureCloudEndpoints>> = {
  AzurePublicCloud: {
    armEndpoint: 'https://management.azure.com',
    armScope: 'https://management.azure.com/.default',
    authorityHost: 'https://login.microsoftonline.com',
  },
  AzureChinaCloud: {
    armEndpoint: 'https://management.chinacloudapi.cn',
    armScope: 'https://management.chinacloudapi.cn/.default',
    authorityHost: 'https://login.chinacloudapi.cn',
  },
  AzureUSGovernment: {
    armEndpoint: 'https://management.usgovcloudapi.net',
    armScope: 'https://management.usgovcloudapi.net/.default',
    authorityHost: 'https://login.microsoftonline.us',
  },
};

/**
 * Endpoints of `cloud`. `resourceManagerEndpoint` (Azure Stack, tests) replaces the ARM URL
 * only: the token scope stays the cloud's, because that is the audience Entra ID issues for it.
 */
export function azureCloud(cloud: AzureCloudName = 'AzurePublicCloud', resourceManagerEndpoint?: string): AzureCloudEndpoints {
  const endpoints = CLOUDS[cloud] as AzureCloudEndpoints | undefined;
  if (!endpoints) throw new TypeError(`Expected an Azure cloud name (${AZURE_CLOUD_NAMES.join(', ')}), got ${JSON.stringify(cloud)}`);
  return resourceManagerEndpoint ? {...endpoints, armEndpoint: resourceManagerEndpoint.replace(/\/+$/, '')} : endpoints;
}

/** Whether `name` is one of AZURE_CLOUD_NAMES. */
export function isAzureCloudName(name: string): name is AzureCloudName {
  return (AZURE_CLOUD_NAMES as readonly string[]).includes(name);
}
