/**
 * The AWS clients' undici transport (src/clouds/aws/undici-handler.ts) at the wire: a scripted
 * TCP server answers each request the way a fault looks on the network (no answer, a body that
 * stops or is cut, bytes that are not HTTP), and the real EKS client with the service's request
 * handler must report each as the SDK's own handler did — timeouts as retryable `TimeoutError`,
 * cuts as `ECONNRESET`, never a short body read as an answer — abort through the SDK's signal,
 * keep its socket cap, run no deadline while a call waits for a socket, and name no secret.
 */
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import {EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import {HttpRequest} from '@smithy/protocol-http';
import {afterEach, describe, expect, it} from 'vitest';
import {awsFailure} from '../../src/clouds/aws/errors.ts';
import {awsRequestHandler} from '../../src/clouds/aws/sources.ts';
import {AwsDispatcher, UndiciHttpHandler} from '../../src/clouds/aws/undici-handler.ts';
import {createTestCa} from '../fakes/tls-ca.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';

const CREDENTIALS = {accessKeyId: 'AKIAUNDICIHANDLER001', secretAccessKey: 'undici-handler-secret-key', sessionToken: 'undici-handler-session-token'};
const SECRETS = [CREDENTIALS.secretAccessKey, CREDENTIALS.sessionToken, 'Signature='];

/** What the scripted server does with one request on one connection. */
type Script = (socket: net.Socket, request: {readonly head: string; readonly index: number}) => void;

interface RawServer {
  readonly url: string;
  /** Requests seen (request line and headers), in order. */
  readonly requests: string[];
  /** Most connections open at once. */
  readonly peakConnections: () => number;
  /** Connections accepted in all. */
  readonly connections: () => number;
  close(): Promise<void>;
}

const servers: RawServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A loopback TCP server that reads each HTTP/1.1 request (head and content-length body) and hands it to `script`. */
async function rawServer(script: Script): Promise<RawServer> {
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  let peak = 0;
  let accepted = 0;
  const server = net.createServer((socket) => {
    accepted++;
    sockets.add(socket);
    peak = Math.max(peak, sockets.size);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buffered = Buffer.alloc(0);
    socket.on('data', (data: Buffer) => {
      buffered = Buffer.concat([buffered, data]);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffered.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.subarray(end + 4 + length);
        requests.push(head);
        script(socket, {head, index: requests.length - 1});
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const {port} = server.address() as net.AddressInfo;
  const raw: RawServer = {
    url: `http://127.0.0.1:${port}`,
    requests,
    peakConnections: () => peak,
    connections: () => accepted,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  servers.push(raw);
  return raw;
}

const LIST = JSON.stringify({clusters: ['a', 'b']});
const ok = (socket: net.Socket, body = LIST, extra = ''): void => {
  socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-amzn-requestid: req-1\r\n${extra}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
};

function eks(url: string, options: {requestTimeoutMs?: number; maxAttempts?: number} = {}): EKSClient {
  return new EKSClient({
    region: 'us-east-1',
    endpoint: url,
    credentials: CREDENTIALS,
    maxAttempts: options.maxAttempts ?? 1,
    retryMode: 'standard',
    requestHandler: awsRequestHandler(options.requestTimeoutMs ?? 400, undefined, 200),
  });
}

/** The rejection of `call`; fails the test when it resolves. */
async function failure(call: Promise<unknown>): Promise<Error & {code?: string; $metadata?: {attempts?: number}}> {
  const outcome = await call.then(
    (value) => ({value}),
    (error: unknown) => ({error}),
  );
  if (!('error' in outcome)) throw new Error(`expected a failure, got ${JSON.stringify(outcome.value)}`);
  return outcome.error as Error & {code?: string};
}

function expectNoSecret(error: unknown): void {
  const printed = `${String(error)} ${JSON.stringify(error)} ${JSON.stringify(awsFailure(error, 'ListClusters'))}`;
  for (const secret of SECRETS) expect(printed).not.toContain(secret);
}

describe('the undici request handler of the AWS clients', () => {
  it('sends the signed request and gives the SDK the whole answer (pages read as usual)', async () => {
    const server = await rawServer((socket, {index}) => ok(socket, index < 3 ? JSON.stringify({clusters: [`c${index}`], nextToken: `t${index + 1}`}) : JSON.stringify({clusters: ['last']})));
    const client = eks(server.url);
    try {
      const names: string[] = [];
      let nextToken: string | undefined;
      do {
        const page = await client.send(new ListClustersCommand({maxResults: 1, ...(nextToken ? {nextToken} : {})}));
        names.push(...(page.clusters ?? []));
        expect(page.$metadata.requestId).toBe('req-1');
        nextToken = page.nextToken;
      } while (nextToken);
      expect(names).toEqual(['c0', 'c1', 'c2', 'last']);
      expect(server.requests[1]).toMatch(/^GET \/clusters\?maxResults=1&nextToken=t1 HTTP\/1\.1\r\n/);
      expect(server.requests[1]).toMatch(/\r\nauthorization: AWS4-HMAC-SHA256 Credential=AKIAUNDICIHANDLER001\//i);
      // Keep-alive: undici checks an idle socket for one event-loop turn before reusing it, so
      // back-to-back calls alternate between two connections at most.
      expect(server.connections()).toBeLessThanOrEqual(2);
    } finally {
      client.destroy();
    }
  });

  it('joins repeated answer headers with commas and keeps status and reason, as smithy does', async () => {
    const server = await rawServer((socket) => ok(socket, '{}', 'x-test: a\r\nx-test: b\r\n'));
    const handler = awsRequestHandler(400);
    try {
      const url = new URL(server.url);
      const {response} = await handler.handle(new HttpRequest({protocol: 'http:', hostname: url.hostname, port: Number(url.port), method: 'POST', path: '/x', query: {a: 'b c'}, headers: {'content-type': 'application/json'}, body: '{"q":1}'}));
      expect(response.statusCode).toBe(200);
      expect(response.reason).toBe('OK');
      expect(response.headers['x-test']).toBe('a,b');
      expect(Buffer.from(response.body as Uint8Array).toString()).toBe('{}');
      expect(server.requests[0]).toMatch(/^POST \/x\?a=b%20c HTTP\/1\.1\r\n/);
    } finally {
      handler.destroy();
    }
  });

  it('an answer that never comes: TimeoutError (ETIMEDOUT) after the answer deadline, retried by the SDK, a timeout for the source', async () => {
    const server = await rawServer(() => undefined);
    const client = eks(server.url, {maxAttempts: 2});
    try {
      const error = await failure(client.send(new ListClustersCommand({})));
      expect(error).toMatchObject({name: 'TimeoutError', code: 'ETIMEDOUT'});
      expect(error.message).toContain('no answer');
      expect(error.$metadata?.attempts).toBe(2);
      expect(server.requests).toHaveLength(2);
      expect(awsFailure(error, 'ListClusters').reason).toBe('timeout');
      expectNoSecret(error);
    } finally {
      client.destroy();
    }
  });

  it('headers, then a body that stops: TimeoutError (ETIMEDOUT) once the body is silent for the answer deadline', async () => {
    const server = await rawServer((socket) => socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${LIST.length}\r\n\r\n${LIST.slice(0, 5)}`));
    const client = eks(server.url);
    try {
      const error = await failure(client.send(new ListClustersCommand({})));
      expect(error).toMatchObject({name: 'TimeoutError', code: 'ETIMEDOUT'});
      expect(error.message).toContain('stopped');
      expect(awsFailure(error, 'ListClusters').reason).toBe('timeout');
      expectNoSecret(error);
    } finally {
      client.destroy();
    }
  });

  const cuts: [string, Script][] = [
    ['a body shorter than its content-length, then the connection closed', (socket) => socket.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${LIST.length}\r\n\r\n${LIST.slice(0, 12)}`)],
    ['a chunked body cut before its last chunk', (socket) => socket.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5\r\n${LIST.slice(0, 5)}\r\n`)],
    ['a connection reset before any answer', (socket) => socket.resetAndDestroy()],
    ['a connection closed before any answer', (socket) => socket.end()],
  ];
  for (const [name, script] of cuts) {
    it(`${name}: a retryable ECONNRESET, never a short answer read as a listing`, async () => {
      const server = await rawServer(script);
      const client = eks(server.url, {maxAttempts: 2});
      try {
        const error = await failure(client.send(new ListClustersCommand({})));
        expect(error).toMatchObject({name: 'TimeoutError', code: 'ECONNRESET'});
        expect(error.$metadata?.attempts).toBe(2);
        expect(awsFailure(error, 'ListClusters').reason).toBe('other');
        expectNoSecret(error);
      } finally {
        client.destroy();
      }
    });
  }

  it('bytes that are not HTTP: an error the SDK does not retry, never an answer', async () => {
    const server = await rawServer((socket) => socket.end('SSH-2.0-OpenSSH_9.6\r\n\r\n'));
    const client = eks(server.url, {maxAttempts: 2});
    try {
      const error = await failure(client.send(new ListClustersCommand({})));
      expect(error.name).not.toBe('TimeoutError');
      expect(awsFailure(error, 'ListClusters').reason).toBe('other');
      expectNoSecret(error);
    } finally {
      client.destroy();
    }
  });

  it('no deadline runs while a call waits for a socket: more calls than sockets all answer, on at most that many connections', async () => {
    // 12 calls over 3 sockets, 100 ms an answer: the last ones wait ~300 ms for a socket, longer
    // than both the connect deadline (20 ms) and the answer deadline (250 ms).
    const server = await rawServer((socket) => void setTimeout(() => ok(socket), 100));
    const handler = new UndiciHttpHandler(new AwsDispatcher({connectTimeoutMs: 20, answerTimeoutMs: 250, connections: 3}), {owned: true});
    const client = new EKSClient({region: 'us-east-1', endpoint: server.url, credentials: CREDENTIALS, maxAttempts: 1, requestHandler: handler});
    try {
      const answers = await Promise.all(Array.from({length: 12}, () => client.send(new ListClustersCommand({}))));
      expect(answers.map((a) => a.clusters)).toEqual(Array.from({length: 12}, () => ['a', 'b']));
      expect(server.peakConnections()).toBe(3);
      expect(server.requests).toHaveLength(12);
    } finally {
      client.destroy();
    }
  });

  it("the SDK's abortSignal: a call waiting for a socket is rejected at once and never sent; one on the wire is rejected as AbortError", async () => {
    const held: net.Socket[] = [];
    const server = await rawServer((socket) => held.push(socket));
    const handler = new UndiciHttpHandler(new AwsDispatcher({connectTimeoutMs: 1_000, answerTimeoutMs: 5_000, connections: 1}), {owned: true});
    const client = new EKSClient({region: 'us-east-1', endpoint: server.url, credentials: CREDENTIALS, maxAttempts: 1, requestHandler: handler});
    try {
      const onWire = new AbortController();
      const first = client.send(new ListClustersCommand({}), {abortSignal: onWire.signal});
      await expect.poll(() => server.requests.length, ROUND_TRIP).toBe(1);
      const queued = new AbortController();
      const second = client.send(new ListClustersCommand({}), {abortSignal: queued.signal});
      queued.abort(new Error('cycle deadline'));
      const queuedError = await failure(second);
      expect(queuedError.name).toBe('AbortError');
      onWire.abort();
      expect((await failure(first)).name).toBe('AbortError');
      // The queued call never reached the server; a new call still gets through.
      const third = client.send(new ListClustersCommand({}));
      await expect.poll(() => server.requests.length, ROUND_TRIP).toBe(2);
      ok(held.at(-1) as net.Socket);
      expect((await third).clusters).toEqual(['a', 'b']);
    } finally {
      client.destroy();
    }
  });

  it('HTTPS as AWS serves it: a trusted certificate answers; an untrusted one and a TLS handshake that never ends fail the call, the latter at the connect deadline', async () => {
    const trusted = await createTestCa('undici handler trusted CA');
    const untrusted = await createTestCa('undici handler untrusted CA');
    const defaults = tls.getCACertificates('default');
    tls.setDefaultCACertificates([...defaults, trusted.caPem]);
    const started: {url: string; close(): Promise<void>}[] = [];
    const serve = async (cert: {certPem: string; keyPem: string}): Promise<string> => {
      const server = https.createServer({cert: cert.certPem, key: cert.keyPem}, (req, res) => {
        req.resume();
        res.writeHead(200, {'content-type': 'application/json'});
        res.end(LIST);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = `https://localhost:${(server.address() as net.AddressInfo).port}`;
      started.push({url, close: () => new Promise((resolve) => server.close(() => resolve()))});
      return url;
    };
    const clients: EKSClient[] = [];
    const client = (url: string): EKSClient => {
      const c = eks(url);
      clients.push(c);
      return c;
    };
    try {
      const good = await serve(await trusted.issueServerCert());
      expect((await client(good).send(new ListClustersCommand({}))).clusters).toEqual(['a', 'b']);

      const bad = await serve(await untrusted.issueServerCert());
      const refused = await failure(client(bad).send(new ListClustersCommand({})));
      expect(refused.name).not.toBe('TimeoutError');
      expect(awsFailure(refused, 'ListClusters').reason).toBe('other');

      // Accepts the TCP connect, never answers the TLS hello.
      const silent = await rawServer(() => undefined);
      const stuck = await failure(client(silent.url.replace('http://127.0.0.1', 'https://localhost')).send(new ListClustersCommand({})));
      expect(stuck).toMatchObject({name: 'TimeoutError', code: 'ETIMEDOUT'});
      expect(stuck.message).toContain('not established');
      expectNoSecret(stuck);
    } finally {
      for (const c of clients) c.destroy();
      await Promise.all(started.map((s) => s.close()));
      tls.setDefaultCACertificates(defaults);
    }
  });
});
