// statusWith's all-keys-at-once path tests
// `discoveredAt !== undefined` where the generic path tests truthiness, so an entry whose stored
// discovered_at is '' keeps it on a reachable cluster and loses it on any other: the two paths of one
// function give different documents for the same input.
import {describe, expect, it} from 'vitest';
import {statusWith} from '../../heartbeats/kube-server.ts';
import {unprobedEksStatus} from '../helpers/kube-status.ts';

describe('statusWith', () => {
  it('gives the same keys on its fast path as on its generic one (discovered_at "")', () => {
    const status = unprobedEksStatus();
    const health = {status: 'healthy' as const, reason: 'ok', message: 'reachable'};
    // What the generic path gives any other status: the probe's health, and no empty discovered_at.
    const generic = {...status, target_health: health};
    expect(statusWith(status, health, '')).toEqual(generic);
  });

  it('keeps the token issuer of a reachable cluster, with the keys in the generic path\'s order', () => {
    const status = unprobedEksStatus({oidc_issuer: 'https://oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F60718293A4B5C6D7E8F9'});
    const health = {status: 'healthy' as const, reason: 'ok', message: 'reachable'};
    const generic = {...status, target_health: health, discovered_at: '2026-11-24T00:00:00Z'};
    const made = statusWith(status, health, '2026-11-24T00:00:00Z');
    expect(made).toEqual(generic);
    expect(Object.keys(made)).toEqual(Object.keys(generic));
  });
});
