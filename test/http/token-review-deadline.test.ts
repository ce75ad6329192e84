/** TokenReview calls have a deadline: an API server that drips its answer cannot hold an HTTP request of ours. */
import {afterAll, beforeAll, expect, it} from 'vitest';
import {inClusterTokenReviewer} from '../../src/http/auth.ts';
import {listenHttps, type HttpsListener} from '../fakes/http-server.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';

let server: HttpsListener;
let caPem: string;
const timers = new Set<NodeJS.Timeout>();

beforeAll(async () => {
  const tls = await sharedServerTls();
  caPem = tls.caPem;
  // Headers at once, then one byte of the body every 100 ms: an idle-socket timeout never fires.
  server = await listenHttps(tls, (_req, res) => {
    res.writeHead(201, {'content-type': 'application/json', 'content-length': '4096'});
    const tick = (): void => {
      if (res.destroyed) return;
      res.write(' ');
      const t = setTimeout(tick, 100);
      timers.add(t);
    };
    tick();
  });
});
afterAll(async () => {
  for (const t of timers) clearTimeout(t);
  await server.close();
});

it('fails a TokenReview whose answer drips in past the deadline', async () => {
  const review = inClusterTokenReviewer({apiServer: server.url, caPem, bearer: async () => 'pod-token', timeoutMs: 400});
  await expect(review('someone-elses-token')).rejects.toThrow(/abort|timed out/i);
});
