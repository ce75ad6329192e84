/**
 * TokenReview calls have a deadline and a size cap: an API server that drips its answer cannot hold
 * an HTTP request of ours, and one that sends megabytes cannot fill the heap (nor pass a verdict
 * hidden behind them). Both the in-cluster reviewer and the reviews against discovered clusters.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {inClusterTokenReviewer} from '../../src/http/auth.ts';
import {clusterTokenReviewer, parseAllowEntry} from '../../src/http/cluster-token-review.ts';
import {listenHttps, type HttpsListener} from '../fakes/http-server.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';
import {legacyToken} from '../helpers/sa-token.ts';

let drip: HttpsListener;
let padded: HttpsListener;
let caPem: string;
const timers = new Set<NodeJS.Timeout>();

/** A verdict that authenticates monitoring:grafana, after this many bytes of JSON whitespace. */
const PADDING = 2 * 1024 * 1024;
const VERDICT = JSON.stringify({apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', status: {authenticated: true, user: {username: 'system:serviceaccount:monitoring:grafana'}}});

beforeAll(async () => {
  const tls = await sharedServerTls();
  caPem = tls.caPem;
  // Headers at once, then one byte of the body every 100 ms: an idle-socket timeout never fires.
  drip = await listenHttps(tls, (_req, res) => {
    res.writeHead(201, {'content-type': 'application/json', 'content-length': '4096'});
    const tick = (): void => {
      if (res.destroyed) return;
      res.write(' ');
      const t = setTimeout(tick, 100);
      timers.add(t);
    };
    tick();
  });
  // A well-formed verdict behind 2 MiB of whitespace: no TokenReview answer is near that long.
  padded = await listenHttps(tls, (_req, res) => {
    res.writeHead(201, {'content-type': 'application/json'});
    res.end(Buffer.concat([Buffer.alloc(PADDING, 0x20), Buffer.from(VERDICT)]));
  });
});
afterAll(async () => {
  for (const t of timers) clearTimeout(t);
  await drip.close();
  await padded.close();
});

/** A discovered cluster whose API is `url`, allow-listed for monitoring:grafana. */
function cluster(name: string, url: string): KubeServer {
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels: {}, expires: '2099-01-01T00:00:00Z', revision: '1'},
    spec: {version: '0', hostname: 'h', host_id: 'x', proxy_ids: [], cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: '', labels: {}}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name}}}},
    status: {endpoint: url, ca_data: Buffer.from(caPem).toString('base64'), access: {kind: 'eks', cluster_name: name, region: 'us-east-1'}},
  };
}

function reviewerFor(server: KubeServer, timeoutMs: number) {
  return clusterTokenReviewer({entries: [parseAllowEntry(`${server.metadata.name}/monitoring:grafana`)], servers: () => [server], credential: async () => 'minted', timeoutMs});
}

describe('the in-cluster reviewer', () => {
  it('fails a TokenReview whose answer drips in past the deadline', async () => {
    const review = inClusterTokenReviewer({apiServer: drip.url, caPem, bearer: async () => 'pod-token', timeoutMs: 400});
    await expect(review('someone-elses-token')).rejects.toThrow(/abort|timed out/i);
  });

  it('fails an answer longer than any TokenReview answer, whatever verdict follows', async () => {
    const review = inClusterTokenReviewer({apiServer: padded.url, caPem, bearer: async () => 'pod-token', timeoutMs: 10_000});
    await expect(review(legacyToken('monitoring:grafana'))).rejects.toThrow(/longer than/);
  });
});

describe('reviews against discovered clusters', () => {
  it('refuse a token whose review drips in past the deadline, instead of holding the request', async () => {
    const review = reviewerFor(cluster('dripping', drip.url), 400);
    expect(await review(legacyToken('monitoring:grafana'))).toBeUndefined();
  });

  it('refuse a token whose review answer is longer than any TokenReview answer, whatever verdict follows', async () => {
    const review = reviewerFor(cluster('padded', padded.url), 10_000);
    expect(await review(legacyToken('monitoring:grafana'))).toBeUndefined();
  });
});
