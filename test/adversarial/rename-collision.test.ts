/**
 * Adversarial: the rename migration moves an entry from its old name to Teleport's name. When the
 * new name is already taken by another cluster (a collision skip) or is not a valid name, the
 * cluster is still listed, well-formed and matching: its entry under the old name must stay, not
 * be deleted with nothing written in its place.
 */
import {describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {context, eksCluster, okResult, oldEntry, stored} from '../discovery/builders.ts';

const A = '111111111111';

describe('a rename whose new name is taken', () => {
  it('keeps the entry under its old name while the cluster is still listed', () => {
    const eks1 = eksCluster('eks1', 'us-east-1', A);
    const NEW = 'eks1-us-east-1-111111111111';
    const OLD = 'eks1-eks-us-east-1-111111111111';
    // Another cluster of the same source is registered under that very name (its name override tag).
    const squatter = eksCluster('zz-other', 'us-east-1', A, {tags: {env: 'prod', TeleportKubernetesName: NEW}});
    const squatterEntry = [...evaluate([okResult('us-east-1', A, [squatter])], context('g1')).candidates.values()].map((c) => stored(c.server));
    expect(squatterEntry.map((s) => s.metadata.name)).toEqual([NEW]);

    const both = okResult('us-east-1', A, [eks1, squatter]);
    const current = [oldEntry(okResult('us-east-1', A, [eks1]), OLD), ...squatterEntry];
    const registered = new Map(current.map((s) => [s.metadata.name, s.spec.cluster.spec.aws ? `AWS/${A}/us-east-1//${s.spec.cluster.spec.aws.name}` : '']));
    const evaluation = evaluate([both], {...context('g1'), registered});
    expect(evaluation.skips).toEqual([expect.objectContaining({name: NEW, cloudName: 'eks1', kind: 'collision'})]);

    const plan = reconcile(current, evaluation, [both], 'g1');
    expect(plan.items.find((i) => i.name === OLD)?.action).not.toBe('delete');
    expect(plan.items.filter((i) => i.action === 'delete')).toEqual([]);
  });
});
