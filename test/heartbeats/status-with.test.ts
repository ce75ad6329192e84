// statusWith's all-keys-at-once path tests
// `discoveredAt !== undefined` where the generic path tests truthiness, so an entry whose stored
// discovered_at is '' keeps it on a reachable cluster and loses it on any other: the two paths of one
// function give different documents for the same input.
import {describe, expect, it} from 'vitest';
import {statusWith, type KubeServer} from '../../heartbeats/kube-server.ts';

describe('statusWith', () => {
  it('gives the same keys on its fast path as on its generic one (discovered_at "")', () => {
    const status: NonNullable<KubeServer['status']> = {
      target_health: {status: 'unknown', reason: 'not_probed', message: 'not probed yet'},
      endpoint: 'https://a.example',
      ca_data: 'Y2E=',
      auth_mode: 'API',
      access: {kind: 'eks', cluster_name: 'a', region: 'us-east-1'},
    };
    const health = {status: 'healthy' as const, reason: 'ok', message: 'reachable'};
    // What the generic path gives any other status: the probe's health, and no empty discovered_at.
    const generic = {...status, target_health: health};
    expect(statusWith(status, health, '')).toEqual(generic);
  });
});
