/**
 * The direct way of the short path's calls (lean-read.ts): instead of running the client's
 * `finalizeRequest` middlewares for every call — the SDK's retry middleware (two awaited
 * providers, an abort race with its own listener around each wait, a request clone), its
 * signing middleware, then ours — one small loop drives the same SDK objects:
 *
 * - the client's own retry strategy (`config.retryStrategy()`: acquireInitialRetryToken,
 *   refreshRetryTokenForRetry, recordSuccess), with the error information the SDK's retry
 *   middleware gives it (error type from the SDK's classifiers, the retry-after hint), the same
 *   invocation and attempt headers, the same backoff, abort and `$metadata` of the result;
 * - the client's own SigV4 auth signer (`sign`, `successHandler`, `errorHandler` of the auth
 *   scheme the SDK selected on the operation's first call), so the credentials of the call
 *   (read per call: clients are shared by accounts, lean-sdk.ts), the signing-key cache and the
 *   clock-skew correction are the SDK's;
 * - the middlewares left in `finalizeRequest` (the 2xx error-type refusal, the metrics), once
 *   per attempt, in the stack's order — composed once per (client, operation): only middlewares
 *   known to read nothing of a call's context but its client and command names are allowed;
 * - the undici dispatcher of the client's request handler (`UndiciHttpHandler.send`), with its
 *   deadlines, abort, answer cap and error classification.
 *
 * The request is the one the SDK built for the operation's first call on the client (endpoint,
 * path, headers), with the input's fields — built once per call, signed per attempt.
 */
import {randomUUID} from 'node:crypto';
import {buildQueryString} from '@smithy/core/protocols';
import {getRetryAfterHint, isServerError, isThrottlingError, isTransientError} from '@smithy/core/retry';
import type {HttpResponse} from '@smithy/protocol-http';
import type {RetryErrorInfo, RetryErrorType, RetryStrategyV2, RetryToken} from '@smithy/types';
import {unwatchAbort, watchAbort} from './abort-watch.ts';
import type {UndiciHttpHandler} from './undici-handler.ts';

/** One attempt's arguments as the finalizeRequest middlewares see them (the SDK's `{input, request}`). */
interface AttemptArgs {
  readonly input: object;
  readonly request: SignedRequest;
  /** The call's own state, carried through the middlewares to the terminal. */
  readonly call: CallState;
}
type AttemptResult = {readonly output: {$metadata: Record<string, unknown>}; readonly response: HttpResponse};
type Attempt = (args: AttemptArgs) => Promise<AttemptResult>;
/** A finalizeRequest middleware as the SDK stack holds it. */
export type FinalizeMiddleware = (next: Attempt, context: object) => Attempt;

/** The auth signer the SDK selected (AwsSdkSigV4Signer): signs a request, samples the clock skew of its answer. */
export interface AuthSigner {
  sign(request: object, identity: undefined, signingProperties: Record<string, unknown>): Promise<object>;
  successHandler?(response: unknown, signingProperties: Record<string, unknown>): void;
  errorHandler?(signingProperties: Record<string, unknown>): (error: unknown) => never;
}

/** The request a call sends, before signing: the fields SigV4 and the wire need. */
export interface DirectRequest {
  readonly protocol: string;
  readonly hostname: string;
  readonly port?: number;
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

interface SignedRequest {
  readonly method: string;
  readonly path: string;
  readonly query?: Record<string, string | string[] | null>;
  readonly headers: Record<string, string>;
  readonly body?: unknown;
}

interface CallState {
  readonly abortSignal: AbortSignal | undefined;
  readonly read: (response: HttpResponse) => Promise<{$metadata: Record<string, unknown>}>;
}

/** What a client gives the direct way, found once per (client, operation) by lean-read.ts. */
export interface DirectClient {
  readonly handler: UndiciHttpHandler;
  /** `protocol//host[:port]` of the operation's endpoint. */
  readonly origin: string;
  readonly retryStrategy: () => Promise<RetryStrategyV2 | object>;
  readonly maxAttempts: () => Promise<number>;
  readonly signer: AuthSigner;
  /** The auth option's signing properties (a copy is made per call: the signer notes the send time in it). */
  readonly signingProperties: Readonly<Record<string, unknown>>;
  /** The SDK's handler context of the operation, shared: the signer and the allowed middlewares only read it. */
  readonly context: Readonly<Record<string, unknown>>;
  /** The finalizeRequest middlewares below signing, innermost first. */
  readonly attemptMiddlewares: readonly FinalizeMiddleware[];
}

/** finalizeRequest middlewares the direct way runs per attempt with a shared context (they read only its names). */
export const DIRECT_SAFE_MIDDLEWARES: ReadonlySet<string> = new Set(['kubeDiscoveryErrorTypeOn2xx', 'kubeDiscoveryMetrics']);


const INVOCATION_ID_HEADER = 'amz-sdk-invocation-id';
const REQUEST_HEADER = 'amz-sdk-request';

/** Sends one operation's calls the direct way for one client; built once per (client, operation). */
export class DirectReader {
  readonly #client: DirectClient;
  readonly #attempt: Attempt;
  readonly #scope: string;
  #strategy: RetryStrategyV2 | undefined;
  #maxAttempts = 0;
  /** The client's strategy and attempt count being resolved (first calls only). */
  #resolving: Promise<boolean> | undefined;
  /** The client's retry strategy is not the SDK's v2 kind: its calls keep the middlewares' way. */
  disabled = false;

  /** Ready at once: a burst of calls right after the first (a region's describes) takes this way too. */
  constructor(client: DirectClient) {
    this.#client = client;
    const context = client.context;
    const partition = context['partition_id'];
    // The retry token scope, as the SDK's retry middleware names it.
    this.#scope = (typeof partition === 'string' ? partition : '') + (context['__retryLongPoll'] ? ':longpoll' : '');
    let attempt: Attempt = (args) => this.#send(args);
    for (const middleware of client.attemptMiddlewares) attempt = middleware(attempt, context);
    this.#attempt = attempt;
  }

  /**
   * One call: the request signed and sent per attempt until an answer is read (`read`: the
   * output, or the SDK's error for it) or the retry strategy gives up; see the file comment.
   */
  async call(input: object, request: DirectRequest, abortSignal: AbortSignal | undefined, read: CallState['read'], otherwise: () => Promise<{$metadata: Record<string, unknown>}>): Promise<{$metadata: Record<string, unknown>}> {
    if (this.#strategy === undefined && !(await this.#resolve())) return otherwise();
    const strategy = this.#strategy as RetryStrategyV2;
    const maxAttempts = this.#maxAttempts;
    const {signer, signingProperties: clientSigningProperties, context} = this.#client;
    // The call's waits (retry token, socket, answer) each watch the signal; held for the whole
    // call, the signal's one listener is added once, not once per wait (abort-watch.ts).
    // One hold per call (a Set entry): calls sharing a signal must not end each other's hold.
    const hold = (): void => {};
    if (abortSignal) watchAbort(abortSignal, hold);
    try {
      let token: RetryToken = await race(strategy.acquireInitialRetryToken(this.#scope), abortSignal);
      const headers = request.headers;
      headers[INVOCATION_ID_HEADER] = randomUUID();
      const call: CallState = {abortSignal, read};
      let attempts = 0;
      let totalRetryDelay = 0;
      for (;;) {
        try {
          headers[REQUEST_HEADER] = `attempt=${attempts + 1}; max=${maxAttempts}`;
          // One attempt as the SDK's signing middleware makes it: signed, sent, its answer's clock
          // sampled (in this loop rather than a method of its own: one promise less per call).
          const signingProperties: Record<string, unknown> = {...clientSigningProperties, context};
          const signed = (await signer.sign(request, undefined, signingProperties)) as SignedRequest;
          let result: AttemptResult;
          try {
            result = await this.#attempt({input, request: signed, call});
          } catch (error) {
            if (signer.errorHandler) signer.errorHandler(signingProperties)(error);
            throw error;
          }
          signer.successHandler?.(result.response, signingProperties);
          const {output} = result;
          strategy.recordSuccess(token);
          output.$metadata['attempts'] = attempts + 1;
          output.$metadata['totalRetryDelay'] = totalRetryDelay;
          return output;
        } catch (error) {
          const info = retryErrorInfo(error);
          const lastError = asSdkError(error);
          try {
            token = await race(strategy.refreshRetryTokenForRetry(token, info), abortSignal);
          } catch (refreshError) {
            if (abortSignal?.aborted && isAbortError(refreshError)) throw refreshError;
            const metadata = ((lastError as {$metadata?: Record<string, unknown>}).$metadata ??= {});
            metadata['attempts'] = attempts + 1;
            metadata['totalRetryDelay'] = totalRetryDelay;
            throw lastError;
          }
          attempts = token.getRetryCount();
          const delay = token.getRetryDelay();
          totalRetryDelay += ((token as {$retryLog?: {acquisitionDelay?: number}}).$retryLog?.acquisitionDelay ?? 0) + delay;
          if (delay > 0) await race(new Promise((resolve) => setTimeout(resolve, delay)), abortSignal);
        }
      }
    } finally {
      if (abortSignal) unwatchAbort(abortSignal, hold);
    }
  }

  /**
   * Resolves the client's retry strategy and attempt count once; they are fixed for a client
   * (resolveRetryConfig memoizes the strategy). False when the strategy is not the v2 kind.
   */
  #resolve(): Promise<boolean> {
    this.#resolving ??= (async () => {
      const strategy = await this.#client.retryStrategy();
      const maxAttempts = await this.#client.maxAttempts();
      if (!isRetryStrategyV2(strategy)) {
        this.disabled = true;
        return false;
      }
      this.#maxAttempts = maxAttempts;
      this.#strategy = strategy;
      return true;
    })();
    return this.#resolving;
  }

  /** The innermost step: the signed request on the wire, its answer read. */
  async #send(args: AttemptArgs): Promise<AttemptResult> {
    const {request, call} = args;
    const response = await this.#client.handler.send(this.#client.origin, request.method, pathOf(request), request.headers, request.body, call.abortSignal);
    return {response, output: await call.read(response)};
  }
}

/** The path with its query, as the SDK's handlers put it on the wire. */
function pathOf(request: SignedRequest): string {
  const query = request.query ? buildQueryString(request.query) : '';
  return query ? `${request.path}?${query}` : request.path;
}

function isRetryStrategyV2(strategy: unknown): strategy is RetryStrategyV2 {
  const s = strategy as Partial<RetryStrategyV2> | null;
  return typeof s?.acquireInitialRetryToken === 'function' && typeof s.refreshRetryTokenForRetry === 'function' && typeof s.recordSuccess === 'function';
}

/** The SDK retry middleware's error information: its type by the SDK's classifiers, the answer's retry-after hint. */
function retryErrorInfo(error: unknown): RetryErrorInfo {
  const e = error as Parameters<typeof isThrottlingError>[0];
  const errorType: RetryErrorType = isThrottlingError(e) ? 'THROTTLING' : isTransientError(e) ? 'TRANSIENT' : isServerError(e) ? 'SERVER_ERROR' : 'CLIENT_ERROR';
  const info: RetryErrorInfo = {error: error as RetryErrorInfo['error'], errorType};
  const hint = getRetryAfterHint((error as {$response?: unknown} | null)?.$response);
  if (hint) info.retryAfterHint = hint;
  return info;
}

/** As the SDK's retry middleware: what is thrown is an Error. */
function asSdkError(error: unknown): Error {
  if (error instanceof Error) return error;
  if (error instanceof Object) return Object.assign(new Error(), error);
  if (typeof error === 'string') return new Error(error);
  return new Error(`AWS SDK error wrapper for ${String(error)}`);
}

const isAbortError = (error: unknown): boolean => typeof error === 'object' && error !== null && (error as {name?: unknown}).name === 'AbortError';

/**
 * As the SDK's retry middleware races its waits with the call's abort signal: settles as `promise`
 * does, or rejects with an AbortError when the signal aborts first. One promise and one watch per
 * wait (this runs on every call, for its retry token): no second promise, race or finally.
 */
function race<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(Object.assign(new Error('Request aborted'), {name: 'AbortError'}));
    // Rejects at once when the signal has aborted already; `promise` is handled either way (never an unhandled rejection).
    watchAbort(signal, onAbort);
    promise.then(
      (value) => {
        unwatchAbort(signal, onAbort);
        resolve(value);
      },
      (error: unknown) => {
        unwatchAbort(signal, onAbort);
        reject(error as Error);
      },
    );
  });
}
