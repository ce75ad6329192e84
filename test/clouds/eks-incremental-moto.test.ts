/**
 * Incremental EKS discovery against moto, an AWS emulator we did not write: whatever its
 * Resource Groups Tagging API answers for EKS clusters (it may not know them), a steady-state
 * cycle finds exactly what a full-describe cycle finds, and a listed cluster is never dropped.
 */
import {CreateClusterCommand, EKSClient, TagResourceCommand} from '@aws-sdk/client-eks';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {setEnv} from '../helpers/env.ts';
import {describeWithMoto, startMoto, type Moto} from '../helpers/moto.ts';

describeWithMoto('incremental EKS discovery against moto', () => {
  let moto: Moto;
  let restoreEnv: () => void;

  beforeAll(async () => {
    moto = await startMoto();
    restoreEnv = setEnv({...moto.env, AWS_MAX_ATTEMPTS: '2'});
    const eks = new EKSClient({region: 'us-east-1'});
    for (const [name, tags] of [['alpha', {env: 'prod'}], ['beta', {env: 'dev'}], ['gamma', undefined]] as const) {
      await eks.send(
        new CreateClusterCommand({
          name,
          roleArn: 'arn:aws:iam::123456789012:role/eks',
          resourcesVpcConfig: {subnetIds: ['subnet-1', 'subnet-2']},
          ...(tags ? {tags} : {}),
        }),
      );
    }
    eks.destroy();
  }, 60_000);

  afterAll(async () => {
    restoreEnv?.();
    await moto?.stop();
  });

  // moto's clusters carry a CA that is not base64 PEM: each is still reported, as a cluster that
  // cannot be reached (registered unhealthy), with its tags.
  const names = (results: readonly SourceResult[]): string[] =>
    results.flatMap((r) => [...r.clusters.map((c) => `${c.name}:${JSON.stringify(c.tags)}`), ...r.malformed.map((m) => `${m.name}:malformed`)]).sort();

  async function cycle(sources: AwsSources): Promise<SourceResult[]> {
    const {fetchers, failed} = await sources.plan([{types: ['eks'], regions: ['us-east-1']}]);
    expect(failed).toEqual([]);
    return Promise.all(fetchers.map((f) => f.fetch(new AbortController().signal)));
  }

  it('a steady-state cycle reports what a full describe reports and drops nothing, after a retag too', async () => {
    const clock = new FakeClock();
    const incremental = new AwsSources({clock});
    const first = await cycle(incremental);
    expect(first.every((r) => r.ok)).toBe(true);
    expect(names(first)).toEqual(['alpha:{"env":"prod"}', 'beta:{"env":"dev"}', 'gamma:{}']);
    expect(first.flatMap((r) => r.clusters.map((c) => c.unreachable?.reason))).toEqual(['invalid_ca', 'invalid_ca', 'invalid_ca']);

    const eks = new EKSClient({region: 'us-east-1'});
    await eks.send(new TagResourceCommand({resourceArn: 'arn:aws:eks:us-east-1:123456789012:cluster/beta', tags: {env: 'staging'}}));
    eks.destroy();

    await clock.advance(60_000);
    const second = await cycle(incremental);
    expect(second.every((r) => r.ok)).toBe(true);
    const full = await cycle(new AwsSources({clock, refreshMs: 0}));
    expect(names(second)).toEqual(names(full));
    expect(names(second)).toEqual(['alpha:{"env":"prod"}', 'beta:{"env":"staging"}', 'gamma:{}']);
  }, 60_000);
});
