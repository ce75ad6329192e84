/**
 * A shorter way through the SDK for the two read calls an organization cycle makes once per
 * (account, region): EKS `ListClusters` and tagging `GetResources` (~34,000 calls a W4 cycle).
 * The full SDK path rebuilds a middleware stack, resolves endpoint rules, runs schema-driven
 * serialisation and deserialisation and several build-step middlewares on every call, although
 * for these two requests everything but the input's two fields and the identity is the same on
 * every call of a client.
 *
 * What is kept, as the SDK has it: the client's own `finalizeRequest` middlewares — its retry
 * middleware and strategy (standard or adaptive, the same token bucket and rate limiter as the
 * client's other calls, throttling and 5xx classified by the SDK), its SigV4 signing middleware
 * (clock-skew correction included, identity read per call), and whatever else observability
 * added there (the metrics middleware) — and its request handler (keep-alive agent, connection
 * and request timeouts, abort). What is replaced: the request is the one the SDK built for the
 * client's first call of the operation, with only the input's fields changed; a 2xx answer of
 * the plain documented shape is read with `JSON.parse`. Anything else — an error status, a body
 * that is not JSON, an unexpected shape, an input with other fields — goes to the SDK's own
 * deserialiser (or the whole SDK path), so every error is the one the SDK would have thrown.
 */
import {Readable} from 'node:stream';
import {getSmithyContext} from '@smithy/core';
import {constructStack} from '@smithy/core/client';
import {operation} from '@smithy/core/schema';
import {HttpRequest, type HttpResponse} from '@smithy/protocol-http';
import {SMITHY_CONTEXT_KEY} from '@smithy/types';

/** The parts of an SDK v3 client used here; EKSClient and ResourceGroupsTaggingAPIClient have them. */
export interface LeanReadableClient {
  readonly config: object;
  readonly middlewareStack: object;
  send(command: never, options?: never): Promise<unknown>;
}

/** One operation taken on the short path. */
export interface LeanOperation {
  /** The SDK's command class (`ListClustersCommand`). */
  readonly command: abstract new (...args: never[]) => {readonly input: object};
  /** The request's query and body for an input, or undefined to send this input the SDK's way. */
  request(input: Readonly<Record<string, unknown>>): {query?: Record<string, string>; body?: string} | undefined;
  /** The output from a parsed 2xx body of the documented shape, or undefined to let the SDK read it. */
  read(body: unknown): object | undefined;
}

interface StackLike {
  add(middleware: unknown, options: object): void;
  addRelativeTo(middleware: unknown, options: object): void;
  applyToStack(to: Pick<StackLike, 'add' | 'addRelativeTo'>): void;
  clone(): StackLike;
  identify(): string[];
  remove(name: string): boolean;
  resolve(handler: Handler, context: object): Handler;
}
type Handler = (args: {input: object; request: unknown}) => Promise<{output: {$metadata: object}; response: unknown}>;
type Middleware = (next: Handler, context: object) => Handler;

interface ResolvedConfig {
  readonly requestHandler: {handle(request: HttpRequest, options: {abortSignal?: AbortSignal}): Promise<{response: HttpResponse}>};
  readonly streamCollector: (body: unknown) => Promise<Uint8Array>;
  readonly protocol: {deserializeResponse(schema: unknown, context: object, response: HttpResponse): Promise<object>};
}

/** What the SDK's first call of an operation showed: the request before signing and the signing context. */
interface Captured {
  readonly request: {protocol: string; hostname: string; port?: number; method: string; path: string; headers: Record<string, string>};
  /** The auth option and signer the SDK selected (its identity is not kept: it is the first caller's). */
  readonly auth: {readonly httpAuthOption: {readonly signingProperties?: object}; readonly signer: unknown};
  readonly context: Record<string, unknown>;
}

/** Headers set per request by signing, retry and content length: never copied from the captured request. */
const PER_REQUEST_HEADERS = new Set(['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256', 'amz-sdk-invocation-id', 'amz-sdk-request', 'content-length']);
const CAPTURE = 'kubeDiscoveryLeanReadCapture';
const REQUEST_ID = /^x-[\w-]+-request-?id$/;

/**
 * Wraps a client: the given operations take the short path once the SDK has made one call of
 * each on this client; every other command, and every call until then, is the client's own `send`.
 */
export function leanReads<C extends LeanReadableClient>(client: C, operations: readonly LeanOperation[]): Pick<C, 'send'> {
  const config = client.config as ResolvedConfig;
  const stack = client.middlewareStack as StackLike;
  const captured = new Map<string, Captured>();
  // Sees each SDK call after serialisation, endpoint, host and user-agent middlewares, before signing.
  stack.add(
    (next: Handler, context: Record<string, unknown>) => (args: {input: object; request: unknown}) => {
      const name = context['commandName'];
      if (typeof name === 'string' && !captured.has(name) && HttpRequest.isInstance(args.request)) {
        const r = args.request;
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(r.headers)) if (!PER_REQUEST_HEADERS.has(k.toLowerCase())) headers[k] = v;
        const scheme = getSmithyContext(context as never)['selectedHttpAuthScheme'] as Captured['auth'] | undefined;
        if (scheme) captured.set(name, {
          request: {protocol: r.protocol, hostname: r.hostname, ...(r.port === undefined ? {} : {port: r.port}), method: r.method, path: r.path, headers},
          auth: {httpAuthOption: scheme.httpAuthOption, signer: scheme.signer},
          context: {
            clientName: context['clientName'],
            commandName: name,
            endpointV2: context['endpointV2'],
            ...(context['partition_id'] === undefined ? {} : {partition_id: context['partition_id']}),
            ...(context['authSchemes'] === undefined ? {} : {authSchemes: context['authSchemes']}),
          },
        });
      }
      return next(args);
    },
    {step: 'build', priority: 'low', name: CAPTURE, override: true},
  );

  // The client's finalizeRequest middlewares (retry, signing, metrics), built once on first use so
  // that middlewares added after construction (observability's) are in it; kept as the list the
  // stack resolves them in, innermost first, so a call does not re-sort the stack's entries.
  let finalize: readonly Middleware[] | null | undefined;
  const finalizeStack = (): readonly Middleware[] | null => {
    if (finalize === undefined) {
      const clone = stack.clone();
      // Relative to a per-command middleware, so `identify` does not list it.
      clone.remove('httpAuthSchemeMiddleware');
      for (const entry of clone.identify()) {
        if (entry.endsWith(' - finalizeRequest')) continue;
        clone.remove(entry.slice(0, entry.indexOf(' ')));
      }
      try {
        // The stack's own order: each middleware, wrapped, notes itself as the stack resolves it.
        const order: Middleware[] = [];
        const noting = (middleware: Middleware): Middleware => (next, context) => {
          order.push(middleware);
          return middleware(next, context);
        };
        const probe = constructStack() as unknown as StackLike;
        // The options the stack passes on carry the middleware too: the noting one must replace it there.
        clone.applyToStack({
          add: (middleware, options) => {
            const noted = noting(middleware as Middleware);
            probe.add(noted, {...options, middleware: noted});
          },
          addRelativeTo: (middleware, options) => {
            const noted = noting(middleware as Middleware);
            probe.addRelativeTo(noted, {...options, middleware: noted});
          },
        });
        // Throws if something left in it is anchored to a middleware that is not: then no short path.
        probe.resolve(() => Promise.reject(new Error('unused')), {});
        // Every middleware of the stack noted once, or the list is not the stack's: no short path then.
        if (order.length === 0 || order.length !== clone.identify().length) throw new Error('finalizeRequest middlewares not all noted');
        finalize = order;
      } catch {
        finalize = null;
      }
    }
    return finalize;
  };

  const byClass = new Map(operations.map((op) => [op.command as unknown, {op, commandName: op.command.name, schema: undefined as unknown}]));
  const sdkSend = client.send.bind(client) as (command: unknown, options?: unknown) => Promise<unknown>;

  const send = (command: {readonly input: object; readonly schema?: unknown}, options?: {abortSignal?: AbortSignal}): Promise<unknown> => {
    const entry = byClass.get(command.constructor);
    const seen = entry ? captured.get(entry.commandName) : undefined;
    const parts = entry && seen ? entry.op.request(command.input as Record<string, unknown>) : undefined;
    const finalizing = entry && seen && parts ? finalizeStack() : null;
    if (!entry || !seen || !parts || !finalizing) return sdkSend(command, options);
    entry.schema ??= command.schema;
    const abortSignal = options?.abortSignal;
    const request = new HttpRequest({...seen.request, headers: {...seen.request.headers}, query: parts.query ?? {}, ...(parts.body === undefined ? {} : {body: parts.body})});
    if (parts.body !== undefined) request.headers['content-length'] = String(Buffer.byteLength(parts.body));
    const context: Record<string, unknown> = {...seen.context};
    // Per call, as the SDK builds them: the signer records the call's send time in its properties
    // (clock-skew correction). No identity: the SigV4 signer reads the call's own credentials.
    const signingProperties = {...seen.auth.httpAuthOption.signingProperties, context};
    context[SMITHY_CONTEXT_KEY] = {
      selectedHttpAuthScheme: {httpAuthOption: {...seen.auth.httpAuthOption, signingProperties}, signer: seen.auth.signer},
      ...(abortSignal ? {abortSignal} : {}),
    };
    const schema = entry.schema;
    const terminal: Handler = async (args) => {
      const {response} = await config.requestHandler.handle(args.request as HttpRequest, abortSignal ? {abortSignal} : {});
      return {response, output: await deserialize(config, entry.op, schema, context, response)};
    };
    let handler = terminal;
    for (const middleware of finalizing) handler = middleware(handler, context);
    return handler({input: command.input, request}).then((r) => r.output);
  };
  return {send: send as unknown as C['send']};
}

/** The fast read of a plain 2xx answer, else the SDK's deserialiser; errors carry `$response` and `$metadata` as the SDK's do. */
async function deserialize(config: ResolvedConfig, op: LeanOperation, schema: unknown, context: object, response: HttpResponse): Promise<{$metadata: object}> {
  try {
    if (response.statusCode >= 200 && response.statusCode < 300) {
      const bytes = response.body instanceof Readable ? await collect(response.body) : await config.streamCollector(response.body);
      let parsed: unknown;
      try {
        parsed = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
      } catch {
        parsed = undefined;
      }
      const output = parsed === undefined ? undefined : op.read(parsed);
      if (output) return {...output, $metadata: metadataOf(response)};
      // Not the plain shape: the SDK reads the same bytes and decides (an output, or its error).
      response.body = bytes;
    }
    const [, ns, n, t, i, o] = schema as [number, string, string, object, unknown, unknown];
    return (await config.protocol.deserializeResponse(operation(ns, n, t as never, i as never, o as never), {...config, ...context}, response)) as {$metadata: object};
  } catch (error) {
    // As the SDK's deserializer middleware does: the retry and signing middlewares read these.
    if (error !== null && typeof error === 'object') {
      Object.defineProperty(error, '$response', {value: response, enumerable: false, writable: false, configurable: false});
      if (!('$metadata' in error)) (error as {$metadata: object}).$metadata = metadataOf(response);
    }
    throw error;
  }
}

/**
 * The body's bytes, as the SDK's stream collector reads them (an error of the stream rejects, a
 * body cut short never resolves as complete), without the collector's Writable and pipe per call.
 */
function collect(body: Readable): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    body.on('data', (chunk: Buffer | string) => chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    body.once('error', reject);
    body.once('end', () => {
      const all = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      resolve(new Uint8Array(all.buffer, all.byteOffset, all.byteLength));
    });
  });
}

function metadataOf(response: HttpResponse): {httpStatusCode: number; requestId?: string} {
  let requestId: string | undefined;
  for (const [k, v] of Object.entries(response.headers)) {
    if (REQUEST_ID.test(k)) {
      requestId = v;
      break;
    }
  }
  return {httpStatusCode: response.statusCode, ...(requestId === undefined ? {} : {requestId})};
}

/** Own, enumerable keys of an input, none but `allowed`. */
function onlyKeys(input: Readonly<Record<string, unknown>>, allowed: readonly string[]): boolean {
  for (const key of Object.keys(input)) if (input[key] !== undefined && !allowed.includes(key)) return false;
  return true;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * EKS `ListClusters` (REST-JSON, `GET /clusters?maxResults=&nextToken=`). The short path reads
 * `{clusters: string[], nextToken?: string}`; anything else is the SDK's to read.
 */
export function listClustersOperation(command: LeanOperation['command']): LeanOperation {
  return {
    command,
    request(input) {
      if (!onlyKeys(input, ['maxResults', 'nextToken'])) return undefined;
      const {maxResults, nextToken} = input;
      if ((maxResults !== undefined && !Number.isInteger(maxResults)) || (nextToken !== undefined && typeof nextToken !== 'string')) return undefined;
      const query: Record<string, string> = {};
      if (maxResults !== undefined) query['maxResults'] = String(maxResults);
      if (nextToken !== undefined) query['nextToken'] = nextToken;
      return {query};
    },
    read(body) {
      if (!isObject(body)) return undefined;
      const {clusters, nextToken} = body;
      if (!Array.isArray(clusters) || !clusters.every((c) => typeof c === 'string')) return undefined;
      if (nextToken !== undefined && typeof nextToken !== 'string') return undefined;
      return nextToken === undefined ? {clusters} : {clusters, nextToken};
    },
  };
}

/**
 * Tagging `GetResources` (AWS JSON 1.1, `POST /`). The short path reads
 * `{ResourceTagMappingList: [{ResourceARN, Tags?: [{Key, Value}]}], PaginationToken?}`.
 */
export function getResourcesOperation(command: LeanOperation['command']): LeanOperation {
  return {
    command,
    request(input) {
      if (!onlyKeys(input, ['ResourceTypeFilters', 'ResourcesPerPage', 'PaginationToken'])) return undefined;
      const {ResourceTypeFilters, ResourcesPerPage, PaginationToken} = input;
      if (ResourceTypeFilters !== undefined && !(Array.isArray(ResourceTypeFilters) && ResourceTypeFilters.every((f) => typeof f === 'string'))) return undefined;
      if (ResourcesPerPage !== undefined && !Number.isInteger(ResourcesPerPage)) return undefined;
      if (PaginationToken !== undefined && typeof PaginationToken !== 'string') return undefined;
      // Absent members are left out (JSON.stringify drops undefined), as the SDK's serialiser does.
      return {body: JSON.stringify({ResourceTypeFilters, ResourcesPerPage, PaginationToken})};
    },
    read(body) {
      if (!isObject(body)) return undefined;
      const {ResourceTagMappingList: list, PaginationToken: token} = body;
      if (!Array.isArray(list)) return undefined;
      for (const m of list as unknown[]) {
        if (!isObject(m) || typeof m['ResourceARN'] !== 'string') return undefined;
        const tags = m['Tags'];
        if (tags !== undefined && !(Array.isArray(tags) && tags.every((t) => isObject(t) && typeof t['Key'] === 'string' && typeof t['Value'] === 'string'))) return undefined;
      }
      if (token !== undefined && typeof token !== 'string') return undefined;
      return token === undefined ? {ResourceTagMappingList: list} : {ResourceTagMappingList: list, PaginationToken: token};
    },
  };
}
