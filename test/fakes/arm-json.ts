/**
 * Wire shapes of the ARM answers the fake serves, copied from real responses of
 * `subscriptions.list` (api-version 2022-12-01) and `managedClusters` (2026-04-01).
 */
import {createHash} from 'node:crypto';
import type {FakeManagedCluster, FakeRoleAssignment, FakeSubscription} from './arm-world.ts';
import {managedClusterId, roleAssignmentId} from './arm-world.ts';
import {buildKubeconfig} from './kube-kubeconfig.ts';

/** Entra ID application of the AKS API server: the audience of AKS access tokens. */
export const AKS_AAD_SERVER_ID = '6dae42f8-4368-4678-94ff-3960e28e3630';

/** Public client id kubelogin uses for AKS (written into exec kubeconfigs by ARM). */
export const AKS_KUBELOGIN_CLIENT_ID = '80faf920-1908-4b52-b5ef-a8e7bedfc67a';

/** `format` values of listClusterUserCredential. */
export type CredentialFormat = 'exec' | 'azure';

/** A subscription as `GET /subscriptions` lists it. */
export function subscriptionJson(sub: FakeSubscription): Record<string, unknown> {
  return {
    id: `/subscriptions/${sub.subscriptionId}`,
    authorizationSource: 'RoleBased',
    managedByTenants: [],
    subscriptionId: sub.subscriptionId,
    tenantId: sub.tenantId,
    displayName: sub.displayName,
    state: sub.state,
    subscriptionPolicies: {locationPlacementId: 'Public_2014-09-01', quotaId: 'PayAsYouGo_2014-09-01', spendingLimit: 'Off'},
  };
}

/** The issuer AKS gives a cluster with its OIDC issuer enabled: per region and tenant, a trailing slash. */
export function aksOidcIssuer(cluster: FakeManagedCluster, tenantId: string): string {
  const id = createHash('sha256').update(`oidc:${managedClusterId(cluster).toLowerCase()}`).digest('hex');
  return `https://${cluster.location}.oic.prod-aks.azure.com/${tenantId}/${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20, 32)}/`;
}

/** A managed cluster as the list and get operations return it. */
export function managedClusterJson(cluster: FakeManagedCluster, tenantId: string): Record<string, unknown> {
  const dnsPrefix = cluster.fqdn.split('.')[0] ?? cluster.name;
  const properties: Record<string, unknown> = {
    provisioningState: cluster.provisioningState,
    powerState: {code: cluster.powerState},
    kubernetesVersion: cluster.kubernetesVersion,
    currentKubernetesVersion: cluster.kubernetesVersion,
    dnsPrefix,
    fqdn: cluster.fqdn,
    azurePortalFQDN: cluster.fqdn.replace('.hcp.', '.portal.hcp.'),
    agentPoolProfiles: [{
      name: 'nodepool1', count: 3, vmSize: 'Standard_DS2_v2', osDiskSizeGB: 128, osType: 'Linux', mode: 'System',
      type: 'VirtualMachineScaleSets', provisioningState: cluster.provisioningState,
      powerState: {code: cluster.powerState}, orchestratorVersion: cluster.kubernetesVersion,
    }],
    nodeResourceGroup: `MC_${cluster.resourceGroup}_${cluster.name}_${cluster.location}`,
    enableRBAC: true,
    supportPlan: 'KubernetesOfficial',
    networkProfile: {networkPlugin: 'azure', loadBalancerSku: 'standard', outboundType: 'loadBalancer'},
  };
  if (cluster.aadProfile !== undefined) {
    properties['aadProfile'] = {
      managed: true,
      enableAzureRBAC: cluster.aadProfile.enableAzureRBAC,
      adminGroupObjectIDs: [],
      tenantID: cluster.aadProfile.tenantID ?? tenantId,
    };
  }
  if (cluster.disableLocalAccounts !== undefined) properties['disableLocalAccounts'] = cluster.disableLocalAccounts;
  properties['oidcIssuerProfile'] = cluster.oidcIssuer ? {enabled: true, issuerURL: aksOidcIssuer(cluster, tenantId)} : {enabled: false};
  return {
    id: managedClusterId(cluster),
    location: cluster.location,
    name: cluster.name,
    type: 'Microsoft.ContainerService/ManagedClusters',
    tags: {...cluster.tags},
    sku: {name: 'Base', tier: 'Free'},
    identity: {type: 'SystemAssigned', principalId: '00000000-0000-0000-0000-000000000000', tenantId},
    properties,
  };
}

/**
 * The kubeconfig `listClusterUserCredential` returns: Entra ID clusters get kubelogin (exec,
 * or the legacy `azure` auth-provider for format=azure); local-account clusters a static token.
 */
export function userKubeconfig(cluster: FakeManagedCluster, tenantId: string, format: CredentialFormat): string {
  const userName = `clusterUser_${cluster.resourceGroup}_${cluster.name}`;
  const base = {clusterName: cluster.name, server: cluster.server, caPem: cluster.caPem, userName};
  if (cluster.aadProfile === undefined) {
    return buildKubeconfig({...base, user: {token: cluster.localAccountToken}});
  }
  const tenant = cluster.aadProfile.tenantID ?? tenantId;
  if (format === 'azure') {
    return buildKubeconfig({...base, user: {authProvider: {name: 'azure', config: {
      'apiserver-id': AKS_AAD_SERVER_ID, 'client-id': AKS_KUBELOGIN_CLIENT_ID,
      'config-mode': '1', environment: 'AzurePublicCloud', 'tenant-id': tenant,
    }}}});
  }
  return buildKubeconfig({...base, user: {exec: {
    apiVersion: 'client.authentication.k8s.io/v1beta1',
    command: 'kubelogin',
    args: ['get-token', '--environment', 'AzurePublicCloud', '--server-id', AKS_AAD_SERVER_ID,
      '--client-id', AKS_KUBELOGIN_CLIENT_ID, '--tenant-id', tenant, '--login', 'devicecode'],
    env: null,
    installHint: 'kubelogin is not installed which is required to connect to AAD enabled cluster.\n\n'
      + 'To learn more, please go to https://aka.ms/aks/kubelogin\n',
    interactiveMode: 'IfAvailable',
    provideClusterInfo: false,
  }}});
}

/** A role assignment as `Microsoft.Authorization/roleAssignments` (api-version 2022-04-01) returns it. */
export function roleAssignmentJson(a: FakeRoleAssignment): Record<string, unknown> {
  return {
    properties: {
      roleDefinitionId: a.roleDefinitionId,
      principalId: a.principalId,
      principalType: a.principalType ?? 'ServicePrincipal',
      scope: a.scope,
      condition: null,
      conditionVersion: null,
      createdOn: a.createdOn,
      updatedOn: a.createdOn,
      createdBy: '00000000-0000-0000-0000-00000000c0de',
      updatedBy: '00000000-0000-0000-0000-00000000c0de',
      delegatedManagedIdentityResourceId: null,
      description: a.description ?? null,
    },
    id: roleAssignmentId(a.scope, a.name),
    type: 'Microsoft.Authorization/roleAssignments',
    name: a.name,
  };
}
