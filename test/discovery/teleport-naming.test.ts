/**
 * Teleport's naming rules, case by case: every case of the table in Teleport's
 * lib/srv/discovery/common/renaming_test.go (the facts; the tests are ours), plus the issue's
 * examples. A Teleport user moving over must see the same kube cluster names.
 */
import {describe, expect, it} from 'vitest';
import type {DiscoveredCluster} from '../../src/core/types.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {clusterLabels} from '../../src/discovery/labels.ts';
import {discoverySuffix, kubeServerName} from '../../src/discovery/naming.ts';
import {context, eksCluster, okResult} from './builders.ts';

const SUB = '11111111-2222-3333-4444-555555555555';

function aksCluster(name: string, region: string, resourceGroup: string, subscription: string, tags: Record<string, string> = {}): DiscoveredCluster {
  return {
    cloud: 'Azure',
    type: 'aks',
    name,
    region,
    account: subscription,
    resourceGroup,
    tenantId: 'tenant',
    tags,
    status: 'Succeeded/Running',
    statusOk: true,
    sourceId: `aks:${subscription}`,
  };
}

describe('the discovery suffix (Teleport TestMakeDiscoverySuffix)', () => {
  const cases: {name: string; resource: string; parts: string[]; want: string}[] = [
    {name: 'no suffix without extra parts', resource: 'foo', parts: [], want: ''},
    {name: 'simple parts', resource: 'foo', parts: ['one', 'two', 'three'], want: 'one-two-three'},
    {name: 'skips empty parts', resource: 'foo', parts: ['one', '', 'three'], want: 'one-three'},
    {name: 'turns spaces into hyphens', resource: 'foo', parts: ['one', 't w o', 'three'], want: 'one-t-w-o-three'},
    {name: 'collapses repeated hyphens', resource: 'foo', parts: ['one---', 't w  --  o  ', '---three'], want: 'one-t-w-o-three'},
    {name: 'removes leading and trailing hyphens', resource: 'foo', parts: ['one---', 't w  --  o  ', '---three'], want: 'one-t-w-o-three'},
    {
      name: 'leaves out what the name already says (case-insensitive substring)',
      resource: 'PostgreSQL-RDS-us-west-1',
      parts: ['rds', 'us-west-1', '123456789012'],
      want: '123456789012',
    },
    {
      name: 'drops invalid parts',
      resource: 'foo',
      parts: ['mysql', 'EastUS', 'weird)(group-name', SUB],
      want: `mysql-EastUS-${SUB}`,
    },
  ];
  it.each(cases)('$name', ({resource, parts, want}) => {
    expect(discoverySuffix(resource, parts)).toBe(want);
  });

  // Teleport's database and GKE rename cases run through the same suffix rule; their parts as facts.
  const renames: {name: string; resource: string; parts: string[]; want: string}[] = [
    {name: 'RDS instance', resource: 'some-db', parts: ['rds', '', 'us-west-1', '123456789012'], want: 'some-db-rds-us-west-1-123456789012'},
    {name: 'RDS Aurora cluster', resource: 'some-db', parts: ['rds', 'aurora', 'us-west-1', '123456789012'], want: 'some-db-rds-aurora-us-west-1-123456789012'},
    {name: 'Azure MySQL Flex', resource: 'some-db', parts: ['mysql', '', 'eastus', 'Some Group', SUB], want: `some-db-mysql-eastus-Some-Group-${SUB}`},
    {name: 'skips an invalid resource group', resource: 'some-db', parts: ['mysql', '', 'eastus', '(parens are invalid)', SUB], want: `some-db-mysql-eastus-${SUB}`},
    {name: 'Azure Redis', resource: 'some-db', parts: ['redis', '', 'eastus', 'Some Group', SUB], want: `some-db-redis-eastus-Some-Group-${SUB}`},
    {name: 'Azure Redis Enterprise', resource: 'some-db', parts: ['redis', 'enterprise', 'eastus', 'Some Group', SUB], want: `some-db-redis-enterprise-eastus-Some-Group-${SUB}`},
    {name: 'GKE', resource: 'some-cluster', parts: ['gke', 'central-1', 'dev-123456'], want: 'some-cluster-gke-central-1-dev-123456'},
  ];
  it.each(renames)('$name', ({resource, parts, want}) => {
    expect(`${resource}-${discoverySuffix(resource, parts)}`).toBe(want);
  });
});

describe('EKS names (Teleport TestApplyEKSNameSuffix)', () => {
  it('appends eks, region and account and records the cloud name', () => {
    const cluster = eksCluster('some-cluster', 'us-west-1', '123456789012', {tags: {}});
    expect(kubeServerName(cluster)).toEqual({name: 'some-cluster-eks-us-west-1-123456789012', overridden: false, renamed: true});
    expect(clusterLabels(cluster, 'g', true).labels['teleport.internal/discovered-name']).toBe('some-cluster');
  });

  it.each(['TeleportKubernetesName', 'teleport.dev/kubernetes-name'])('takes the whole name from the %s tag, without a suffix or discovered-name label', (tag) => {
    const cluster = eksCluster('some-cluster', 'us-west-1', '123456789012', {tags: {[tag]: 'some-cluster'}});
    const named = kubeServerName(cluster);
    expect(named).toEqual({name: 'some-cluster', overridden: true, renamed: false});
    const evaluation = evaluate([okResult('us-west-1', '123456789012', [cluster])], context('g'));
    expect(evaluation.candidates.get('some-cluster')?.labels['teleport.internal/discovered-name']).toBeUndefined();
  });

  it('prefers TeleportKubernetesName over the legacy tag, and ignores an empty override', () => {
    const both = eksCluster('c', 'us-west-1', '123456789012', {tags: {TeleportKubernetesName: 'new', 'teleport.dev/kubernetes-name': 'old'}});
    expect(kubeServerName(both).name).toBe('new');
    const empty = eksCluster('c', 'us-west-1', '123456789012', {tags: {TeleportKubernetesName: ''}});
    expect(kubeServerName(empty).name).toBe('c-eks-us-west-1-123456789012');
  });

  it('leaves out parts the name contains anywhere, case-insensitively (the issue examples)', () => {
    expect(kubeServerName(eksCluster('myeks', 'us-west-2', '123456789012')).name).toBe('myeks-us-west-2-123456789012');
    expect(kubeServerName(eksCluster('prod-us-west-2', 'us-west-2', '123456789012')).name).toBe('prod-us-west-2-eks-123456789012');
    expect(kubeServerName(eksCluster('Prod-EKS-US-WEST-2', 'us-west-2', '123456789012')).name).toBe('Prod-EKS-US-WEST-2-123456789012');
  });

  it('keeps the cloud name alone, without a discovered-name label, when it already says everything', () => {
    const cluster = eksCluster('a-eks-us-west-2-123456789012', 'us-west-2', '123456789012', {tags: {}});
    expect(kubeServerName(cluster)).toEqual({name: 'a-eks-us-west-2-123456789012', overridden: false, renamed: false});
    expect(clusterLabels(cluster, 'g', false).labels['teleport.internal/discovered-name']).toBeUndefined();
  });
});

describe('AKS names (Teleport TestApplyAKSNameSuffix)', () => {
  it('appends aks, region, resource group (case kept, spaces cleaned) and subscription', () => {
    const cluster = aksCluster('some-cluster', 'westus', 'Some Group', SUB);
    expect(kubeServerName(cluster).name).toBe(`some-cluster-aks-westus-Some-Group-${SUB}`);
  });

  it('takes the whole name from TeleportKubernetesName but ignores the EKS-only legacy tag', () => {
    expect(kubeServerName(aksCluster('some-cluster', 'westus', 'rg', SUB, {TeleportKubernetesName: 'some-cluster'})).name).toBe('some-cluster');
    expect(kubeServerName(aksCluster('some-cluster', 'westus', 'rg', SUB, {'teleport.dev/kubernetes-name': 'x'})).name).toBe(`some-cluster-aks-westus-rg-${SUB}`);
  });

  it('drops a resource group that is not valid in a name', () => {
    expect(kubeServerName(aksCluster('c', 'eastus', '(parens)', SUB)).name).toBe(`c-aks-eastus-${SUB}`);
  });
});

describe('remembered parts and tag keys', () => {
  it('judges a part the same on every call, past the table bound too', () => {
    const parts = Array.from({length: 1_500}, (_, i) => (i % 3 === 0 ? `bad)(${i}` : i % 3 === 1 ? ` region--${i} ` : `acct-${i}`));
    const first = parts.map((part) => discoverySuffix('x', ['eks', part]));
    const again = parts.map((part) => discoverySuffix('x', ['eks', part]));
    expect(again).toEqual(first);
    expect(first.slice(0, 3)).toEqual(['eks', 'eks-region-1', 'eks-acct-2']);
    // A part the name already holds is left out, whatever case either has.
    expect(discoverySuffix('prod-US-EAST-1', ['eks', 'us-east-1'])).toBe('eks');
  });

  it('keeps valid tag keys and drops invalid ones on every cluster, past the table bound too', () => {
    for (let i = 0; i < 1_100; i++) {
      const {labels, dropped} = clusterLabels(eksCluster('c', 'us-west-1', '123456789012', {tags: {[`team-${i}`]: 'a', [`bad key ${i}`]: 'b'}}), 'g', false);
      expect(labels[`team-${i}`]).toBe('a');
      expect(dropped).toEqual([`bad key ${i}`]);
    }
  });
});
