/**
 * The documents, names, labels and plans the pure core produces for EKS and AKS clusters, pinned
 * to a file written before the per-cloud rules moved into src/clouds/<cloud>/cloud.ts: moving
 * code must not change a byte a registry reader or a Teleport user sees (key order included:
 * the registry stores JSON.stringify of the document). The writer identity is the heartbeat's to
 * stamp, so candidates are compared as the heartbeat stores them.
 */
import {describe, expect, it} from 'vitest';
import {aksSource} from '../../src/clouds/azure/sources.ts';
import type {DiscoveredCluster, SourceResult} from '../../src/core/types.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {CA, context, eksCluster, failedResult, okResult, stampedSpec, stored} from './builders.ts';

const SUB = '11111111-2222-3333-4444-555555555555';
const A = '111111111111';

function aks(name: string, resourceGroup: string, extra: Partial<DiscoveredCluster> = {}): DiscoveredCluster {
  return {
    cloud: 'Azure',
    type: 'aks',
    name,
    region: 'westeurope',
    account: SUB,
    resourceGroup,
    tenantId: 'tenant-1',
    id: `/subscriptions/${SUB}/resourceGroups/${resourceGroup}/providers/Microsoft.ContainerService/managedClusters/${name}`,
    tags: {env: 'prod'},
    status: 'Succeeded/Running',
    statusOk: true,
    endpoint: `https://${name}.hcp.westeurope.azmk8s.io:443`,
    caData: CA,
    authMode: 'azure-rbac',
    access: {kind: 'aks-entra', serverId: '6dae42f8-4368-4678-94ff-3960e28e3630'},
    sourceId: aksSource(0, SUB).id,
    ...extra,
  };
}

const eks: DiscoveredCluster[] = [
  eksCluster('web', 'us-east-1', A, {authMode: 'API_AND_CONFIG_MAP', access: {kind: 'eks', clusterName: 'web', region: 'us-east-1', roleArn: 'arn:aws:iam::111111111111:role/r', externalId: 'x'}}),
  eksCluster('prod-us-east-1', 'us-east-1', A),
  eksCluster('named', 'us-east-1', A, {tags: {TeleportKubernetesName: 'payments', 'bad key!': 'v'}}),
  eksCluster('legacy', 'us-east-1', A, {tags: {'teleport.dev/kubernetes-name': 'legacy-name'}}),
  eksCluster('noca', 'us-east-1', A, {caData: undefined, unreachable: {reason: 'invalid_ca', message: 'the EKS API reported no CA'}}),
  eksCluster('creating', 'us-east-1', A, {status: 'CREATING', statusOk: false}),
];

const azure: DiscoveredCluster[] = [
  aks('api', 'Some Group'),
  aks('local', 'rg-a', {access: {kind: 'aks-local'}, authMode: 'local-accounts'}),
  aks('legacy', 'rg-a', {tags: {'teleport.dev/kubernetes-name': 'ignored-on-aks'}}),
  aks('override', 'rg-a', {tags: {TeleportKubernetesName: 'aks-override'}}),
  aks('c', '(parens)'),
  aks('stopped', 'rg-a', {status: 'Succeeded/Stopped', statusOk: false}),
];

function results(): SourceResult[] {
  return [
    okResult('us-east-1', A, eks),
    {source: aksSource(0, SUB), ok: true, clusters: azure, malformed: [{name: 'broken', sourceId: aksSource(0, SUB).id, reason: 'provisioningState "succeeded" is not an AKS state'}]},
  ];
}

describe('documents, names and plans stay byte-identical', () => {
  const ctx = {...context('g1'), staticLabels: {team: 'platform'}, dynamicLabels: {arch: {period: '1h0m0s', command: ['uname', '-m'], result: 'x86_64'}}};

  it('evaluate: candidates (whole documents) and skips', async () => {
    const evaluation = evaluate(results(), ctx);
    const out = {
      candidates: [...evaluation.candidates.values()].map((c) => ({name: c.name, labels: c.labels, reason: c.reason, server: {...c.server, spec: stampedSpec(c.server)}})),
      skips: evaluation.skips.map((s) => ({name: s.name, cloudName: s.cloudName, source: s.source.id, kind: s.kind, reason: s.reason, labels: s.labels})),
      notes: evaluation.notes,
    };
    await expect(`${JSON.stringify(out, null, 1)}\n`).toMatchFileSnapshot('./__golden__/evaluate.json');
  });

  it('reconcile: deletes, stale marks and renames over stored entries of both clouds', async () => {
    const first = evaluate(results(), ctx);
    const current = [...first.candidates.values()].map((c) => stored(c.server));
    // Gone from both listings; a failed EKS source in another region; an entry under an old name.
    const goneEks = evaluate([okResult('us-east-1', A, [eksCluster('gone', 'us-east-1', A)])], ctx);
    const goneAks = evaluate([{source: aksSource(0, SUB), ok: true, clusters: [aks('gone', 'rg-a')], malformed: []}], ctx);
    const failedEks = evaluate([okResult('eu-west-1', A, [eksCluster('far', 'eu-west-1', A)])], ctx);
    const old = stored({...first.candidates.get(`api-aks-westeurope-Some-Group-${SUB}`)!.server, metadata: {name: 'api-old', labels: {'teleport.internal/discovery-group-name': 'g1'}}});
    const all = [...current, ...[goneEks, goneAks, failedEks].flatMap((e) => [...e.candidates.values()].map((c) => stored(c.server))), old];
    const next = [
      okResult('us-east-1', A, eks.slice(1)),
      {source: aksSource(0, SUB), ok: true, clusters: azure.slice(0, 3), malformed: [{name: 'override', sourceId: aksSource(0, SUB).id, reason: 'status is missing'}]},
      failedResult('eu-west-1', A),
    ];
    const plan = reconcile(all, evaluate(next, ctx), next, 'g1');
    const items = plan.items.map((i) => (i.server ? {...i, server: {...i.server, spec: stampedSpec(i.server)}} : i));
    await expect(`${JSON.stringify(items, null, 1)}\n`).toMatchFileSnapshot('./__golden__/reconcile.json');
  });
});
