/**
 * Sizing of `storage: kubernetes`: API-server calls per discovery cycle at N clusters, counted by
 * the wire-level fake API server while the real backend and client do what one cycle does:
 * the registrar's listing, the writes of changed entries (churn), the keepalive, and an
 * inventory resync; plus the first cycle that announces everything. Also reports the memory
 * cost of loading @kubernetes/client-node.
 *
 *   node bench/kube-api-calls.ts -- --clusters 10000 [--churn 0.01]
 */
import {parseArgs} from 'node:util';
import {FakeClock} from '../test/helpers/fake-clock.ts';
import {KubernetesBackend} from '../src/registry/kubernetes.ts';
import {startKubeEnv} from '../test/kubernetes/kube-env.ts';

const {values} = parseArgs({options: {clusters: {type: 'string', default: '10000'}, churn: {type: 'string', default: '0.01'}}, allowPositionals: true});
const n = Number(values.clusters);
const churn = Number(values.churn);

const rssBefore = process.memoryUsage().rss;
const env = await startKubeEnv({bookmarkIntervalMs: 0});
const client = await env.client({qps: 1e6, burst: 1e6});
const clientRssMb = (process.memoryUsage().rss - rssBefore) / 1048576;
const clock = new FakeClock();
const backend = new KubernetesBackend({client, namespace: 'kd', clock});
const prefix = 'kube_servers/mgmt/';
const doc = (i: number, rev: number) => JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name: `c${i}`, labels: {env: 'prod'}}, spec: {rev, cluster: {spec: {aws: {region: 'us-east-1'}}}}});

function count(from: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of env.server.calls.slice(from)) {
    const what = `${c.method} ${c.path.split('/').at(-1)?.startsWith('kd-') || /\/(kubeservers|leases)\/[^/]+$/.test(c.path) ? c.path.replace(/\/[^/]+$/, '/{name}').split('/').slice(-2).join('/') : c.path.split('/').at(-1)}`;
    out[what] = (out[what] ?? 0) + 1;
  }
  return out;
}
const total = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

let mark = env.server.calls.length;
const started = Date.now();
const lease = await backend.grantLease(600_000);
await backend.list(prefix);
for (let i = 0; i < n; i++) await backend.put(`${prefix}c${i}`, doc(i, 0), {lease});
const first = count(mark);
const firstMs = Date.now() - started;

mark = env.server.calls.length;
await backend.list(prefix); // registrar: what is registered now
const changed = Math.round(n * churn);
for (let i = 0; i < changed; i++) await backend.put(`${prefix}c${i}`, doc(i, 1), {lease});
await backend.keepAlive(lease);
const steady = count(mark);

mark = env.server.calls.length;
await backend.keepAlive(lease);
const keepalive = count(mark);

mark = env.server.calls.length;
await backend.list(prefix);
const resync = count(mark);

console.log(JSON.stringify({
  clusters: n,
  churn,
  client_node_rss_mb: Math.round(clientRssMb),
  first_cycle: {calls: total(first), by: first, wall_ms: firstMs},
  steady_cycle: {calls: total(steady), by: steady},
  keepalive: {calls: total(keepalive), by: keepalive},
  inventory_resync: {calls: total(resync), by: resync},
}, null, 2));
await backend.close();
await env.close();
