import {describe, expect, it} from 'vitest';
import {evaluate, registeredIdentity} from '../../src/discovery/evaluate.ts';
import {kubeServerName} from '../../src/discovery/naming.ts';
import {context, eksCluster, okResult} from './builders.ts';

describe('kube_server names', () => {
  it('appends type, region and account so equal cloud names stay distinct', () => {
    const names = [
      eksCluster('prod', 'us-east-1', '111111111111'),
      eksCluster('prod', 'us-west-2', '111111111111'),
      eksCluster('prod', 'us-east-1', '222222222222'),
    ].map((c) => kubeServerName(c).name);
    expect(names).toEqual(['prod-eks-us-east-1-111111111111', 'prod-eks-us-west-2-111111111111', 'prod-eks-us-east-1-222222222222']);
    expect(new Set(names).size).toBe(3);
  });

  it('leaves out parts the cloud name already contains', () => {
    expect(kubeServerName(eksCluster('prod-us-east-1', 'us-east-1', '111111111111')).name).toBe('prod-us-east-1-eks-111111111111');
    expect(kubeServerName(eksCluster('my-eks', 'us-east-1', '111111111111')).name).toBe('my-eks-us-east-1-111111111111');
    // Teleport's rule: any case-insensitive substring counts, so "eks1" already says "eks".
    expect(kubeServerName(eksCluster('eks1', 'us-east-1', '111111111111')).name).toBe('eks1-us-east-1-111111111111');
  });

  it('lets the TeleportKubernetesName tag override the name', () => {
    const c = eksCluster('prod', 'us-east-1', '111111111111', {tags: {TeleportKubernetesName: 'payments'}});
    expect(kubeServerName(c)).toEqual({name: 'payments', overridden: true, renamed: false});
  });

  it('keeps the first of two clusters that still collide and reports the second', () => {
    const first = eksCluster('a', 'us-east-1', '111111111111', {tags: {TeleportKubernetesName: 'shared'}});
    const second = eksCluster('b', 'us-west-2', '111111111111', {tags: {TeleportKubernetesName: 'shared'}});
    const evaluation = evaluate([okResult('us-west-2', '111111111111', [second]), okResult('us-east-1', '111111111111', [first])], context());
    expect(evaluation.candidates.get('shared')?.cluster.name).toBe('a');
    expect(evaluation.skips).toMatchObject([{cloudName: 'b', kind: 'collision'}]);
  });

  it('drops tags whose keys are not valid labels and adds the derived labels', () => {
    const c = eksCluster('c', 'us-east-1', '111111111111', {tags: {env: 'prod', 'bad key!': 'x'}});
    const evaluation = evaluate([okResult('us-east-1', '111111111111', [c])], context('grp'));
    const labels = evaluation.candidates.get('c-eks-us-east-1-111111111111')?.labels;
    expect(labels).toEqual({
      env: 'prod',
      'teleport.dev/origin': 'cloud',
      'teleport.dev/cloud': 'AWS',
      'teleport.dev/discovery-type': 'eks',
      region: 'us-east-1',
      'account-id': '111111111111',
      'teleport.internal/discovery-group-name': 'grp',
      'teleport.internal/discovered-name': 'c',
    });
    expect(evaluation.notes.join()).toContain('bad key!');
  });

  it('matches tags on derived labels such as region', () => {
    const results = [okResult('us-east-1', '1', [eksCluster('x', 'us-east-1', '1')]), okResult('eu-west-1', '1', [eksCluster('y', 'eu-west-1', '1')])];
    const evaluation = evaluate(results, context('g', {region: 'us-*'}));
    expect([...evaluation.candidates.keys()]).toEqual(['x-eks-us-east-1-1']);
    expect(evaluation.skips).toMatchObject([{cloudName: 'y', kind: 'filtered'}]);
  });
});

describe('collisions with a registered cluster', () => {
  it('lets the cluster already registered under a name keep it when a newcomer sorts first', () => {
    const owner = eksCluster('b', 'us-west-2', '111111111111', {tags: {TeleportKubernetesName: 'shared'}});
    const newcomer = eksCluster('a', 'us-east-1', '111111111111', {tags: {TeleportKubernetesName: 'shared'}});
    const results = [okResult('us-east-1', '111111111111', [newcomer]), okResult('us-west-2', '111111111111', [owner])];
    const first = evaluate([results[1]!], context());
    const registered = new Map([['shared', registeredIdentity(first.candidates.get('shared')!.server)]]);
    const evaluation = evaluate(results, {...context(), registered});
    expect(evaluation.candidates.get('shared')?.cluster.name).toBe('b');
    expect(evaluation.skips).toMatchObject([{cloudName: 'a', kind: 'collision'}]);
  });
});
