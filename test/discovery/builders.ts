/** Builders of discovered clusters, source results and stored kube_servers for the pure-core tests. */
import type {KubeServer, KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {compileTagMatcher} from '../../matchers/index.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import type {DiscoveredCluster, SourceResult} from '../../src/core/types.ts';
import {evaluate, type EvaluateContext} from '../../src/discovery/evaluate.ts';

export const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');

/** An ACTIVE EKS cluster as the fetcher reports it. */
export function eksCluster(name: string, region: string, account: string, extra: Partial<DiscoveredCluster> = {}): DiscoveredCluster {
  return {
    cloud: 'AWS',
    type: 'eks',
    name,
    region,
    account,
    id: `arn:aws:eks:${region}:${account}:cluster/${name}`,
    tags: {env: 'prod'},
    status: 'ACTIVE',
    statusOk: true,
    endpoint: `https://${name}.${region}.eks.example`,
    caData: CA,
    sourceId: eksSource(0, region, account).id,
    access: {kind: 'eks', clusterName: name, region},
    ...extra,
  };
}

/** A successful source result. */
export function okResult(region: string, account: string, clusters: DiscoveredCluster[], matcherIndex = 0): SourceResult {
  return {source: eksSource(matcherIndex, region, account), ok: true, clusters, malformed: []};
}

/** A failed source result. */
export function failedResult(region: string, account: string, code = 'ThrottlingException', matcherIndex = 0): SourceResult {
  return {
    source: eksSource(matcherIndex, region, account),
    ok: false,
    clusters: [],
    malformed: [],
    error: {reason: 'throttled', code, message: 'Rate exceeded', operation: 'ListClusters'},
  };
}

/** Evaluate context matching everything (or the given tags). */
export function context(group = 'g1', tags: Record<string, string | string[]> = {'*': '*'}): EvaluateContext {
  const matcher = compileTagMatcher(tags);
  return {discoveryGroup: group, matcherFor: () => matcher, staticLabels: {}};
}

/** A draft's spec with the writer identity first, as the heartbeat stamps it (key order included). */
export function stampedSpec(draft: KubeServerDraft): KubeServer['spec'] {
  return {version: draft.spec.version ?? '0.0.0-test', hostname: draft.spec.hostname ?? 'node-1', host_id: draft.spec.host_id ?? 'host-1', ...draft.spec} as KubeServer['spec'];
}

/** A stored kube_server from a draft (what the registry would hold after announcing it). */
export function stored(draft: KubeServerDraft, extra: Partial<KubeServer['status']> = {}): KubeServer {
  return {
    ...draft,
    metadata: {...draft.metadata, expires: '2026-01-01T00:10:00Z', revision: '1'},
    spec: stampedSpec(draft),
    status: {...draft.status, ...extra},
  };
}

/** The entry of `result`'s one cluster as a previous release registered it: the same document under `oldName` (group g1). */
export function oldEntry(result: SourceResult, oldName: string): KubeServer {
  const [candidate] = evaluate([result], context('g1')).candidates.values();
  if (!candidate) throw new Error('no candidate');
  const labels = {...candidate.server.spec.cluster.metadata.labels, 'teleport.internal/discovered-name': candidate.cluster.name};
  return stored({
    ...candidate.server,
    metadata: {...candidate.server.metadata, name: oldName},
    spec: {...candidate.server.spec, cluster: {...candidate.server.spec.cluster, metadata: {...candidate.server.spec.cluster.metadata, name: oldName, labels}}},
  });
}
