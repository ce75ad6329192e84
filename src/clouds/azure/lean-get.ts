/**
 * A short path for the GETs a steady cycle repeats most: the managed clusters list pages, one
 * per subscription per cycle (W5: 500). Through the SDK's pipeline each page cost a dozen
 * policies (user agent, request id, tracing, logging, redirects, retries, the bearer token
 * cycler, decompression, TLS and proxy settings), the SDK's Node HTTP client (its own abort
 * controller, stream wrappers and header maps) and a decode to text before anything could tell
 * that the page was the one read last cycle.
 *
 * Here the page is asked for once, with the headers the client's own pipeline sends (its user
 * agent, learnt from a request the SDK made: see {@link LeanArmGet.learn}), a bearer token from the
 * same TokenCredential (which caches it), over the shared keep-alive pool, through the extra
 * policies the client was given (the service's metrics), and its raw bytes are handed back. Only
 * a complete 200 without content encoding, or an error status the SDK passes on untouched (400,
 * 403, 404, 409), is answered here; anything else (a redirect, 401, 408, 429, 5xx, a reset, a
 * body cut off) is declined, and the caller asks the SDK's pipeline, whose redirects, token
 * challenges, retries and throttling (Retry-After) then apply exactly as before. A request with
 * no answer within the timeout fails as the SDK's own timeout does (an `AbortError`, which its
 * retry policy does not retry).
 */
import type http from 'node:http';
import type {Dispatcher} from 'undici';
import {createHttpHeaders, createPipelineRequest, type HttpHeaders, type PipelinePolicy, type PipelineRequest, type PipelineResponse} from '@azure/core-rest-pipeline';
import type {AccessToken, TokenCredential} from '@azure/core-auth';
import {type AnswerBudget, sharedAnswerBudget} from '../../core/answer-budget.ts';
import {leanDispatcher} from './http-client.ts';
import type {AzurePolicyConfig} from './pipeline.ts';

/** An answer of the short path: a complete 200 page (its bytes), or an error answer the SDK would pass on as it is. */
export type LeanAnswer = {readonly kind: 'page'; readonly body: Buffer} | {readonly kind: 'error'; readonly response: PipelineResponse};

/** Statuses the SDK's pipeline hands back untouched (no retry, redirect or token challenge): answered here too. */
const PASSED_ON: ReadonlySet<number> = new Set([400, 403, 404, 409]);

/**
 * The longest answer read here (32 MiB): a longer one is asked for again through the pipeline,
 * so one endpoint cannot grow the heap without bound on this path (a managed clusters page is
 * tens of kB per cluster at most).
 */
export const MAX_LEAN_ANSWER_BYTES = 32 * 1024 * 1024;

/** A token is used until 2 minutes before it expires (or its refresh time): the SDK's token cycler does the same. */
const REFRESH_WINDOW_MS = 120_000;

/** Options of {@link LeanArmGet}. */
export interface LeanArmGetOptions {
  readonly credential: TokenCredential;
  /** Token scope of the ARM endpoint (`https://management.azure.com/.default`). */
  readonly scope: string;
  /** The pool's agent for a URL (http-client.ts), keyed by the TLS settings the SDK's requests carry: a request of the SDK that used another agent closes this path. */
  readonly agentFor: (url: string, tls: object | undefined) => http.Agent;
  /** The undici pool this path sends its GETs over, for the TLS settings the SDK's requests carry (http-client.ts); default one of its own. */
  readonly dispatcherFor?: (tls: object | undefined) => Dispatcher;
  /** The extra policies the SDK clients were given (metrics): every attempt here goes through them too. */
  readonly policies: readonly AzurePolicyConfig[];
  /** Longest an answer may take, headers and body (the SDK's per-attempt timeout). */
  readonly timeoutMs: number;
  /** Wall clock for token expiry (tokens carry wall-clock times). */
  readonly now?: () => number;
  /** The bytes of answers being read at once, shared with every other handler (default the process's: src/core/answer-budget.ts). */
  readonly budget?: AnswerBudget;
}

/** What a request of the SDK showed about how the client's requests look (learnt once). */
interface Template {
  readonly userAgent: string;
  readonly tls: object | undefined;
}

/**
 * The short path of one (endpoint, identity). It starts closed: it opens once {@link learn} has
 * seen a request of the SDK client without a proxy or custom agent, and stays on the SDK's
 * pipeline for good when a request showed one.
 */
export class LeanArmGet {
  readonly #options: LeanArmGetOptions;
  readonly #now: () => number;
  readonly #dispatcherFor: (tls: object | undefined) => Dispatcher;
  #template: Template | undefined;
  #refused = false;
  #token: AccessToken | undefined;
  #refreshing: Promise<AccessToken | undefined> | undefined;

  /** The extra policies, perCall ones outside perRetry ones (as in the SDK's pipeline). */
  readonly #policies: readonly PipelinePolicy[];

  constructor(options: LeanArmGetOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    if (options.dispatcherFor) this.#dispatcherFor = options.dispatcherFor;
    else {
      const own = new WeakMap<object, Dispatcher>();
      let plain: Dispatcher | undefined;
      this.#dispatcherFor = (tls) => {
        if (!tls) return (plain ??= leanDispatcher());
        let found = own.get(tls);
        if (!found) own.set(tls, (found = leanDispatcher(undefined, tls)));
        return found;
      };
    }
    this.#policies = [...options.policies.filter((p) => p.position === 'perCall'), ...options.policies.filter((p) => p.position === 'perRetry')].map((p) => p.policy as PipelinePolicy);
  }

  /**
   * A `perRetry` policy for the SDK clients whose GETs this path takes over: it notes the user
   * agent and TLS settings of their requests, and closes the path if one goes through a proxy
   * or an agent of the caller's (this path would bypass it).
   */
  readonly learn: AzurePolicyConfig = {
    position: 'perRetry',
    policy: {
      name: 'kubeDiscoveryLeanGetLearn',
      sendRequest: (request, next) => {
        if (!this.#refused && this.#template === undefined) this.#note(request);
        else if (!this.#refused && !this.#direct(request)) this.#refused = true;
        return next(request);
      },
    },
  };

  /** No proxy and no agent but the pool's own (a retry carries the agent the pool gave its first attempt). */
  #direct(request: PipelineRequest): boolean {
    return request.proxySettings === undefined && (request.agent === undefined || request.agent === this.#options.agentFor(request.url, request.tlsSettings));
  }

  #note(request: PipelineRequest): void {
    const userAgent = request.headers.get('user-agent');
    if (!this.#direct(request) || userAgent === undefined) {
      this.#refused = true;
      return;
    }
    this.#template = {userAgent, tls: request.tlsSettings};
  }

  /** True once the path is open (tests and the bench read it). */
  get open(): boolean {
    return this.#template !== undefined && !this.#refused;
  }

  /**
   * GETs `url`; undefined when the caller must ask the SDK's pipeline (path not open, no token,
   * an answer only the pipeline handles). Rejects only as the pipeline would: the caller's
   * abort, or no answer within the timeout.
   */
  async get(url: string, signal: AbortSignal): Promise<LeanAnswer | undefined> {
    const template = this.#template;
    if (template === undefined || this.#refused) return undefined;
    const token = await this.#bearer();
    if (token === undefined) return undefined;
    signal.throwIfAborted();
    const request = createPipelineRequest({url, method: 'GET', abortSignal: signal, timeout: this.#options.timeoutMs});
    request.headers.set('accept', 'application/json');
    request.headers.set('user-agent', template.userAgent);
    request.headers.set('x-ms-client-request-id', request.requestId);
    let declined = false;
    const send = async (req: PipelineRequest): Promise<PipelineResponse> => {
      const answer = await this.#send(req, token, template);
      if (answer.declined) declined = true;
      return answer.response;
    };
    let response: PipelineResponse;
    try {
      response = await this.#through(request, send);
    } catch (error) {
      // A timeout or the caller's abort ends the call as the SDK's own would; a transport error
      // (a reset, a refused connection, a stale keep-alive socket) goes to the pipeline's retries.
      if ((error as {name?: unknown}).name === 'AbortError' || signal.aborted) throw error;
      return undefined;
    }
    if (declined) return undefined;
    if (response.status === 200) return {kind: 'page', body: bodyOf(response)};
    return PASSED_ON.has(response.status) ? {kind: 'error', response} : undefined;
  }

  /** Runs the request through the extra policies. */
  #through(request: PipelineRequest, send: (req: PipelineRequest) => Promise<PipelineResponse>): Promise<PipelineResponse> {
    let next = send;
    for (let i = this.#policies.length - 1; i >= 0; i--) {
      const policy = this.#policies[i] as PipelinePolicy;
      const inner = next;
      next = (req) => policy.sendRequest(req, inner);
    }
    return next(request);
  }

  /** A current token of the credential; undefined when it cannot be had (the pipeline then asks and reports). */
  async #bearer(): Promise<string | undefined> {
    const token = this.#token;
    if (token !== undefined && this.#now() < refreshAt(token)) return token.token;
    this.#refreshing ??= this.#options.credential
      .getToken([this.#options.scope])
      .then(
        (fresh) => {
          this.#token = fresh ?? undefined;
          return this.#token;
        },
        () => undefined,
      )
      .finally(() => {
        this.#refreshing = undefined;
      });
    const fresh = await this.#refreshing;
    return fresh !== undefined && this.#now() < fresh.expiresOnTimestamp ? fresh.token : undefined;
  }

  /** One HTTP exchange. `declined`: the answer is not one this path reads (the pipeline is asked instead). */
  #send(request: PipelineRequest, token: string, template: Template): Promise<{response: PipelineResponse; declined: boolean}> {
    const url = new URL(request.url);
    const headers: Record<string, string> = request.headers.toJSON({preserveCase: true});
    headers['authorization'] = `Bearer ${token}`;
    const dispatch: Dispatcher.DispatchOptions = {origin: url.origin, path: `${url.pathname}${url.search}`, method: 'GET', headers};
    return new Promise((resolve, reject) => {
      const exchange = new Exchange(request, url.pathname, this.#options.timeoutMs, resolve, reject, this.#options.budget ?? sharedAnswerBudget);
      try {
        this.#dispatcherFor(template.tls).dispatch(dispatch, exchange);
      } catch (error) {
        exchange.onResponseError(undefined, error instanceof Error ? error : new Error(String(error)));
      }
    });
  }
}

type Controller = Dispatcher.DispatchController;

/**
 * One GET on the short path's pool: the answer collected in one buffer, settled once. One timer
 * covers the whole exchange (waiting for a socket, connecting, headers, body), as the SDK's
 * per-attempt timeout does; the caller's abort and the timer fail it as an `AbortError`.
 */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #request: PipelineRequest;
  readonly #path: string;
  readonly #resolve: (outcome: {response: PipelineResponse; declined: boolean}) => void;
  readonly #reject: (error: Error) => void;
  readonly #timer: NodeJS.Timeout;
  #controller: Controller | undefined;
  #settled = false;
  #status = 0;
  #headers: http.IncomingHttpHeaders = {};
  #encoded = false;
  #chunks: Buffer[] = [];
  #bytes = 0;
  readonly #budget: AnswerBudget;
  readonly #onAbort = (): void => {
    this.#fail(Object.assign(new Error('The operation was aborted.'), {name: 'AbortError'}));
  };

  constructor(request: PipelineRequest, path: string, timeoutMs: number, resolve: (outcome: {response: PipelineResponse; declined: boolean}) => void, reject: (error: Error) => void, budget: AnswerBudget) {
    this.#budget = budget;
    this.#request = request;
    this.#path = path;
    this.#resolve = resolve;
    this.#reject = reject;
    this.#timer = setTimeout(() => this.#fail(Object.assign(new Error(`ARM did not answer ${path} within ${timeoutMs} ms`), {name: 'AbortError'})), timeoutMs);
    const signal = request.abortSignal;
    if (signal?.aborted) this.#onAbort();
    else signal?.addEventListener('abort', this.#onAbort, {once: true});
  }

  onRequestStart(controller: Controller): void {
    this.#controller = controller;
    // Settled while it waited for a socket (abort, timeout): undici drops it now.
    if (this.#settled) controller.abort(Object.assign(new Error('The operation was aborted.'), {name: 'AbortError'}));
  }

  onResponseStart(_controller: Controller, statusCode: number, headers: http.IncomingHttpHeaders): void {
    this.#status = statusCode;
    this.#headers = headers;
    const encoding = headers['content-encoding'];
    this.#encoded = encoding !== undefined && encoding !== 'identity';
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.#settled) return;
    // Longer than this path reads, or past the budget of answers being read at once (src/core/answer-budget.ts).
    if (this.#bytes + chunk.length > MAX_LEAN_ANSWER_BYTES || !this.#budget.take(chunk.length)) {
      // Not read here: the pipeline is asked for it, as for any answer this path does not take.
      this.#finish({response: answer(this.#request, this.#status, this.#headers, Buffer.alloc(0)), declined: true});
      controller.abort(Object.assign(new Error(`the answer to ${this.#path} is not read on the short path (longer than ${MAX_LEAN_ANSWER_BYTES} bytes, or past the budget of answers being read)`), {name: 'LeanTransportError'}));
      return;
    }
    this.#bytes += chunk.length;
    this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    const chunks = this.#chunks;
    this.#chunks = [];
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    const status = this.#status;
    this.#finish({response: answer(this.#request, status, this.#headers, body), declined: this.#encoded || !(status === 200 || PASSED_ON.has(status))});
  }

  // A reset, a refused connection or a body cut short fails this attempt as the SDK's client does
  // (PARSE_ERROR for a cut body, so metrics read the same); the pipeline then reads it again.
  onResponseError(_controller: Controller | undefined, error: Error): void {
    this.#chunks = [];
    if (error.name === 'AbortError') return this.#fail(error);
    const code = (error as {code?: unknown}).code;
    const cut = this.#status !== 0;
    this.#fail(
      cut
        ? Object.assign(new Error(`the answer to ${this.#path} was cut off`), {name: 'LeanTransportError', code: 'PARSE_ERROR'})
        : Object.assign(new Error(`short path GET failed: ${error.message}`), {name: 'LeanTransportError', code}),
    );
  }

  #fail(error: Error): void {
    if (this.#settled) return;
    this.#chunks = [];
    this.#settle();
    this.#controller?.abort(error);
    this.#reject(error);
  }

  #finish(outcome: {response: PipelineResponse; declined: boolean}): void {
    if (this.#settled) return;
    this.#settle();
    this.#resolve(outcome);
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

function bodyOf(response: PipelineResponse): Buffer {
  return response instanceof RawResponse ? response.raw : Buffer.from(response.bodyAsText ?? '', 'utf8');
}

/** A PipelineResponse over the raw answer (no WeakMap entry per page); its text is decoded only if a policy reads it (error answers). */
class RawResponse implements PipelineResponse {
  readonly request: PipelineRequest;
  readonly status: number;
  readonly headers: HttpHeaders;
  #raw: Buffer;
  #text: string | undefined;

  constructor(request: PipelineRequest, status: number, headers: HttpHeaders, raw: Buffer) {
    this.request = request;
    this.status = status;
    this.headers = headers;
    this.#raw = raw;
  }

  /** The body's bytes (as a policy left them: one that rewrote the text rewrote these too). */
  get raw(): Buffer {
    return this.#raw;
  }

  get bodyAsText(): string {
    this.#text ??= this.#raw.toString('utf8');
    return this.#text;
  }

  set bodyAsText(text: string | null | undefined) {
    this.#text = text ?? '';
    this.#raw = Buffer.from(this.#text, 'utf8');
  }
}

function answer(request: PipelineRequest, status: number, raw: http.IncomingHttpHeaders, body: Buffer): PipelineResponse {
  return new RawResponse(request, status, new AnswerHeaders(raw), body);
}

/**
 * The answer's headers as the SDK's HttpHeaders, read straight from Node's object: a good page's
 * headers are rarely read (the metrics policy reads them only for errors), so the SDK's own
 * header map is built only when a policy changes or lists them.
 */
class AnswerHeaders implements HttpHeaders {
  readonly #raw: http.IncomingHttpHeaders;
  #copy: HttpHeaders | undefined;

  constructor(raw: http.IncomingHttpHeaders) {
    this.#raw = raw;
  }

  get(name: string): string | undefined {
    if (this.#copy) return this.#copy.get(name);
    const value = this.#raw[name.toLowerCase()];
    return Array.isArray(value) ? value[0] : value;
  }

  has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  set(name: string, value: string | number | boolean): void {
    this.#own().set(name, value);
  }

  delete(name: string): void {
    this.#own().delete(name);
  }

  toJSON(options?: {preserveCase?: boolean}): Record<string, string> {
    return this.#own().toJSON(options);
  }

  [Symbol.iterator](): Iterator<[string, string]> {
    return this.#own()[Symbol.iterator]();
  }

  #own(): HttpHeaders {
    if (!this.#copy) {
      const copy = createHttpHeaders();
      for (const [name, value] of Object.entries(this.#raw)) {
        const first = Array.isArray(value) ? value[0] : value;
        if (first !== undefined) copy.set(name, first);
      }
      this.#copy = copy;
    }
    return this.#copy;
  }
}

function refreshAt(token: AccessToken): number {
  const before = token.expiresOnTimestamp - REFRESH_WINDOW_MS;
  return token.refreshAfterTimestamp !== undefined ? Math.min(token.refreshAfterTimestamp, before) : before;
}
