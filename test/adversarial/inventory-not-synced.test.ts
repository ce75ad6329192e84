/**
 * Adversarial: a replica starts while the registry refuses its listing (on `storage: kubernetes`,
 * the API server's priority and fairness answering the KubeServer list 429 while every replica of
 * a rolling update lists at once; a 5xx; an etcd member still electing). Its inventory has never
 * been read, yet /v1/kube_servers answered 200 with no items, /v1/kube_servers/{name} 404, and
 * /v1/watch a snapshot of nothing, `synced`; a client resuming with the Last-Event-ID of the
 * previous process was even told `reset`: "replace what you hold". Every reader dropped every
 * cluster, though no listing lacked one. /metrics counted 0 clusters for every cloud and health.
 * Until its first listing an inventory says nothing.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {captureIo} from '../helpers/env.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const GROUP = 'unsynced';
const NAMES = ['alpha', 'beta'];

const doc = (name: string): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {}, expires: new Date(Date.now() + 600_000).toISOString()}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

let kube: KubeEnv;
let leader: KubernetesBackend;

beforeAll(async () => {
  kube = await startKubeEnv();
  // What the leader registered before this replica (re)started.
  leader = new KubernetesBackend({client: await kube.clientAs('leader'), namespace: 'kd', clock: systemClock, identity: 'leader'});
  const lease = await leader.grantLease(600_000);
  for (const name of NAMES) await leader.put(`kube_servers/${GROUP}/${name}`, doc(name), {lease});
});

afterAll(async () => {
  await leader?.close();
  await kube?.close();
});

/** A read-only replica (it never writes: what it serves is only what it read). */
function config() {
  return parseConfig(
    `version: v1
discovery_service:
  enabled: false
  discovery_group: ${GROUP}
storage: {type: kubernetes, namespace: kd, kubeconfig: "${kube.kubeconfigPath}"}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`,
    'unsynced.yaml',
  );
}

/** The KubeServer list (not a watch, not one object) answered 429, as API priority and fairness does. */
function throttleKubeServerLists(): void {
  kube.server.setFault((call) =>
    call.method === 'GET' && !call.watch && call.path.endsWith('/kubeservers')
      ? {status: 429, body: '{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","code":429}'}
      : undefined,
  );
}

/** Reads the SSE stream until `synced` (or a few seconds): the event names and the names they carry. */
async function watchEvents(svc: RunningService, lastEventId?: string): Promise<{status: number; events: string[]}> {
  const controller = new AbortController();
  const res = await fetch(`${svc.url}/v1/watch`, {headers: lastEventId === undefined ? {} : {'last-event-id': lastEventId}, signal: controller.signal});
  if (res.status !== 200 || res.body === null) {
    await res.body?.cancel();
    return {status: res.status, events: []};
  }
  const events: string[] = [];
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const timer = setTimeout(() => controller.abort(), 5_000);
  try {
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      text += decoder.decode(value, {stream: true});
      let end: number;
      while ((end = text.indexOf('\n\n')) >= 0) {
        const frame = text.slice(0, end);
        text = text.slice(end + 2);
        const event = /^event: (.*)$/m.exec(frame)?.[1];
        if (event === undefined) continue;
        const data = /^data: (.*)$/m.exec(frame)?.[1] ?? '{}';
        const name = event === 'put' ? (JSON.parse(data) as KubeServer).metadata.name : event === 'delete' ? (JSON.parse(data) as {name: string}).name : undefined;
        events.push(name === undefined ? event : `${event} ${name}`);
        if (event === 'synced') return {status: 200, events};
      }
    }
  } catch {
    // Aborted after the time limit: what was read is the answer.
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
  return {status: 200, events};
}

/** The samples of kube_discovery_clusters_by_health in a /metrics body. */
function clusterSamples(body: string): [string, number][] {
  return [...body.matchAll(/^kube_discovery_clusters_by_health(\{[^}]*\}) (\S+)$/gm)].map((m) => [m[1] ?? '', Number(m[2])]);
}

describe('a replica whose first registry listing is refused', () => {
  it('tells no reader that the clusters are gone, and serves them once it could list', async () => {
    throttleKubeServerLists();
    const svc = await startService({config: config(), io: captureIo().io, clock: systemClock, logger: silentLogger});
    try {
      expect(svc.inventory.synced).toBe(false);

      const list = await fetch(`${svc.url}/v1/kube_servers`);
      const body = (await list.json()) as {items?: KubeServer[]; error?: string};
      expect({status: list.status, items: body.items?.map((s) => s.metadata.name)}, 'an inventory never read is served as an empty one').toEqual({status: 503, items: undefined});
      expect(body.error).toBe('not_synced');

      const one = await fetch(`${svc.url}/v1/kube_servers/alpha`);
      await one.body?.cancel();
      expect(one.status, 'a cluster of an inventory never read is answered "not found"').toBe(503);

      // An EventSource that was connected to the previous process resumes with its last id.
      const resumed = await watchEvents(svc, '0123abcd-42');
      expect(resumed, 'a resuming watcher is told to replace what it holds with nothing').toEqual({status: 503, events: []});
      const fresh = await watchEvents(svc);
      expect(fresh.status, 'a new watcher gets an empty snapshot marked synced').toBe(503);

      // The 503 and `ls` send a reader to /v1/status, whose summary said "follower; 0 clusters".
      const status = (await (await fetch(`${svc.url}/v1/status`)).json()) as {summary: string; backend: {synced: boolean}};
      expect(status.backend.synced).toBe(false);
      expect(status.summary, 'an inventory never read is summarised as an empty one').not.toMatch(/\b0 clusters\b/);
      expect(status.summary).toContain('registry not read yet');

      // A dashboard graphing kube_discovery_clusters_by_health was shown 0 clusters for every cloud and health.
      expect(clusterSamples(await (await fetch(`${svc.url}/metrics`)).text()), 'an inventory never read is counted as an empty one').toEqual([]);

      // The API server answers again: the next listing (here the one /readyz starts) serves everything.
      kube.server.setFault(undefined);
      await (await fetch(`${svc.url}/readyz`)).body?.cancel();
      expect(svc.inventory.synced).toBe(true);
      const after = (await (await fetch(`${svc.url}/v1/kube_servers`)).json()) as {items: KubeServer[]};
      expect(after.items.map((s) => s.metadata.name)).toEqual(NAMES);
      expect(((await (await fetch(`${svc.url}/v1/status`)).json()) as {summary: string}).summary).toMatch(/^follower\b.*; 2 clusters/);
      await expect.poll(async () => clusterSamples(await (await fetch(`${svc.url}/metrics`)).text()).reduce((sum, [, n]) => sum + n, 0)).toBe(NAMES.length);
      const snapshot = await watchEvents(svc, '0123abcd-42');
      expect(snapshot).toEqual({status: 200, events: ['reset', ...NAMES.map((n) => `put ${n}`), 'synced']});
    } finally {
      kube.server.setFault(undefined);
      await svc.stop({deregister: false});
    }
  }, 60_000);
});
