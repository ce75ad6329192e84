/**
 * The ARM clients' undici transport (src/clouds/azure/undici-client.ts) answers as the SDK's own
 * Node client does, so the pipeline's retries and errors.ts read every outcome as before: a
 * per-attempt timeout or an abort is an AbortError, a connection cut before the answer is
 * ECONNRESET (which the SDK retries), a body cut off is PARSE_ERROR "aborted" (a broken
 * connection, not a malformed answer), an answer past the size cap is malformed, and no error
 * names a header. The same faults through the whole service (the source fails, nothing is
 * deleted) are test/reliability/fault-matrix.test.ts's ARM rows, which now run over this client.
 */
import type {ServerResponse} from 'node:http';
import https from 'node:https';
import type {AddressInfo, Socket} from 'node:net';
import {gzipSync} from 'node:zlib';
import {createDefaultHttpClient, createPipelineRequest, type HttpClient, type PipelineRequest} from '@azure/core-rest-pipeline';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {classifyAzureError, azureErrorCode} from '../../src/clouds/azure/errors.ts';
import {pooledHttpClient} from '../../src/clouds/azure/http-client.ts';
import {LeanArmGet, MAX_LEAN_ANSWER_BYTES} from '../../src/clouds/azure/lean-get.ts';
import {MAX_ARM_ANSWER_BYTES, UndiciArmHttpClient} from '../../src/clouds/azure/undici-client.ts';
import {AnswerBudget} from '../../src/core/answer-budget.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';

type Script = (res: ServerResponse, socket: Socket) => void;

let server: https.Server;
let base: string;
let ca: string;
const scripts = new Map<string, Script>();
const sockets = new Set<Socket>();
let lastAuthorization: string | undefined;

const SECRET = 'secret-bearer-token-value';

beforeAll(async () => {
  const tls = await sharedServerTls();
  ca = tls.caPem;
  server = https.createServer({cert: tls.certPem, key: tls.keyPem}, (req, res) => {
    lastAuthorization = req.headers.authorization;
    const script = scripts.get(new URL(req.url ?? '/', 'https://x').pathname);
    if (!script) {
      res.writeHead(404).end();
      return;
    }
    script(res, req.socket);
  });
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  scripts.set('/ok', (res) => {
    res.setHeader('x-ms-request-id', 'req-1');
    res.setHeader('set-cookie', ['a=1', 'b=2']);
    res.writeHead(200, {'content-type': 'application/json'}).end('{"value":[{"name":"c1"}]}');
  });
  scripts.set('/gzip', (res) => res.writeHead(200, {'content-encoding': 'gzip'}).end(gzipSync('{"value":[]}')));
  scripts.set('/bad-gzip', (res) => res.writeHead(200, {'content-encoding': 'gzip'}).end('not gzip at all'));
  scripts.set('/hang', () => undefined);
  // An informational answer (103 Early Hints), then nothing: the answer's headers never come.
  scripts.set('/early-hints-hang', (res) => res.writeEarlyHints({link: '</style.css>; rel=preload'}));
  scripts.set('/early-hints-ok', (res) => {
    res.writeEarlyHints({link: '</style.css>; rel=preload'});
    res.writeHead(200, {'content-type': 'application/json'}).end('{"value":[]}');
  });
  scripts.set('/reset', (_res, socket) => socket.destroy());
  scripts.set('/cut', (res, socket) => {
    res.writeHead(200, {'content-type': 'application/json', 'content-length': '1000'});
    res.write('{"value":[', () => socket.destroy());
  });
  scripts.set('/huge', (res) => {
    res.writeHead(200, {'content-type': 'application/json'});
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    let sent = 0;
    const more = (): void => {
      while (sent <= MAX_ARM_ANSWER_BYTES) {
        sent += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', more);
          return;
        }
      }
      res.end();
    };
    more();
  });
  scripts.set('/forbidden', (res) => res.writeHead(403, {'content-type': 'application/json'}).end('{"error":{"code":"AuthorizationFailed","message":"no"}}'));
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => server.close(resolve));
});

const client = (): HttpClient => pooledHttpClient(4);

function request(path: string, extra: Partial<PipelineRequest> = {}): PipelineRequest {
  const req = Object.assign(createPipelineRequest({url: `${base}${path}`, method: 'GET'}), {tlsSettings: {ca}}, extra);
  req.headers.set('authorization', `Bearer ${SECRET}`);
  return req;
}

/** The error a request ends with (fails the test when it answers). */
async function failure(promise: Promise<unknown>): Promise<Error & {code?: string}> {
  try {
    await promise;
  } catch (error) {
    const e = error as Error & {code?: string};
    // Never a header: not the bearer token, not in the message, nowhere in what a log would print.
    expect(`${e.message} ${JSON.stringify({code: e.code, name: e.name, message: e.message})}`).not.toContain(SECRET);
    return e;
  }
  throw new Error('expected the request to fail');
}

describe('the undici ARM client', () => {
  it('answers status, headers (the first of repeated ones, as the SDK keeps them) and the body as text, with the request headers sent', async () => {
    const response = await client().sendRequest(request('/ok'));
    expect(response.status).toBe(200);
    expect(response.bodyAsText).toBe('{"value":[{"name":"c1"}]}');
    expect(response.headers.get('x-ms-request-id')).toBe('req-1');
    expect(response.headers.get('set-cookie')).toBe('a=1');
    expect(lastAuthorization).toBe(`Bearer ${SECRET}`);
  });

  it('passes an error status on with its body, for the pipeline to judge', async () => {
    const response = await client().sendRequest(request('/forbidden'));
    expect(response.status).toBe(403);
    expect(response.bodyAsText).toContain('AuthorizationFailed');
  });

  it('decodes gzip only when the request asked for it; a body that is not gzip is a malformed answer', async () => {
    const asked = request('/gzip');
    asked.headers.set('accept-encoding', 'gzip,deflate');
    expect((await client().sendRequest(asked)).bodyAsText).toBe('{"value":[]}');
    const raw = await client().sendRequest(request('/gzip'));
    expect(raw.bodyAsText).not.toBe('{"value":[]}');
    const bad = request('/bad-gzip');
    bad.headers.set('accept-encoding', 'gzip');
    const error = await failure(client().sendRequest(bad));
    expect(error.code).toBe('PARSE_ERROR');
    expect(classifyAzureError(error)).toBe('invalid_response');
  });

  it('fails a request with no answer within its timeout as an AbortError (a timeout to errors.ts)', async () => {
    const error = await failure(client().sendRequest(request('/hang', {timeout: 200})));
    expect(error.name).toBe('AbortError');
    expect(classifyAzureError(error)).toBe('timeout');
  });

  it('keeps the timeout running through an informational answer (103 Early Hints): it is not the answer, as the SDK client reads it', async () => {
    const error = await failure(client().sendRequest(request('/early-hints-hang', {timeout: 200})));
    expect(error.name).toBe('AbortError');
    expect(classifyAzureError(error)).toBe('timeout');
    const answered = await client().sendRequest(request('/early-hints-ok', {timeout: 2_000}));
    expect([answered.status, answered.bodyAsText]).toEqual([200, '{"value":[]}']);
  });

  it("fails on the caller's abort, before or while waiting", async () => {
    const early = new AbortController();
    early.abort();
    expect((await failure(client().sendRequest(request('/ok', {abortSignal: early.signal})))).name).toBe('AbortError');
    const late = new AbortController();
    const pending = client().sendRequest(request('/hang', {abortSignal: late.signal}));
    setTimeout(() => late.abort(), 50);
    expect((await failure(pending)).name).toBe('AbortError');
  });

  it('names a connection cut before the answer ECONNRESET, as Node does (the SDK retries it), and a refused connection ECONNREFUSED', async () => {
    const reset = await failure(client().sendRequest(request('/reset')));
    expect(reset.code).toBe('ECONNRESET');
    const closed = https.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = await failure(client().sendRequest(Object.assign(createPipelineRequest({url: `https://127.0.0.1:${port}/x`}), {tlsSettings: {ca}})));
    expect(refused.code).toBe('ECONNREFUSED');
  });

  it('fails a body cut off as the SDK does (PARSE_ERROR "aborted": a broken connection, not a malformed answer)', async () => {
    const error = await failure(client().sendRequest(request('/cut')));
    expect(azureErrorCode(error)).toBe('PARSE_ERROR');
    expect(error.message).toContain('aborted');
    expect(classifyAzureError(error)).toBe('other');
  });

  it(`fails an answer longer than ${MAX_ARM_ANSWER_BYTES / 1024 / 1024} MiB as malformed, without reading it whole`, async () => {
    const error = await failure(client().sendRequest(request('/huge')));
    expect(error.code).toBe('PARSE_ERROR');
    expect(classifyAzureError(error)).toBe('invalid_response');
  });

  it('leaves requests it does not model (a proxy, a streamed answer, progress, an agent, no keep-alive) to the SDK client', async () => {
    const seen: string[] = [];
    const fallback: HttpClient = {sendRequest: (r) => (seen.push(r.url), createDefaultHttpClient().sendRequest(r))};
    const undici = new UndiciArmHttpClient(() => {
      throw new Error('not this way');
    }, fallback);
    const cases: Partial<PipelineRequest>[] = [
      {streamResponseStatusCodes: new Set([200])},
      {onDownloadProgress: () => undefined},
      {disableKeepAlive: true},
      {agent: new https.Agent({ca})},
    ];
    for (const extra of cases) {
      const response = await undici.sendRequest(request('/ok', extra));
      expect(response.status).toBe(200);
    }
    expect(seen).toHaveLength(cases.length);
  });

  it('leaves a request with a header undici will not send (keep-alive) to the SDK client, which sends it', async () => {
    const seen: string[] = [];
    const undici = pooledHttpClient(4, {sendRequest: (r) => (seen.push(r.url), createDefaultHttpClient().sendRequest(r))});
    const req = request('/ok');
    req.headers.set('keep-alive', 'timeout=5');
    const response = await undici.sendRequest(req);
    expect(response.status).toBe(200);
    expect(response.bodyAsText).toBe('{"value":[{"name":"c1"}]}');
    expect(seen).toEqual([req.url]);
  });
});

describe('the short path over the same pool', () => {
  it(`reads a page, and leaves an answer longer than ${MAX_LEAN_ANSWER_BYTES / 1024 / 1024} MiB to the pipeline instead of buffering it`, async () => {
    const pool = pooledHttpClient(4);
    const lean = new LeanArmGet({credential: fakeTokenCredential(), scope: 'https://management.azure.com/.default', agentFor: pool.agentFor, dispatcherFor: pool.dispatcherFor, policies: [], timeoutMs: 5_000});
    const taught = request('/ok');
    taught.headers.set('user-agent', 'azsdk-js-arm-containerservice/test');
    await lean.learn.policy.sendRequest(taught, (r) => pool.sendRequest(r));
    const page = await lean.get(`${base}/ok`, new AbortController().signal);
    expect(page?.kind === 'page' ? page.body.toString('utf8') : page).toBe('{"value":[{"name":"c1"}]}');
    await expect(lean.get(`${base}/huge`, new AbortController().signal)).resolves.toBeUndefined();
    // Past the budget of answers being read at once (src/core/answer-budget.ts): left to the pipeline too, the budget given back.
    const budget = new AnswerBudget(8);
    const tight = new LeanArmGet({credential: fakeTokenCredential(), scope: 'https://management.azure.com/.default', agentFor: pool.agentFor, dispatcherFor: pool.dispatcherFor, policies: [], timeoutMs: 5_000, budget});
    await tight.learn.policy.sendRequest(taught, (r) => pool.sendRequest(r));
    await expect(tight.get(`${base}/ok`, new AbortController().signal)).resolves.toBeUndefined();
    expect(budget.used).toBe(0);
  });
});
