/**
 * The writer's identity (version, hostname, host_id) is the heartbeat's to stamp: discovery's
 * drafts leave it out, and the stored document still leads its spec with it, in Teleport's order,
 * so what readers and older replicas see is byte for byte what it was when discovery filled it in.
 */
import {describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerKey} from '../../heartbeats/kube-server.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {context, eksCluster, okResult} from '../discovery/builders.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

describe('the writer identity of a kube_server', () => {
  it('is not in the draft, and leads the stored spec as the heartbeat writes it', async () => {
    const clock = new FakeClock();
    const backend = new MemoryBackend({clock});
    const heartbeat = new Heartbeat({backend, clock, group: 'g1', ttlMs: 60_000, hostId: 'host-a', hostname: 'discovery-0', version: '1.2.3'});
    await heartbeat.start();
    try {
      const {candidates} = evaluate([okResult('us-east-1', '111111111111', [eksCluster('prod', 'us-east-1', '111111111111')])], context());
      const [candidate] = [...candidates.values()];
      if (!candidate) throw new Error('expected one candidate');
      expect(Object.keys(candidate.server.spec)).toEqual(['cluster', 'proxy_ids']);

      await heartbeat.announce(candidate.server);
      const item = await backend.get(kubeServerKey('g1', candidate.name));
      const stored = JSON.parse(item?.value ?? '{}') as {spec: Record<string, unknown>};
      expect(Object.keys(stored.spec)).toEqual(['version', 'hostname', 'host_id', 'cluster', 'proxy_ids']);
      expect(stored.spec).toMatchObject({version: '1.2.3', hostname: 'discovery-0', host_id: 'host-a'});
      // The draft's own spec, untouched, follows the identity.
      expect(item?.value).toContain(`"spec":{"version":"1.2.3","hostname":"discovery-0","host_id":"host-a",${JSON.stringify({cluster: candidate.server.spec.cluster}).slice(1, -1)},"proxy_ids":[]}`);
    } finally {
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  });
});
