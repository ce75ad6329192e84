/**
 * The ARM clients' HTTP transport on undici instead of the SDK's Node HTTP client (issue 17, W5).
 * A steady W5 cycle is ~500 small GETs; through `node:http` each costs a ClientRequest, an
 * IncomingMessage stream, agent bookkeeping and a header map, a quarter more CPU per call than
 * undici's dispatcher, which writes a request with one write and hands the body over in pieces
 * (measured: 500 GETs over TLS, 90–110 ms of client CPU against 60–80 ms).
 *
 * It answers as the SDK's own client (`@typespec/ts-http-runtime`'s NodeHttpClient) does, so the
 * pipeline's retry, redirect, token and throttling policies and src/clouds/azure/errors.ts read
 * every outcome as before:
 * - the per-attempt `timeout` runs until the answer's headers arrive, and it and the caller's
 *   abort reject with an `AbortError` (which the retry policy does not retry);
 * - a failed send is a RestError with Node's error code (`ECONNREFUSED`, `ENOTFOUND`, a TLS
 *   code; undici's own codes are named as Node's client names the same events: a connection
 *   closed before the answer is `ECONNRESET` "socket hang up", a connect timeout `ETIMEDOUT`),
 *   so the retry policy retries exactly the system errors it retried;
 * - a body cut off is a RestError `PARSE_ERROR` "Error reading response as text: aborted";
 *   gzip and deflate bodies are decoded when the request asked for them; HEAD has no body;
 * - at most `connections` sockets per endpoint, one call per connection at a time, HTTP/1.1;
 * - an answer longer than {@link MAX_ARM_ANSWER_BYTES} fails as a malformed answer (PARSE_ERROR)
 *   instead of growing the heap without bound.
 * Requests it does not model — a streamed answer, progress callbacks, a stream or function body,
 * a proxy, an agent of the caller's, request overrides, keep-alive off — go to `fallback` (the
 * SDK's client). Error messages name the path and the deadline, never a header.
 */
import {promisify} from 'node:util';
import zlib from 'node:zlib';
import {createHttpHeaders, RestError, type HttpClient, type PipelineRequest, type PipelineResponse} from '@azure/core-rest-pipeline';
import type {Dispatcher} from 'undici';
import {type AnswerBudget, sharedAnswerBudget} from '../../core/answer-budget.ts';

/** The largest answer read (32 MiB): no ARM answer discovery asks for comes near it. */
export const MAX_ARM_ANSWER_BYTES = 32 * 1024 * 1024;

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);

/** The SDK's `HttpClient` over undici dispatchers (one per TLS settings object; see the file comment). */
export class UndiciArmHttpClient implements HttpClient {
  readonly #dispatcherFor: (tls: object | undefined) => Dispatcher;
  readonly #fallback: HttpClient;
  /** The bytes of answers being read at once, shared with every other handler (src/core/answer-budget.ts). */
  readonly #budget: AnswerBudget;

  constructor(dispatcherFor: (tls: object | undefined) => Dispatcher, fallback: HttpClient, budget: AnswerBudget = sharedAnswerBudget) {
    this.#dispatcherFor = dispatcherFor;
    this.#fallback = fallback;
    this.#budget = budget;
  }

  sendRequest(request: PipelineRequest): Promise<PipelineResponse> {
    const body = request.body;
    const simpleBody = body === undefined || body === null || typeof body === 'string' || Buffer.isBuffer(body) || body instanceof Uint8Array;
    if (
      !simpleBody ||
      request.agent !== undefined ||
      request.proxySettings !== undefined ||
      request.disableKeepAlive === true ||
      request.requestOverrides !== undefined ||
      request.onDownloadProgress !== undefined ||
      request.onUploadProgress !== undefined ||
      (request.streamResponseStatusCodes !== undefined && request.streamResponseStatusCodes.size > 0)
    ) {
      return this.#fallback.sendRequest(request);
    }
    if (request.abortSignal?.aborted) return Promise.reject(abortError('The operation was aborted. Request has already been canceled.'));
    const url = new URL(request.url);
    if (url.protocol !== 'https:' && !request.allowInsecureConnection) {
      return Promise.reject(new Error(`Cannot connect to ${request.url} while allowInsecureConnection is false.`));
    }
    const headers = request.headers.toJSON({preserveCase: true});
    if (body !== undefined && body !== null && !request.headers.has('content-length')) headers['Content-Length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
    const dispatch: Dispatcher.DispatchOptions = {
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: request.method as Dispatcher.HttpMethod,
      headers,
      ...(body === undefined || body === null ? {} : {body: body as string | Uint8Array}),
    };
    return new Promise<Answer | undefined>((resolve, reject) => {
      const exchange = new Exchange(request, url.pathname, resolve, reject, this.#budget);
      try {
        this.#dispatcherFor(request.tlsSettings).dispatch(dispatch, exchange);
      } catch (error) {
        exchange.onResponseError(undefined, error instanceof Error ? error : new Error(String(error)));
      }
    }).then((answer) => (answer === undefined ? this.#fallback.sendRequest(request) : respond(request, answer)));
  }
}

/** The raw answer of one exchange. */
interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer | undefined;
}

/** The PipelineResponse of an answer: headers as the SDK's client keeps them (the first of repeated ones), the body decoded to text. */
async function respond(request: PipelineRequest, answer: Answer): Promise<PipelineResponse> {
  const headers = createHttpHeaders();
  for (const name in answer.headers) {
    const value = answer.headers[name];
    const first = Array.isArray(value) ? value[0] : value;
    if (first) headers.set(name, first);
  }
  const response: PipelineResponse = {status: answer.status, headers, request};
  if (answer.body === undefined) return response;
  let body = answer.body;
  const accepted = request.headers.get('accept-encoding');
  if (accepted?.includes('gzip') || accepted?.includes('deflate')) {
    const encoding = headers.get('content-encoding');
    try {
      if (encoding === 'gzip') body = await gunzip(body, {maxOutputLength: MAX_ARM_ANSWER_BYTES});
      else if (encoding === 'deflate') body = await inflate(body, {maxOutputLength: MAX_ARM_ANSWER_BYTES});
    } catch (error) {
      throw new RestError(`Error reading response as text: ${(error as Error).message}`, {code: RestError.PARSE_ERROR});
    }
  }
  response.bodyAsText = body.toString('utf8');
  return response;
}

type Controller = Dispatcher.DispatchController;

/** One call on the wire: collects the answer in one buffer and settles once. */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #request: PipelineRequest;
  readonly #path: string;
  /** With an answer, or with none when undici refused the request before sending it (the SDK's client sends it). */
  readonly #resolve: (answer: Answer | undefined) => void;
  readonly #reject: (error: Error) => void;
  #timer: NodeJS.Timeout | undefined;
  #controller: Controller | undefined;
  #settled = false;
  #status = 0;
  #headers: Answer['headers'] = {};
  #chunks: Buffer[] = [];
  #bytes = 0;
  readonly #budget: AnswerBudget;
  readonly #onAbort = (): void => {
    this.#fail(abortError('The operation was aborted. Rejecting from abort signal callback while making request.'));
  };

  constructor(request: PipelineRequest, path: string, resolve: (answer: Answer | undefined) => void, reject: (error: Error) => void, budget: AnswerBudget) {
    this.#budget = budget;
    this.#request = request;
    this.#path = path;
    this.#resolve = resolve;
    this.#reject = reject;
    // As the SDK's client: the timeout runs until the answer's headers arrive.
    if (request.timeout > 0) this.#timer = setTimeout(this.#onAbort, request.timeout);
    request.abortSignal?.addEventListener('abort', this.#onAbort, {once: true});
  }

  onRequestStart(controller: Controller): void {
    this.#controller = controller;
    // Settled while it waited for a socket (abort, timeout): undici drops it now.
    if (this.#settled) controller.abort(abortError('The operation was aborted.'));
  }

  onResponseStart(_controller: Controller, statusCode: number, headers: Answer['headers']): void {
    // An informational answer (103 Early Hints) is not the answer: its timeout runs on, as Node's client reads it.
    if (statusCode < 200) return;
    this.#status = statusCode;
    this.#headers = headers;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.#settled) return;
    let error: RestError | undefined;
    if (this.#bytes + chunk.length > MAX_ARM_ANSWER_BYTES) {
      error = new RestError(`Error reading response as text: the answer to ${this.#path} is longer than ${MAX_ARM_ANSWER_BYTES / 1024 / 1024} MiB, which no ARM answer read here is`, {code: RestError.PARSE_ERROR});
    } else if (!this.#budget.take(chunk.length)) {
      // Answers being read hold the whole budget: this one is dropped, as one too long is, rather than the process's memory.
      error = new RestError(`Error reading response as text: the answer to ${this.#path} was dropped: answers being read at once already hold ${Math.round(this.#budget.limit / 1024 / 1024)} MiB`, {code: RestError.PARSE_ERROR});
    }
    if (error) {
      this.#fail(error);
      controller.abort(error);
      return;
    }
    this.#bytes += chunk.length;
    this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    const chunks = this.#chunks;
    const body = this.#request.method === 'HEAD' ? undefined : chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    this.#settle();
    this.#resolve({status: this.#status, headers: this.#headers, body});
  }

  onResponseError(_controller: Controller | undefined, error: Error): void {
    if (error.name === 'AbortError') return this.#fail(error);
    // A request undici refuses to send as it is (a header it does not allow, such as `keep-alive`),
    // reported here rather than thrown by dispatch: nothing was sent, so the SDK's client sends it.
    if ((error as {code?: unknown}).code === 'UND_ERR_INVALID_ARG' && this.#status === 0) return this.discard(() => this.#resolve(undefined));
    // After the headers, the body was cut off: the SDK's client reports it while reading the body as text.
    if (this.#status !== 0) return this.#fail(new RestError('Error reading response as text: aborted', {code: RestError.PARSE_ERROR}));
    this.#fail(sendError(error, this.#request));
  }

  /** Settles without an answer (the caller sends the request another way), then runs `then`. */
  discard(then: () => void): void {
    if (this.#settled) return;
    this.#settle();
    then();
  }

  #fail(error: Error): void {
    if (this.#settled) return;
    this.#settle();
    this.#controller?.abort(error);
    this.#reject(error);
  }

  #settle(): void {
    this.#settled = true;
    // The answer is handed on whole or dropped: the bytes it took go back to the budget.
    this.#budget.give(this.#bytes);
    this.#bytes = 0;
    this.#chunks = [];
    clearTimeout(this.#timer);
    this.#request.abortSignal?.removeEventListener('abort', this.#onAbort);
  }
}

/** undici's codes for the failures Node's client names with a system error code (the SDK's retry policy retries those). */
const NODE_CODES: Readonly<Record<string, {code: string; message: string}>> = {
  UND_ERR_SOCKET: {code: 'ECONNRESET', message: 'socket hang up'},
  UND_ERR_CLOSED: {code: 'ECONNRESET', message: 'socket hang up'},
  UND_ERR_DESTROYED: {code: 'ECONNRESET', message: 'socket hang up'},
  UND_ERR_CONNECT_TIMEOUT: {code: 'ETIMEDOUT', message: 'connect ETIMEDOUT'},
  UND_ERR_HEADERS_TIMEOUT: {code: 'ETIMEDOUT', message: 'no answer headers in time'},
};

/** A failed send as the SDK's client reports it: a RestError with Node's code (REQUEST_SEND_ERROR without one). */
function sendError(error: Error, request: PipelineRequest): RestError {
  const code = (error as {code?: unknown}).code;
  const node = typeof code === 'string' ? NODE_CODES[code] : undefined;
  if (node) return new RestError(node.message, {code: node.code, request});
  return new RestError(error.message, {code: typeof code === 'string' ? code : RestError.REQUEST_SEND_ERROR, request});
}

function abortError(message: string): Error {
  return Object.assign(new Error(message), {name: 'AbortError'});
}
