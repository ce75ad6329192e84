/**
 * A fault-injecting reverse proxy for the wire fakes (and moto): it sits between the real SDK
 * clients and an upstream server, names each request (cloud, operation, region or
 * subscription, account, page) and may spoil it — any status with any body, a truncated or
 * reset answer, a hang, a slow drip, or a real answer with single fields mutated.
 *
 *   const proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier(fake.world)});
 *   proxy.fault = (req) => (req.operation === 'ListClusters' && req.page === 'later' ? answer(200, '{}') : undefined);
 *
 * The proxy forwards headers unchanged (SigV4 signatures stay valid) and rewrites the
 * upstream origin to its own in answer bodies, so ARM `nextLink`s keep coming through it.
 */
import {createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse} from 'node:http';
import {createServer as createHttpsServer, request as httpsRequest} from 'node:https';
import type {AddressInfo, Socket} from 'node:net';
import type {ServerTls} from './tls-ca.ts';

/** The request as a fault rule sees it. */
export interface FaultRequest {
  readonly cloud: 'aws' | 'azure' | 'other';
  /** `ListClusters`, `DescribeCluster`, `GetCallerIdentity`, `AssumeRole`, `managedClusters.list`, `subscriptions.list` ... */
  readonly operation: string;
  /** AWS region from the SigV4 scope ('' for Azure). */
  readonly region: string;
  /** AWS account of the signing key, or the Azure subscription in the path ('' when none). */
  readonly account: string;
  /** `first` for the first page of a list (no continuation token), `later` otherwise. */
  readonly page: 'first' | 'later';
  /** Cluster named in the path (DescribeCluster, listClusterUserCredential). */
  readonly cluster?: string;
  readonly method: string;
  readonly path: string;
}

/** How to spoil one request. */
export type ProxyFault =
  /** Answer this status and body instead of asking upstream. */
  | {readonly kind: 'answer'; readonly status: number; readonly body: string | Buffer; readonly headers?: Readonly<Record<string, string>>}
  /** Ask upstream, then send its headers and only the first half of its body, and cut the connection. */
  | {readonly kind: 'truncate'}
  /** Cut the connection without answering. */
  | {readonly kind: 'reset'}
  /** Never answer. */
  | {readonly kind: 'hang'}
  /** Ask upstream, then send its body `bytes` at a time every `everyMs`. */
  | {readonly kind: 'drip'; readonly bytes: number; readonly everyMs: number}
  /** Ask upstream and rewrite its body (status and headers kept, length recomputed). */
  | {readonly kind: 'mutate'; readonly rewrite: (body: string) => string}
  /** Write these bytes on the connection instead of an HTTP answer, and close it. */
  | {readonly kind: 'raw'; readonly bytes: string};

/** Picks a fault per request; undefined forwards it untouched. */
export type ProxyFaultRule = (req: FaultRequest) => ProxyFault | undefined;

/** Names a request from its method, path, query and headers. */
export type Classifier = (method: string, url: URL, headers: IncomingHttpHeaders, body: string) => Omit<FaultRequest, 'method' | 'path'>;

/** Options of {@link startFaultProxy}. */
export interface FaultProxyOptions {
  /** `http(s)://127.0.0.1:<port>` of the server behind the proxy. */
  readonly upstream: string;
  readonly classify: Classifier;
  /** Serve HTTPS with this certificate (ARM clients refuse bearer tokens over plain HTTP). */
  readonly tls?: ServerTls;
  /** CA the upstream's certificate is checked against. */
  readonly upstreamCa?: string;
  readonly fault?: ProxyFaultRule;
}

/** A running proxy; `fault` may be replaced at any time. */
export interface FaultProxy {
  readonly url: string;
  fault: ProxyFaultRule | undefined;
  /** Requests the proxy saw, with the fault applied (if any), in arrival order. */
  readonly seen: {req: FaultRequest; fault?: ProxyFault['kind']}[];
  close(): Promise<void>;
}

/** An answer fault with a JSON content type by default. */
export function answer(status: number, body: string, headers: Readonly<Record<string, string>> = {}): ProxyFault {
  return {kind: 'answer', status, body, headers: {'content-type': 'application/json', ...headers}};
}

/** A mutate fault that edits the parsed JSON body. */
export function mutateJson(edit: (body: Record<string, unknown>) => unknown): ProxyFault {
  return {kind: 'mutate', rewrite: (text) => JSON.stringify(edit(JSON.parse(text) as Record<string, unknown>))};
}

/** Only requests matching every given field get `fault`. */
export function when(filter: Partial<FaultRequest>, fault: ProxyFault): ProxyFaultRule {
  return (req) => ((Object.keys(filter) as (keyof FaultRequest)[]).every((k) => filter[k] === req[k]) ? fault : undefined);
}

/** Classifies AWS requests: service and region from the SigV4 scope, account from the access key. */
export function awsClassifier(accountOf: (accessKeyId: string) => string | undefined): Classifier {
  return (method, url, headers, body) => {
    const auth = String(headers.authorization ?? '');
    const scope = /Credential=([^/]+)\/\d{8}\/([^/]+)\/([^/]+)\/aws4_request/.exec(auth);
    const region = scope?.[2] ?? '';
    const account = scope?.[1] ? (accountOf(scope[1]) ?? '') : '';
    const service = scope?.[3] ?? (url.pathname === '/' ? 'sts' : 'eks');
    if (service === 'sts') {
      const action = new URLSearchParams(body).get('Action') ?? url.searchParams.get('Action') ?? 'Unknown';
      return {cloud: 'aws', operation: action, region, account, page: 'first'};
    }
    if (service === 'organizations') {
      // JSON protocol: the operation is in X-Amz-Target, a later page's token in the body.
      const operation = String(headers['x-amz-target'] ?? '').split('.').pop() || 'Unknown';
      return {cloud: 'aws', operation, region, account, page: /"NextToken"\s*:\s*"/.test(body) ? 'later' : 'first'};
    }
    const describe = /^\/clusters\/([^/]+)$/.exec(url.pathname);
    if (method === 'GET' && url.pathname === '/clusters') {
      return {cloud: 'aws', operation: 'ListClusters', region, account, page: url.searchParams.has('nextToken') ? 'later' : 'first'};
    }
    if (method === 'GET' && describe?.[1]) {
      return {cloud: 'aws', operation: 'DescribeCluster', region, account, page: 'first', cluster: decodeURIComponent(describe[1])};
    }
    return {cloud: 'aws', operation: `${method} ${url.pathname}`, region, account, page: 'first'};
  };
}

/** Classifies ARM requests by path: subscriptions list, managed clusters list, user credentials. */
export function armClassifier(): Classifier {
  return (method, url) => {
    const path = url.pathname;
    // The management groups service spells it `$skiptoken`.
    const page = url.searchParams.has('$skipToken') || url.searchParams.has('$skiptoken') ? 'later' : 'first';
    const sub = /^\/subscriptions\/([^/]+)/i.exec(path)?.[1] ?? '';
    const cluster = /\/managedClusters\/([^/]+)/i.exec(path)?.[1];
    let operation = `${method} ${path}`;
    if (/^\/subscriptions\/?$/i.test(path)) operation = 'subscriptions.list';
    else if (/^\/providers\/Microsoft\.Management\/managementGroups\/[^/]+\/descendants\/?$/i.test(path)) operation = 'managementGroups.descendants';
    else if (/\/managedClusters\/?$/i.test(path)) operation = /\/resourceGroups\//i.test(path) ? 'managedClusters.listByResourceGroup' : 'managedClusters.list';
    else if (/\/listClusterUserCredential\/?$/i.test(path)) operation = 'managedClusters.listClusterUserCredentials';
    return {cloud: 'azure', operation, region: '', account: sub.toLowerCase(), page, ...(cluster ? {cluster: decodeURIComponent(cluster)} : {})};
  };
}

async function readAll(stream: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Starts the proxy on 127.0.0.1. */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const upstream = new URL(options.upstream);
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let origin = '';

  const forward = (req: IncomingMessage, body: Buffer): Promise<{status: number; headers: IncomingHttpHeaders; body: Buffer}> =>
    new Promise((resolve, reject) => {
      const send = upstream.protocol === 'https:' ? httpsRequest : httpRequest;
      const out = send(
        {
          host: upstream.hostname,
          port: upstream.port,
          method: req.method,
          path: req.url,
          headers: req.headers,
          ...(options.upstreamCa ? {ca: options.upstreamCa} : {}),
        },
        (res) => {
          readAll(res).then((buf) => resolve({status: res.statusCode ?? 502, headers: res.headers, body: buf}), reject);
        },
      );
      out.on('error', reject);
      out.end(body);
    });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readAll(req);
    const url = new URL(req.url ?? '/', 'http://proxy.invalid');
    const named: FaultRequest = {...options.classify(req.method ?? 'GET', url, req.headers, body.toString('utf8')), method: req.method ?? 'GET', path: url.pathname};
    const fault = proxy.fault?.(named);
    proxy.seen.push({req: named, ...(fault ? {fault: fault.kind} : {})});
    if (fault?.kind === 'hang') return;
    if (fault?.kind === 'reset') {
      req.socket.destroy();
      return;
    }
    if (fault?.kind === 'raw') {
      req.socket.end(fault.bytes);
      return;
    }
    if (fault?.kind === 'answer') {
      res.writeHead(fault.status, {'content-length': String(Buffer.byteLength(fault.body)), ...fault.headers});
      res.end(fault.body);
      return;
    }
    const up = await forward(req, body);
    // ARM's absolute nextLinks name the upstream; point them back at the proxy.
    let text = up.body.toString('utf8').split(upstream.origin).join(origin);
    if (fault?.kind === 'mutate') text = fault.rewrite(text);
    const out = Buffer.from(text, 'utf8');
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(up.headers)) {
      if (v === undefined || k === 'content-length' || k === 'transfer-encoding' || k === 'connection') continue;
      headers[k] = v;
    }
    if (fault?.kind === 'truncate') {
      res.writeHead(up.status, {...headers, 'content-length': String(out.length)});
      res.write(out.subarray(0, Math.floor(out.length / 2)));
      // Let the half body reach the client before the cut.
      const timer = setTimeout(() => res.destroy(), 20);
      timers.add(timer);
      return;
    }
    if (fault?.kind === 'drip') {
      res.writeHead(up.status, {...headers, 'content-length': String(out.length)});
      let offset = 0;
      const tick = (): void => {
        if (res.destroyed) return;
        res.write(out.subarray(offset, offset + fault.bytes));
        offset += fault.bytes;
        if (offset >= out.length) {
          res.end();
          return;
        }
        const timer = setTimeout(tick, fault.everyMs);
        timers.add(timer);
      };
      tick();
      return;
    }
    res.writeHead(up.status, {...headers, 'content-length': String(out.length)});
    res.end(out);
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) {
        res.writeHead(502, {'content-type': 'text/plain'});
        res.end(`fault proxy: ${String(error)}`);
      } else {
        res.destroy();
      }
    });
  };
  const server: Server = options.tls ? createHttpsServer({cert: options.tls.certPem, key: options.tls.keyPem}, onRequest) : createServer(onRequest);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  origin = `${options.tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const proxy: FaultProxy = {
    url: origin,
    fault: options.fault,
    seen: [],
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
  return proxy;
}
