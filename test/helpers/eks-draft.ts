import type {KubeServerDraft} from '../../heartbeats/kube-server.ts';

/** The draft discovery makes of a matching EKS cluster `name` in us-east-1 (not probed). */
export function eksDraft(name: string): KubeServerDraft {
  const labels = {env: 'prod', 'teleport.dev/cloud': 'AWS'};
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels},
    spec: {
      cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: 'EKS cluster', labels}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name}}},
      proxy_ids: [],
    },
    status: {endpoint: 'https://example.eks.amazonaws.com', ca_data: 'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t'},
  };
}
