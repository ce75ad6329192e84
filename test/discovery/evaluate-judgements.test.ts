// Evaluate remembers what it made of a cluster object (name, labels, match, document): a fetcher
// that hands on the same object for an unchanged cluster gets the same document back, and
// reconcile sees nothing to compare. Whatever else the document depends on still counts.
import {describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {LABEL} from '../../src/discovery/labels.ts';
import {changedFields} from '../../src/discovery/reconcile.ts';
import {context, eksCluster, okResult, stored} from './builders.ts';

const NAME = 'prod-eks-us-east-1-111111111111';

describe("evaluate's judgements", () => {
  it('gives the same document for the same cluster object, and reconcile finds it unchanged', () => {
    const cluster = eksCluster('prod', 'us-east-1', '111111111111');
    const ctx = context();
    const first = evaluate([okResult('us-east-1', '111111111111', [cluster])], ctx).candidates.get(NAME);
    const second = evaluate([okResult('us-east-1', '111111111111', [cluster])], {...ctx}).candidates.get(NAME);
    expect(second?.server).toBe(first?.server);
    expect(changedFields(stored(first!.server), second!.server)).toEqual([]);
  });

  it('writes the issuer of the cluster\'s service-account tokens into the document, and updates an entry stored without it', () => {
    const issuer = 'https://oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F60718293A4B5C6D7E8F9';
    for (const extra of [{authMode: 'API'}, {}]) {
      const withIssuer = evaluate([okResult('us-east-1', '111111111111', [eksCluster('prod', 'us-east-1', '111111111111', {...extra, oidcIssuer: issuer})])], context()).candidates.get(NAME);
      expect(withIssuer?.server.status?.oidc_issuer).toBe(issuer);
      const before = evaluate([okResult('us-east-1', '111111111111', [eksCluster('prod', 'us-east-1', '111111111111', extra)])], context()).candidates.get(NAME);
      expect(before?.server.status?.oidc_issuer).toBeUndefined();
      expect(changedFields(stored(before!.server), withIssuer!.server)).toEqual(['oidc_issuer']);
    }
  });

  it('builds a new document for an equal but different cluster object, equal to the first', () => {
    const first = evaluate([okResult('us-east-1', '111111111111', [eksCluster('prod', 'us-east-1', '111111111111')])], context()).candidates.get(NAME);
    const second = evaluate([okResult('us-east-1', '111111111111', [eksCluster('prod', 'us-east-1', '111111111111')])], context()).candidates.get(NAME);
    expect(second?.server).not.toBe(first?.server);
    expect(second?.server).toEqual(first?.server);
  });

  it('does not reuse a judgement under other static labels, dynamic labels, group or matcher', () => {
    const cluster = eksCluster('prod', 'us-east-1', '111111111111', {tags: {env: 'prod'}});
    const result = okResult('us-east-1', '111111111111', [cluster]);
    const plain = evaluate([result], context()).candidates.get(NAME);

    const labelled = evaluate([result], {...context(), staticLabels: {team: 'a'}}).candidates.get(NAME);
    expect(labelled?.server.spec.cluster.metadata.labels['team']).toBe('a');
    expect(plain?.server.spec.cluster.metadata.labels['team']).toBeUndefined();

    const dynamic = {uptime: {command: ['uptime'], period: '1m', result: 'up'}};
    const withDynamic = evaluate([result], {...context(), dynamicLabels: dynamic}).candidates.get(NAME);
    expect(withDynamic?.server.spec.cluster.spec.dynamic_labels).toEqual(dynamic);

    const otherGroup = evaluate([result], context('g2')).candidates.get(NAME);
    expect(otherGroup?.server.metadata.labels).toEqual({[LABEL.discoveryGroup]: 'g2'});
    expect(otherGroup?.labels[LABEL.discoveryGroup]).toBe('g2');

    const filtered = evaluate([result], context('g1', {env: 'dev'}));
    expect(filtered.candidates.size).toBe(0);
    expect(filtered.skips.map((s) => s.kind)).toEqual(['filtered']);

    // And back: the plain settings give the plain document again.
    expect(evaluate([result], context()).candidates.get(NAME)?.server).toEqual(plain?.server);
  });
});
