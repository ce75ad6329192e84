/**
 * The AWS clients' HTTP/1.1 transport on undici instead of smithy's NodeHttpHandler (issue 17,
 * W4). A steady organization cycle is ~33,000 small calls; through `node:http` each costs a
 * ClientRequest, an IncomingMessage stream, a socket timer, agent bookkeeping and four handler
 * timers. undici's dispatcher writes a request with one write, parses the answer without a
 * stream per response, and gives the body to the handler below, which keeps it in one buffer.
 *
 * What the handler guarantees, as the keep-alive agents it replaces did (connect-deadline.ts):
 * - a connect deadline that runs only while a socket connects (TCP and TLS): undici's connector
 *   timeout, armed when the socket is created, never while a call waits for a free socket;
 * - an answer deadline that runs only while a call is on a connection: undici's headers timeout
 *   (armed when the request is on its socket) and body timeout (between two pieces of the
 *   answer, as `socketTimeout` was);
 * - at most `connections` sockets per endpoint; pipelining off (one call per connection at a time);
 * - abort through the SDK's `abortSignal`, rejected as the SDK's handler rejects it (`AbortError`);
 * - errors the SDK's retry strategy and errors.ts classify as before: timeouts are `TimeoutError`
 *   with code `ETIMEDOUT`, a connection cut or closed before the answer was complete is
 *   `TimeoutError` with code `ECONNRESET` (smithy's names for the same events), a refused
 *   connect keeps Node's `ECONNREFUSED`;
 * - an answer is complete or it is an error: the body is read to its end before `handle`
 *   resolves, so a body cut off mid-way rejects the call and is never a short valid body.
 * The body is buffered: the clients using this handler (EKS, tagging, Account, STS) have no
 * streaming operations. Error messages name the endpoint and the deadline, never a header.
 */
import {buildQueryString} from '@smithy/core/protocols';
import {HttpResponse, type HttpHandler, type HttpRequest} from '@smithy/protocol-http';
import type {HttpHandlerOptions} from '@smithy/types';
import {Agent, type Dispatcher} from 'undici';
import {type AnswerBudget, sharedAnswerBudget} from '../../core/answer-budget.ts';
import {unwatchAbort, watchAbort} from './abort-watch.ts';
import {invalidResponse} from './errors.ts';

/**
 * The largest answer read (8 MiB). The largest answer of the calls made through this handler
 * is a GetResources page of 100 clusters with 50 tags each (~2.5 MB); a longer body is not an
 * AWS answer to them, and reading it whole would let one endpoint grow the heap without bound.
 */
export const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** Deadlines and socket cap of an {@link AwsDispatcher}. */
export interface DispatcherOptions {
  /** Time a socket may take to connect (TCP, and TLS on https), in ms. */
  readonly connectTimeoutMs: number;
  /** Time from a request being on its socket to its answer's headers, and between two pieces of a body, in ms. */
  readonly answerTimeoutMs: number;
  /** Sockets per endpoint (origin). */
  readonly connections: number;
}

/**
 * An undici Agent with the deadlines and the socket cap of the AWS clients; several handlers
 * may share one (org-sources.ts: one pool of sockets for every member-account client).
 */
export class AwsDispatcher extends Agent {
  readonly connectTimeoutMs: number;
  readonly answerTimeoutMs: number;

  constructor(options: DispatcherOptions) {
    super({
      connections: options.connections,
      // One call at a time per connection: a pipelined call would wait behind a slow one.
      pipelining: 1,
      allowH2: false,
      connect: {timeout: options.connectTimeoutMs},
      headersTimeout: options.answerTimeoutMs,
      bodyTimeout: options.answerTimeoutMs,
    });
    this.connectTimeoutMs = options.connectTimeoutMs;
    this.answerTimeoutMs = options.answerTimeoutMs;
  }
}

/** A smithy HttpHandler that sends each request through an undici dispatcher (see the file comment). */
export class UndiciHttpHandler implements HttpHandler {
  /** Read by the SDK (HTTP/1.1: it sets content-length itself). */
  readonly metadata = {handlerProtocol: 'http/1.1'};
  readonly #dispatcher: AwsDispatcher;
  /** Whether destroy() closes the dispatcher (not when it is shared). */
  readonly #owned: boolean;
  /** The bytes of answers being read at once, shared with every other handler (src/core/answer-budget.ts). */
  readonly #budget: AnswerBudget;

  constructor(dispatcher: AwsDispatcher, options: {readonly owned?: boolean; readonly budget?: AnswerBudget} = {}) {
    this.#dispatcher = dispatcher;
    this.#owned = options.owned ?? false;
    this.#budget = options.budget ?? sharedAnswerBudget;
  }

  /** Sends `request`; resolves with its whole answer, rejects with a classified error. */
  handle(request: HttpRequest, options: HttpHandlerOptions = {}): Promise<{response: HttpResponse}> {
    const {abortSignal, requestTimeout} = options;
    if (abortSignal?.aborted) return Promise.reject(abortError(abortSignal));
    let dispatch: Dispatcher.DispatchOptions;
    try {
      dispatch = dispatchOptions(request, requestTimeout);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return this.#dispatch(dispatch, abortSignal, requestTimeout).then((response) => ({response}));
  }

  /**
   * Sends a request already in wire form — `origin` (`protocol//host[:port]`), `path` with its
   * query — under the dispatcher's deadlines: the direct path of the short reads (direct-read.ts).
   * Resolves with the whole answer, rejects as `handle` does.
   */
  send(origin: string, method: string, path: string, headers: Record<string, string>, body: unknown, abortSignal?: AbortSignal): Promise<HttpResponse> {
    if (abortSignal?.aborted) return Promise.reject(abortError(abortSignal));
    const dispatch: Dispatcher.DispatchOptions = {origin, method: method as Dispatcher.HttpMethod, path, headers, body: bodyOf(body)};
    return this.#dispatch(dispatch, abortSignal, undefined);
  }

  #dispatch(dispatch: Dispatcher.DispatchOptions, abortSignal: HttpHandlerOptions['abortSignal'], requestTimeout: number | undefined): Promise<HttpResponse> {
    return new Promise((resolve, reject) => {
      const answerTimeoutMs = requestTimeout ?? this.#dispatcher.answerTimeoutMs;
      const exchange = new Exchange(resolve, reject, abortSignal, {origin: dispatch.origin as string, connectTimeoutMs: this.#dispatcher.connectTimeoutMs, answerTimeoutMs}, this.#budget);
      try {
        this.#dispatcher.dispatch(dispatch, exchange);
      } catch (error) {
        exchange.onResponseError(undefined, error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  /** Closes the dispatcher's sockets when this handler owns it. */
  destroy(): void {
    if (this.#owned) void this.#dispatcher.destroy().catch(() => undefined);
  }

  /** Nothing of this handler is configured through the SDK. */
  updateHttpClientConfig(): void {
    // The deadlines and the socket cap are the dispatcher's, fixed when it is built.
  }

  /** No SDK-visible configuration (see updateHttpClientConfig). */
  httpHandlerConfigs(): Record<string, never> {
    return {};
  }
}

/** undici's dispatch options for a smithy request. */
function dispatchOptions(request: HttpRequest, requestTimeout: number | undefined): Dispatcher.DispatchOptions {
  const query = request.query ? buildQueryString(request.query) : '';
  const hostname = request.hostname.startsWith('[') || !request.hostname.includes(':') ? request.hostname : `[${request.hostname}]`;
  const port = request.port === undefined ? '' : `:${request.port}`;
  return {
    origin: `${request.protocol}//${hostname}${port}`,
    method: request.method as Dispatcher.HttpMethod,
    path: query ? `${request.path}?${query}` : request.path,
    headers: request.headers,
    body: bodyOf(request.body),
    ...(requestTimeout === undefined ? {} : {headersTimeout: requestTimeout, bodyTimeout: requestTimeout}),
  };
}

/** A request body as undici takes it. */
function bodyOf(body: unknown): Dispatcher.DispatchOptions['body'] {
  return body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array || isReadable(body) ? (body as Dispatcher.DispatchOptions['body']) : Buffer.from(body as ArrayBuffer);
}

function isReadable(body: unknown): boolean {
  return typeof body === 'object' && body !== null && typeof (body as {pipe?: unknown}).pipe === 'function';
}

type Controller = Dispatcher.DispatchController;

/** What an error message may say about a call: its endpoint and deadlines (never a header). */
interface CallFacts {
  readonly origin: string;
  readonly connectTimeoutMs: number;
  readonly answerTimeoutMs: number;
}

/** One call on the wire: collects the answer, settles the handler's promise once. */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #resolve: (value: HttpResponse) => void;
  readonly #reject: (error: Error) => void;
  readonly #signal: HttpHandlerOptions['abortSignal'];
  readonly #call: CallFacts;
  #controller: Controller | undefined;
  #settled = false;
  #status = 0;
  #reason: string | undefined;
  #headers: Record<string, string> = {};
  #chunks: Buffer[] = [];
  #bytes = 0;
  readonly #budget: AnswerBudget;
  readonly #onAbort = (): void => {
    const error = abortError(this.#signal);
    // Queued for a socket: undici aborts it when it gets one (onRequestStart); the caller is answered now.
    this.#controller?.abort(error);
    this.#settle(error);
  };

  constructor(resolve: (value: HttpResponse) => void, reject: (error: Error) => void, signal: HttpHandlerOptions['abortSignal'], call: CallFacts, budget: AnswerBudget) {
    this.#budget = budget;
    this.#resolve = resolve;
    this.#reject = reject;
    this.#signal = signal;
    this.#call = call;
    if (signal) {
      if (typeof (signal as AbortSignal).addEventListener === 'function') watchAbort(signal as AbortSignal, this.#onAbort);
      else signal.onabort = this.#onAbort;
    }
  }

  onRequestStart(controller: Controller): void {
    this.#controller = controller;
    if (this.#settled) controller.abort(abortError(this.#signal));
  }

  onResponseStart(_controller: Controller, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    this.#status = statusCode;
    this.#reason = statusMessage;
    // undici's object is this answer's own: kept as it is unless a header repeats or is absent
    // (then a copy, as smithy's handler makes it: repeated headers joined with commas).
    let plain = true;
    for (const name in headers) {
      const value = headers[name];
      if (typeof value !== 'string') {
        plain = false;
        break;
      }
    }
    if (plain) {
      this.#headers = headers as Record<string, string>;
      return;
    }
    const out: Record<string, string> = {};
    for (const name in headers) {
      const value = headers[name];
      if (value !== undefined) out[name] = Array.isArray(value) ? value.join(',') : value;
    }
    this.#headers = out;
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.#settled) return;
    let error: Error | undefined;
    if (this.#bytes + chunk.length > MAX_ANSWER_BYTES) {
      // Malformed, not a transport fault: the SDK does not retry it and the source fails as invalid_response.
      error = invalidResponse(`the answer from ${this.#call.origin} is longer than ${MAX_ANSWER_BYTES / 1024 / 1024} MiB, which no AWS answer read here is`);
    } else if (!this.#budget.take(chunk.length)) {
      // Answers being read hold the whole budget: this one is dropped, as one too long is, rather than the process's memory.
      error = invalidResponse(`the answer from ${this.#call.origin} was dropped: answers being read at once already hold ${Math.round(this.#budget.limit / 1024 / 1024)} MiB`);
    }
    if (error) {
      this.#settle(error);
      controller.abort(error);
      return;
    }
    this.#bytes += chunk.length;
    this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    const chunks = this.#chunks;
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    this.#chunks = [];
    this.#settle(undefined, new HttpResponse({statusCode: this.#status, ...(this.#reason ? {reason: this.#reason} : {}), headers: this.#headers, body}));
  }

  onResponseError(_controller: Controller | undefined, error: Error): void {
    this.#chunks = [];
    this.#settle(classify(error, this.#call));
  }

  #settle(error: Error | undefined, response?: HttpResponse): void {
    if (this.#settled) return;
    this.#settled = true;
    // The answer is handed on whole or dropped: the bytes it took go back to the budget.
    this.#budget.give(this.#bytes);
    this.#bytes = 0;
    this.#chunks = [];
    const signal = this.#signal;
    if (signal) {
      if (typeof (signal as AbortSignal).removeEventListener === 'function') unwatchAbort(signal as AbortSignal, this.#onAbort);
      else if (signal.onabort === this.#onAbort) signal.onabort = null;
    }
    if (error) this.#reject(error);
    else this.#resolve(response as HttpResponse);
  }
}

/** The peer closed or cut the connection before the answer was complete (Node: "socket hang up", "aborted"). */
const CUT = new Set(['UND_ERR_SOCKET', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED']);
/** Node's codes that smithy's handler names `TimeoutError` (the SDK retries them). */
const NODE_TIMEOUT_CODES = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

const timeout = (message: string): Error => Object.assign(new Error(message), {name: 'TimeoutError', code: 'ETIMEDOUT'});

/** The error the SDK sees for a transport failure (see the file comment). */
function classify(error: Error, call: CallFacts): Error {
  if (error.name === 'AbortError') return error;
  const code = (error as {code?: unknown}).code;
  if (typeof code !== 'string') return error;
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return timeout(`connection to ${call.origin} not established within ${call.connectTimeoutMs} ms`);
    case 'UND_ERR_HEADERS_TIMEOUT':
      return timeout(`no answer from ${call.origin} within ${call.answerTimeoutMs} ms of sending the request`);
    case 'UND_ERR_BODY_TIMEOUT':
      return timeout(`the answer from ${call.origin} stopped for ${call.answerTimeoutMs} ms before its end`);
  }
  if (CUT.has(code)) return Object.assign(new Error(`connection to ${call.origin} closed before the answer was complete (${error.message})`), {name: 'TimeoutError', code: 'ECONNRESET'});
  if (NODE_TIMEOUT_CODES.has(code)) return Object.assign(error, {name: 'TimeoutError'});
  return error;
}

/** The SDK's abort error: `AbortError`, the signal's reason as cause (smithy's buildAbortError). */
function abortError(signal: HttpHandlerOptions['abortSignal']): Error {
  const reason = signal && 'reason' in signal ? (signal as AbortSignal).reason : undefined;
  const error = reason instanceof Error ? new Error('Request aborted', {cause: reason}) : new Error(reason ? String(reason) : 'Request aborted');
  error.name = 'AbortError';
  return error;
}
