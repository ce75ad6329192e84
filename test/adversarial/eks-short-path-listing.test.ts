/**
 * Adversarial: ListClusters answers that are well-formed HTTP, or nearly, but wrong — read on the
 * short path of lean-read.ts as the service wires it (the SDK's first call primes it), through the
 * service's own request handler. Each must fail the source (nothing deleted) or read exactly what
 * the answer lists; never fewer clusters. A raw loopback server sends the bytes, so the answers
 * may also be what no HTTP library would send (a Content-Length the body does not meet, bytes that
 * are not UTF-8).
 */
import net from 'node:net';
import {DescribeClusterCommand, EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import PQueue from 'p-queue';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {createEksFetcher} from '../../src/clouds/aws/eks-fetcher.ts';
import {describeClusterOperation, leanReads, listClustersOperation} from '../../src/clouds/aws/lean-read.ts';
import {leanSdkClient} from '../../src/clouds/aws/lean-sdk.ts';
import {awsRequestHandler, eksSource} from '../../src/clouds/aws/sources.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {CA, context, stored} from '../discovery/builders.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const KEY = {accessKeyId: 'AKIASHORTLISTING0001', secretAccessKey: 'short-listing-secret'};

/** A raw answer: status line and headers as given, then the body bytes; `close` ends the connection after them, `hold` never does. */
interface Raw {
  readonly status?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body: Buffer | string;
  /** Content-Length to claim instead of the body's. */
  readonly length?: number;
  readonly after?: 'keep' | 'close' | 'hold';
}

/** b carries a name tag (registered as `bravo`). */
const B_TAGS = '{"env":"prod","TeleportKubernetesName":"bravo"}';
const clusterJson = (name: string): string =>
  JSON.stringify({cluster: {name, arn: `arn:aws:eks:${REGION}:${ACCOUNT}:cluster/${name}`, status: 'ACTIVE', endpoint: `https://${name}.example`, certificateAuthority: {data: CA}, tags: JSON.parse(name === 'b' ? B_TAGS : '{"env":"prod"}') as object}});

/** The clean world: clusters a, b (page 1, token t1) and c (page 2). */
function clean(path: string, query: URLSearchParams): Raw {
  if (path === '/clusters') {
    return query.get('nextToken') === 't1' ? {body: '{"clusters":["c"]}'} : {body: '{"clusters":["a","b"],"nextToken":"t1"}'};
  }
  const name = /^\/clusters\/([^/]+)$/.exec(path)?.[1];
  if (name && ['a', 'b', 'c'].includes(name)) return {body: clusterJson(name)};
  return {status: '404 Not Found', headers: {'x-amzn-errortype': 'ResourceNotFoundException'}, body: '{"message":"No cluster found"}'};
}

let server: net.Server;
let url: string;
let spoil: ((path: string, query: URLSearchParams) => Raw | undefined) | undefined;
const sockets = new Set<net.Socket>();

function write(socket: net.Socket, raw: Raw): void {
  const body = typeof raw.body === 'string' ? Buffer.from(raw.body) : raw.body;
  const headers = {'content-type': 'application/json', 'x-amzn-requestid': 'req-1', ...raw.headers, 'content-length': String(raw.length ?? body.length)};
  socket.write(`HTTP/1.1 ${raw.status ?? '200 OK'}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
  socket.write(body);
  if (raw.after === 'close') socket.end();
}

beforeAll(async () => {
  server = net.createServer((socket) => {
    sockets.add(socket);
    // Head and body are two writes: without this, Nagle holds the body for the client's delayed ACK.
    socket.setNoDelay(true);
    socket.on('close', () => sockets.delete(socket));
    let pending = '';
    socket.on('data', (chunk) => {
      pending += chunk.toString('latin1');
      // GETs only: a request ends at its blank line.
      for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        const target = new URL(head.split(' ')[1] ?? '/', 'http://x');
        write(socket, spoil?.(target.pathname, target.searchParams) ?? clean(target.pathname, target.searchParams));
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});
beforeEach(() => {
  spoil = undefined;
});

/** A fetcher over a client wrapped and primed as the service's (short path), with the service's request handler. */
async function primed(requestTimeoutMs = 5_000): Promise<{fetch(): Promise<SourceResult>; fetchWith(signal: AbortSignal): Promise<SourceResult>; destroy(): void}> {
  const eks = leanSdkClient(new EKSClient({region: REGION, endpoint: url, credentials: KEY, maxAttempts: 1, requestHandler: awsRequestHandler(requestTimeoutMs)}));
  const client = leanReads(eks, [listClustersOperation(ListClustersCommand), describeClusterOperation(DescribeClusterCommand)]);
  await client.send(new ListClustersCommand({}));
  await client.send(new DescribeClusterCommand({name: 'a'}));
  const fetcher = createEksFetcher({source: eksSource(0, REGION, ACCOUNT), client, describeQueue: new PQueue({concurrency: 4})});
  return {fetch: () => fetcher.fetch(new AbortController().signal), fetchWith: (signal) => fetcher.fetch(signal), destroy: () => eks.destroy()};
}

const firstPage = (raw: Raw) => (path: string, query: URLSearchParams): Raw | undefined => (path === '/clusters' && !query.has('nextToken') ? raw : undefined);
const laterPage = (raw: Raw) => (path: string, query: URLSearchParams): Raw | undefined => (path === '/clusters' && query.has('nextToken') ? raw : undefined);

/** The entries a clean cycle registers, and a reconcile of `result` against them. */
async function deletesAfter(client: {fetch(): Promise<SourceResult>}, result: SourceResult): Promise<string[]> {
  spoil = undefined;
  const ctx = context('g1', {env: 'prod'});
  const before = await client.fetch();
  const current = [...evaluate([before], ctx).candidates.values()].map((c) => stored(c.server));
  expect(current).toHaveLength(3);
  const plan = reconcile(current, evaluate([result], ctx), [result], 'g1');
  return plan.items.filter((i) => i.action === 'delete').map((i) => i.name);
}

describe('a ListClusters answer that is wrong fails the source on the short path (nothing deleted)', () => {
  const nonUtf8 = Buffer.concat([Buffer.from('{"clusters":["a","b'), Buffer.from([0xff]), Buffer.from('"],"nextToken":"t1"}')]);
  const cases: [string, (path: string, query: URLSearchParams) => Raw | undefined][] = [
    ['a byte-order mark before the JSON', firstPage({body: '\uFEFF{"clusters":["a"],"nextToken":"t1"}'})],
    ['trailing garbage after the JSON', firstPage({body: '{"clusters":["a"],"nextToken":"t1"} <html>'})],
    ['two JSON documents', firstPage({body: '{"clusters":["a"],"nextToken":"t1"}{"clusters":["b"]}'})],
    ['a body shorter than its Content-Length, then the connection closed', firstPage({body: '{"clusters":["a"],"nextToken":"t1"}', length: 200, after: 'close'})],
    ['a later page shorter than its Content-Length, then closed', laterPage({body: '{"clusters":[]}', length: 200, after: 'close'})],
    ['a body shorter than its Content-Length, the connection held', firstPage({body: '{"clusters":["a"],"nextToken":"t1"}', length: 200, after: 'hold'})],
    ['an HTML page with status 200', firstPage({headers: {'content-type': 'text/html'}, body: '<html><body>Service Unavailable</body></html>'})],
    ['a 200 carrying x-amzn-ErrorType', firstPage({headers: {'x-amzn-errortype': 'ThrottlingException'}, body: '{"clusters":[]}'})],
    ['a 200 whose body names an error type (__type)', laterPage({body: '{"__type":"InternalFailure","clusters":[]}'})],
    ['a 200 naming an error type under an escaped key ("\\u005f_type")', laterPage({body: '{"\\u005f_type":"InternalFailure","clusters":[]}'})],
    // b's name with a byte that is not UTF-8 after it: read as "b\uFFFD", b itself was not listed.
    ['a name that is not UTF-8', firstPage({body: nonUtf8})],
    ['a name that is not an EKS cluster name', firstPage({body: '{"clusters":["a","b c"],"nextToken":"t1"}'})],
    ['a name with a path in it', firstPage({body: '{"clusters":["a","../b"],"nextToken":"t1"}'})],
    ['an empty name', firstPage({body: '{"clusters":["a",""],"nextToken":"t1"}'})],
    ['clusters missing', firstPage({body: '{"nextToken":"t1"}'})],
    ['clusters null', laterPage({body: '{"clusters":null}'})],
    ['clusters an object', firstPage({body: '{"clusters":{"0":"a","1":"b"}}'})],
    ['a nextToken that comes back two pages later', (path, query) => {
      if (path !== '/clusters') return undefined;
      const token = query.get('nextToken');
      return {body: token === null ? '{"clusters":["a"],"nextToken":"t1"}' : token === 't1' ? '{"clusters":["b"],"nextToken":"t2"}' : '{"clusters":["c"],"nextToken":"t1"}'};
    }],
    ['a nextToken that is a number', firstPage({body: '{"clusters":["a","b"],"nextToken":7}'})],
    ['a nextToken that is an object', firstPage({body: '{"clusters":["a","b"],"nextToken":{"t":"t1"}}'})],
  ];
  for (const [what, rule] of cases) {
    it(`${what}`, async () => {
      const client = await primed(800);
      try {
        spoil = rule;
        const result = await client.fetch();
        if (result.ok) expect(result.clusters.map((c) => c.name)).toEqual(['a', 'b', 'c']);
        else expect(result.error?.operation).toBe('ListClusters');
        expect(await deletesAfter(client, result)).toEqual([]);
      } finally {
        client.destroy();
      }
    });
  }
});

describe('odd but complete listings read exactly what they list', () => {
  it('duplicate names: each cluster once', async () => {
    const client = await primed();
    try {
      spoil = firstPage({body: '{"clusters":["a","b","a","b"],"nextToken":"t1"}'});
      const result = await client.fetch();
      expect(result.ok).toBe(true);
      expect(result.clusters.map((c) => c.name)).toEqual(['a', 'b', 'c']);
    } finally {
      client.destroy();
    }
  });
});

describe("a 200 carrying x-amzn-ErrorType on the SDK's own path and for DescribeCluster", () => {
  it("ListClusters on the SDK's path (a client's first call): the source fails, nothing deleted", async () => {
    const eks = leanSdkClient(new EKSClient({region: REGION, endpoint: url, credentials: KEY, maxAttempts: 1, requestHandler: awsRequestHandler(5_000)}));
    try {
      const fetcher = createEksFetcher({source: eksSource(0, REGION, ACCOUNT), client: eks, describeQueue: new PQueue({concurrency: 4})});
      spoil = laterPage({headers: {'x-amzn-errortype': 'InternalFailure'}, body: '{"clusters":[]}'});
      const result = await fetcher.fetch(new AbortController().signal);
      expect(result).toMatchObject({ok: false, error: {operation: 'ListClusters', reason: 'invalid_response'}});
    } finally {
      eks.destroy();
    }
  });

  it('DescribeCluster on the short path: that cluster is malformed (kept), the others found', async () => {
    const client = await primed();
    try {
      spoil = (path) => (path === '/clusters/b' ? {headers: {'x-amzn-errortype': 'ResourceNotFoundException'}, body: clusterJson('b').replace('ACTIVE', 'DELETING')} : undefined);
      const result = await client.fetch();
      expect(result.ok).toBe(true);
      expect(result.clusters.map((c) => c.name)).toEqual(['a', 'c']);
      expect(result.malformed).toEqual([expect.objectContaining({name: 'b'})]);
    } finally {
      client.destroy();
    }
  });
});

describe('a tag named __type is a tag, not an error type', () => {
  it('b tagged `__type` (and a name tag escaped as \\u0054...) is read as listed, with its tags', async () => {
    const client = await primed();
    try {
      const tags = '{"env":"prod","__type":"InternalFailure","\\u0054eleportKubernetesName":"bravo"}';
      spoil = (path) => (path === '/clusters/b' ? {body: clusterJson('b').replace(B_TAGS, tags)} : undefined);
      const result = await client.fetch();
      expect(result.ok).toBe(true);
      expect(result.malformed).toEqual([]);
      expect(result.clusters.find((c) => c.name === 'b')?.tags).toEqual({env: 'prod', __type: 'InternalFailure', TeleportKubernetesName: 'bravo'});
      expect(await deletesAfter(client, result)).toEqual([]);
    } finally {
      client.destroy();
    }
  });
});

describe('a DescribeCluster answer with bytes that are not UTF-8 in a tag', () => {
  /** b's answer with its tags as these bytes. */
  const withTags = (...parts: (string | number)[]): Buffer => {
    const [head, tail] = clusterJson('b').split(B_TAGS);
    return Buffer.concat([Buffer.from(head ?? ''), ...parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from([p]))), Buffer.from(tail ?? '')]);
  };
  const cases: [string, Buffer][] = [
    // "prod" with its last byte garbled: decoded as "pro\uFFFD", b would no longer match `env: prod`.
    ['a tag value', withTags('{"env":"pro', 0xff, '","TeleportKubernetesName":"bravo"}')],
    // "bravo" garbled: b would be renamed (its entry deleted).
    ['the name tag', withTags('{"env":"prod","TeleportKubernetesName":"brav', 0xff, '"}')],
    ['a tag key', withTags('{"env":"prod","TeleportKubernetesName":"bravo","te', 0xff, 'm":"x"}')],
  ];
  for (const [what, body] of cases) {
    it(`${what}: b is malformed (kept), nothing deregistered or renamed`, async () => {
      const client = await primed();
      try {
        spoil = (path) => (path === '/clusters/b' ? {body} : undefined);
        const result = await client.fetch();
        expect(await deletesAfter(client, result)).toEqual([]);
        expect(result.malformed).toEqual([expect.objectContaining({name: 'b'})]);
      } finally {
        client.destroy();
      }
    });
  }
});

describe('a listing that never ends', () => {
  it('fresh nextTokens for ever: the cycle\'s abort fails the source, nothing is read as listed', async () => {
    const client = await primed();
    try {
      let n = 0;
      spoil = (path) => (path === '/clusters' ? {body: JSON.stringify({clusters: ['a'], nextToken: `t-${n++}`})} : undefined);
      const controller = new AbortController();
      const fetcher = client.fetchWith(controller.signal);
      // Let it page a while, then stop it as the cycle deadline would.
      while (n < 50) await new Promise((resolve) => setImmediate(resolve));
      controller.abort(new Error('cycle deadline'));
      const result = await fetcher;
      expect(result).toMatchObject({ok: false, clusters: [], error: {operation: 'ListClusters'}});
    } finally {
      client.destroy();
    }
  });
});

describe('listings larger than any EKS answer (the heap is the bound otherwise)', () => {
  it('a page listing more names than asked for (maxResults) is no page of this listing: the source fails', async () => {
    const client = await primed();
    try {
      const names = Array.from({length: 101}, (_, i) => `n${i}`);
      spoil = firstPage({body: JSON.stringify({clusters: names})});
      const result = await client.fetch();
      expect(result).toMatchObject({ok: false, clusters: [], error: {operation: 'ListClusters', reason: 'invalid_response'}});
    } finally {
      client.destroy();
    }
  });

  it('full pages with fresh nextTokens past 100,000 names fail the source by themselves, without waiting for the cycle deadline', async () => {
    const client = await primed();
    try {
      let pages = 0;
      spoil = (path) => {
        if (path !== '/clusters') return undefined;
        pages++;
        // Past the bound: a 500, so that the listing ends either way and the pages asked for tell.
        if (pages > 1_100) return {status: '500 Internal Server Error', headers: {'x-amzn-errortype': 'InternalFailure'}, body: '{"message":"stop"}'};
        return {body: JSON.stringify({clusters: Array.from({length: 100}, (_, i) => `p${pages}-${i}`), nextToken: `t-${pages}`})};
      };
      const result = await client.fetch();
      expect(result).toMatchObject({ok: false, clusters: [], error: {operation: 'ListClusters', reason: 'invalid_response'}});
      // 1,000 full pages are 100,000 names; the next page is not asked for.
      expect(pages).toBeLessThanOrEqual(1_001);
    } finally {
      client.destroy();
    }
  });
});
