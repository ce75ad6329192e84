/** AKS's rules for the pure core: labels, Teleport names, the `spec.azure` block, which entries a source covers; its planner. No Azure SDK here (`planner.ts` loads it on first use). */
import {LABEL} from '../../core/label-names.ts';
import type {CloudModule} from '../cloud.ts';
import {azurePlanner, type LazyAzurePlanner} from './planner.ts';
import {aksProbeAdvice} from './probe-advice.ts';

/** Azure AKS. */
export const azureCloud: CloudModule<LazyAzurePlanner> = {
  cloud: 'Azure',
  type: 'aks',
  matchers: (config) => config.azure,
  nameOverrideTags: [LABEL.nameOverride],
  nameParts: (cluster) => [cluster.type, cluster.region, cluster.resourceGroup ?? '', cluster.account],
  locationLabels: (cluster) => ({[LABEL.subscriptionId]: cluster.account, ...(cluster.resourceGroup ? {[LABEL.resourceGroup]: cluster.resourceGroup} : {})}),
  coversLocation(source, labels) {
    // An unresolved subscription ('') covers every subscription: a failure there must protect them all.
    if (source.account !== '' && labels[LABEL.subscriptionId] !== source.account) return false;
    // ARM ids and configs spell resource groups in any case; Azure treats them case-insensitively.
    const group = source.resourceGroup;
    return group === undefined || group === '*' || labels[LABEL.resourceGroup]?.toLowerCase() === group.toLowerCase();
  },
  description: (cluster) => `Azure AKS cluster "${cluster.name}" in ${cluster.region}`,
  clusterSpec: (cluster) => ({
    azure: {
      resource_name: cluster.name,
      resource_group: cluster.resourceGroup ?? '',
      tenant_id: cluster.tenantId ?? '',
      subscription_id: cluster.account,
    },
  }),
  access(cluster) {
    const a = cluster.access;
    if (a === undefined || a.kind === 'eks') return undefined;
    return {
      kind: 'aks',
      ...(a.kind === 'aks-entra' ? {server_id: a.serverId} : {}),
      subscription_id: cluster.account,
      resource_group: cluster.resourceGroup ?? '',
      resource_name: cluster.name,
    };
  },
  registeredCluster(server) {
    const azure = server.spec.cluster.spec.azure;
    if (!azure) return undefined;
    // The document's azure block has no location; the region label carries it.
    return {name: azure.resource_name, account: azure.subscription_id, region: server.spec.cluster.metadata.labels[LABEL.region], resourceGroup: azure.resource_group};
  },
  noCredentialsWarning: (firstMessage) => (firstMessage ? `${firstMessage}. The service keeps serving the registry and retries every cycle.` : undefined),
  probe: aksProbeAdvice,
  planner: azurePlanner,
};
