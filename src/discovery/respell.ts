/**
 * Resource group names are case-insensitive on Azure, and ARM's answers do not always spell a group
 * the same way (the subscription-wide list has given in lower case a group created in upper case).
 * Names keep the group's case (Teleport's rule), so a new spelling alone would rename a registered
 * cluster: delete its entry and create another. A cluster whose only rename comes from that is
 * given its registered spelling instead, so its entry keeps its name and document.
 */
import type {Clouds} from '../clouds/cloud.ts';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import type {DiscoveredCluster, SourceResult} from '../core/types.ts';
import type {StagedPlan} from './reconcile.ts';

/**
 * The results with the registered resource group spelling of every cluster a staged plan renames
 * only by case (the old and new names equal without regard to case, the registered group spelled
 * otherwise than the listed one); undefined when the plan has no such rename (nearly every cycle).
 */
export function respellResourceGroups(staged: StagedPlan, results: readonly SourceResult[], byName: Pick<ReadonlyMap<string, KubeServer>, 'get'>, clouds: Clouds): SourceResult[] | undefined {
  let spellings: Map<string, string> | undefined;
  for (const item of staged.decided) {
    if (item.action !== 'delete' || item.renamedTo === undefined || item.renamedTo.toLowerCase() !== item.name.toLowerCase()) continue;
    const entry = byName.get(item.name);
    const found = entry && clouds.registeredCluster(entry);
    if (!found?.cluster.resourceGroup) continue;
    const {module, cluster: registered} = found;
    // Keyed like `clusterIdentity`, which ignores the group's case.
    (spellings ??= new Map()).set(key(module.cloud, registered.account, registered.region ?? '', registered.resourceGroup, registered.name), registered.resourceGroup);
  }
  if (!spellings) return undefined;
  const found = spellings;
  const respelled = (cluster: DiscoveredCluster): DiscoveredCluster => {
    const spelling = cluster.resourceGroup && found.get(key(cluster.cloud, cluster.account, cluster.region, cluster.resourceGroup, cluster.name));
    return spelling && spelling !== cluster.resourceGroup ? {...cluster, resourceGroup: spelling} : cluster;
  };
  return results.map((result) => (result.clusters.some((c) => respelled(c) !== c) ? {...result, clusters: result.clusters.map(respelled)} : result));
}

function key(cloud: string, account: string, region: string, resourceGroup: string, name: string): string {
  return `${cloud}/${account}/${region}/${resourceGroup.toLowerCase()}/${name}`;
}
