import {describe, expect, it} from 'vitest';
import {clusterIdentity, evaluate, registeredIdentity} from '../../src/discovery/evaluate.ts';
import {context, eksCluster, failedResult, okResult} from './builders.ts';

describe('evaluate', () => {
  it('turns a kept, matching cluster into a candidate whose document names cloud, region and account', () => {
    const {candidates, skips} = evaluate([okResult('us-east-1', '111111111111', [eksCluster('prod', 'us-east-1', '111111111111')])], context());
    expect(skips).toEqual([]);
    const candidate = candidates.get('prod-eks-us-east-1-111111111111');
    expect(candidate?.server.spec.cluster.spec.aws).toEqual({region: 'us-east-1', account_id: '111111111111', name: 'prod'});
    expect(registeredIdentity(candidate!.server)).toBe(clusterIdentity(candidate!.cluster));
  });

  it('skips with a kind and a reason: status not kept, filtered out by the matcher, malformed', () => {
    const listed = okResult('us-east-1', '111111111111', [
      eksCluster('creating', 'us-east-1', '111111111111', {status: 'CREATING', statusOk: false}),
      eksCluster('dev', 'us-east-1', '111111111111', {tags: {env: 'dev'}}),
    ]);
    const result = {...listed, malformed: [{name: 'broken', sourceId: listed.source.id, reason: 'endpoint is missing'}]};
    const {candidates, skips} = evaluate([result], context('g1', {env: 'prod'}));
    expect(candidates.size).toBe(0);
    expect(skips.map((s) => [s.cloudName, s.kind])).toEqual([
      ['broken', 'malformed'],
      ['creating', 'status'],
      ['dev', 'filtered'],
    ]);
    expect(skips.find((s) => s.kind === 'status')?.reason).toContain('CREATING');
  });

  it('ignores failed sources: they neither add candidates nor skips', () => {
    const {candidates, skips} = evaluate([failedResult('us-east-1', '111111111111')], context());
    expect(candidates.size).toBe(0);
    expect(skips).toEqual([]);
  });

  it('keeps the already registered cluster on a name collision and skips the newcomer', () => {
    // Same name from two matchers' sources, but a different identity (resource group), so not the same cluster.
    const first = okResult('us-east-1', '111111111111', [eksCluster('prod', 'us-east-1', '111111111111')], 0);
    const second = okResult('us-east-1', '111111111111', [eksCluster('prod', 'us-east-1', '111111111111', {id: 'other', resourceGroup: 'x'})], 1);
    const plain = evaluate([first, second], context());
    expect(plain.candidates.size).toBe(1);
    expect(plain.skips.map((s) => s.kind)).toEqual(['collision']);
    const winner = [...plain.candidates.values()][0]!;
    const registered = new Map([[winner.name, clusterIdentity(second.clusters[0]!)]]);
    const kept = evaluate([first, second], {...context(), registered});
    expect(clusterIdentity(kept.candidates.get(winner.name)!.cluster)).toBe(clusterIdentity(second.clusters[0]!));
    expect(kept.skips.map((s) => s.kind)).toEqual(['collision']);
  });
});
