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
import {determineTimestampFormat} from '@smithy/core/protocols';
import {NormalizedSchema, operation} from '@smithy/core/schema';
import {parseEpochTimestamp} from '@smithy/core/serde';
import {HttpRequest, type HttpResponse} from '@smithy/protocol-http';
import {SMITHY_CONTEXT_KEY} from '@smithy/types';
import {duplicateKey, duplicateKeyProblem} from '../../core/json-keys.ts';
import {DIRECT_SAFE_MIDDLEWARES, DirectReader, type AuthSigner, type FinalizeMiddleware} from './direct-read.ts';
import {invalidResponse} from './errors.ts';
import {UndiciHttpHandler} from './undici-handler.ts';

/** The parts of an SDK v3 client used here; EKSClient and ResourceGroupsTaggingAPIClient have them. */
export interface LeanReadableClient {
  readonly config: object;
  readonly middlewareStack: object;
  send(command: never, options?: never): Promise<unknown>;
}

/** Calls of a wrapped client by the way they took: the SDK's whole way, the short path's middlewares, or the direct way (direct-read.ts). */
export interface LeanWays {
  sdk: number;
  middlewares: number;
  direct: number;
}

/** One operation taken on the short path. */
export interface LeanOperation {
  /** The SDK's command class (`ListClustersCommand`). */
  readonly command: abstract new (...args: never[]) => {readonly input: object};
  /**
   * The request's path (when it carries the input), query and body for an input, or undefined to
   * send this input the SDK's way; `captured` is the request the SDK built for its first call.
   */
  request(input: Readonly<Record<string, unknown>>, captured: {readonly path: string}): {path?: string; query?: Record<string, string>; body?: string} | undefined;
  /** The output from a parsed 2xx body of the documented shape, or undefined to let the SDK read it. */
  read(body: unknown): object | undefined;
  /**
   * The answer decides what exists (a listing): a key given twice at its top level fails it as
   * malformed before it is parsed (src/core/json-keys.ts), as the SDK's way does (unique-keys.ts).
   */
  readonly listing?: boolean;
  /**
   * Another operation of the same client whose captured request this one's can be made from
   * (same endpoint, headers, auth scheme and signer; only the path differs): with it, this
   * operation's first call needs no SDK call of its own. `path` gives this operation's captured
   * path from the other's, or undefined when it cannot.
   */
  readonly derive?: {readonly from: LeanOperation['command']; path(capturedPath: string): string | undefined};
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

/** Per operation of a wrapped client: its reader, the SDK's schema, its direct way once known. */
interface Entry {
  readonly op: LeanOperation;
  readonly commandName: string;
  schema: unknown;
  /** undefined: not decided yet; null: the middlewares' way. */
  direct: DirectReader | null | undefined;
  read?: (response: HttpResponse) => Promise<{$metadata: Record<string, unknown>}>;
}

/** Headers set per request by signing, retry and content length: never copied from the captured request. */
const PER_REQUEST_HEADERS = new Set(['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256', 'amz-sdk-invocation-id', 'amz-sdk-request', 'content-length']);
const CAPTURE = 'kubeDiscoveryLeanReadCapture';
const REQUEST_ID = /^x-[\w-]+-request-?id$/;
const DESERIALIZATION_HINT = 'Deserialization error: to see the raw response, inspect the hidden field {error}.$response on this object.';

/**
 * Wraps a client: the given operations take the short path once the SDK has made one call of
 * each on this client; every other command, and every call until then, is the client's own `send`.
 */
export function leanReads<C extends LeanReadableClient>(client: C, operations: readonly LeanOperation[]): Pick<C, 'send'> & {readonly ways: LeanWays} {
  const ways: LeanWays = {sdk: 0, middlewares: 0, direct: 0};
  const config = client.config as ResolvedConfig;
  const stack = client.middlewareStack as StackLike;
  const captured = new Map<string, Captured>();
  // Per operation, while its first SDK call is on its way to the capture: releases the calls waiting for it.
  const firstCalls = new Map<string, {readonly started: Promise<void>; readonly release: () => void}>();
  /**
   * The operations made from `from`'s capture (LeanOperation.derive): a full cycle's first
   * DescribeCluster of a client goes the direct way after its ListClusters, instead of a cold
   * SDK call per region that every other describe of the region waits for.
   */
  function derive(from: string, seen: Captured): void {
    for (const op of operations) {
      const name = op.command.name;
      if (op.derive?.from.name !== from || captured.has(name)) continue;
      const path = op.derive.path(seen.request.path);
      if (path === undefined) continue;
      captured.set(name, {request: {...seen.request, path}, auth: seen.auth, context: {...seen.context, commandName: name}});
    }
  }
  // Sees each SDK call after serialisation, endpoint, host and user-agent middlewares, before signing.
  stack.add(
    (next: Handler, context: Record<string, unknown>) => (args: {input: object; request: unknown}) => {
      const name = context['commandName'];
      if (typeof name === 'string' && !captured.has(name) && HttpRequest.isInstance(args.request)) {
        const r = args.request;
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(r.headers)) if (!PER_REQUEST_HEADERS.has(k.toLowerCase())) headers[k] = v;
        const scheme = getSmithyContext(context as never)['selectedHttpAuthScheme'] as Captured['auth'] | undefined;
        if (scheme) {
          const seen: Captured = {
            request: {protocol: r.protocol, hostname: r.hostname, ...(r.port === undefined ? {} : {port: r.port}), method: r.method, path: r.path, headers},
            auth: {httpAuthOption: scheme.httpAuthOption, signer: scheme.signer},
            context: {
              clientName: context['clientName'],
              commandName: name,
              endpointV2: context['endpointV2'],
              ...(context['partition_id'] === undefined ? {} : {partition_id: context['partition_id']}),
              ...(context['authSchemes'] === undefined ? {} : {authSchemes: context['authSchemes']}),
            },
          };
          captured.set(name, seen);
          derive(name, seen);
        }
      }
      if (typeof name === 'string') firstCalls.get(name)?.release();
      return next(args);
    },
    {step: 'build', priority: 'low', name: CAPTURE, override: true},
  );

  // The client's finalizeRequest middlewares (retry, signing, metrics), built once on first use so
  // that middlewares added after construction (observability's) are in it; kept as the list the
  // stack resolves them in, innermost first, so a call does not re-sort the stack's entries.
  let finalize: readonly Middleware[] | null | undefined;
  // The names of the noted middlewares, in the same order.
  let finalizeNames: readonly string[] = [];
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
        const names: string[] = [];
        const noting = (middleware: Middleware, name: unknown): Middleware => (next, context) => {
          order.push(middleware);
          names.push(typeof name === 'string' ? name : '');
          return middleware(next, context);
        };
        const probe = constructStack() as unknown as StackLike;
        // The options the stack passes on carry the middleware too: the noting one must replace it there.
        clone.applyToStack({
          add: (middleware, options) => {
            const noted = noting(middleware as Middleware, (options as {name?: unknown}).name);
            probe.add(noted, {...options, middleware: noted});
          },
          addRelativeTo: (middleware, options) => {
            const noted = noting(middleware as Middleware, (options as {name?: unknown}).name);
            probe.addRelativeTo(noted, {...options, middleware: noted});
          },
        });
        // Throws if something left in it is anchored to a middleware that is not: then no short path.
        probe.resolve(() => Promise.reject(new Error('unused')), {});
        // Every middleware of the stack noted once, or the list is not the stack's: no short path then.
        if (order.length === 0 || order.length !== clone.identify().length) throw new Error('finalizeRequest middlewares not all noted');
        finalize = order;
        finalizeNames = names;
      } catch {
        finalize = null;
      }
    }
    return finalize;
  };

  const byClass = new Map<unknown, Entry>(operations.map((op) => [op.command as unknown, {op, commandName: op.command.name, schema: undefined, direct: undefined}]));

  /**
   * The direct way (direct-read.ts) of an operation, once its first call was captured: only on
   * the service's undici handler, with the SDK's retry and signing middlewares outermost in
   * finalizeRequest and nothing below them but middlewares that read no call's context; null
   * when the client does not qualify (its calls then run the middlewares, as below).
   */
  const directOf = (entry: Entry, seen: Captured, finalizing: readonly Middleware[]): DirectReader | null | undefined => {
    if (entry.direct !== undefined) return entry.direct?.disabled ? null : entry.direct;
    const n = finalizeNames.length;
    const signer = seen.auth.signer as Partial<AuthSigner> | undefined;
    const {retryStrategy, maxAttempts} = config as Partial<{retryStrategy: unknown; maxAttempts: unknown}>;
    const qualifies =
      config.requestHandler instanceof UndiciHttpHandler &&
      n === finalizing.length &&
      finalizeNames[n - 1] === 'retryMiddleware' &&
      finalizeNames[n - 2] === 'httpSigningMiddleware' &&
      finalizeNames.slice(0, n - 2).every((name) => DIRECT_SAFE_MIDDLEWARES.has(name)) &&
      typeof signer?.sign === 'function' &&
      typeof retryStrategy === 'function' &&
      typeof maxAttempts === 'function';
    if (!qualifies) return (entry.direct = null);
    // The first call's signing properties, without what a signer noted in them for that call.
    const signingProperties: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(seen.auth.httpAuthOption.signingProperties ?? {})) if (!k.startsWith('_') && k !== 'context') signingProperties[k] = v;
    const r = seen.request;
    const host = r.hostname.startsWith('[') || !r.hostname.includes(':') ? r.hostname : `[${r.hostname}]`;
    entry.direct = new DirectReader({
      handler: config.requestHandler,
      origin: `${r.protocol}//${host}${r.port === undefined ? '' : `:${r.port}`}`,
      retryStrategy: retryStrategy as () => Promise<object>,
      maxAttempts: maxAttempts as () => Promise<number>,
      signer: signer as AuthSigner,
      signingProperties,
      context: seen.context,
      attemptMiddlewares: finalizing.slice(0, n - 2) as unknown as FinalizeMiddleware[],
    });
    return entry.direct;
  };
  const sdkSend = client.send.bind(client) as (command: unknown, options?: unknown) => Promise<unknown>;

  const send = (command: {readonly input: object; readonly schema?: unknown}, options?: {abortSignal?: AbortSignal}): Promise<unknown> => {
    const entry = byClass.get(command.constructor);
    const seen = entry ? captured.get(entry.commandName) : undefined;
    const parts = entry && seen ? entry.op.request(command.input as Record<string, unknown>, seen.request) : undefined;
    const finalizing = entry && seen && parts ? finalizeStack() : null;
    if (!entry || !seen || !parts || !finalizing) {
      ways.sdk++;
      return sdkSend(command, options);
    }
    entry.schema ??= command.schema;
    const abortSignal = options?.abortSignal;
    const direct = directOf(entry, seen, finalizing);
    if (direct) {
      const headers = {...seen.request.headers};
      if (parts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(parts.body));
      ways.direct++;
      const read = (entry.read ??= (response) => deserialize(config, entry.op, entry.schema, seen.context, response) as Promise<{$metadata: Record<string, unknown>}>);
      return direct.call(
        command.input,
        {...seen.request, path: parts.path ?? seen.request.path, query: parts.query ?? {}, headers, ...(parts.body === undefined ? {} : {body: parts.body})},
        abortSignal,
        read,
        // A client whose retry strategy the direct way cannot drive: this call and the later ones run the middlewares.
        () => {
          ways.direct--;
          return viaMiddlewares(command, abortSignal, entry, seen, parts, finalizing) as Promise<{$metadata: Record<string, unknown>}>;
        },
      );
    }
    return viaMiddlewares(command, abortSignal, entry, seen, parts, finalizing);
  };

  /** The short path through the client's finalizeRequest middlewares and its request handler. */
  const viaMiddlewares = (
    command: {readonly input: object},
    abortSignal: AbortSignal | undefined,
    entry: Entry,
    seen: Captured,
    parts: {path?: string; query?: Record<string, string>; body?: string},
    finalizing: readonly Middleware[],
  ): Promise<unknown> => {
    ways.middlewares++;
    const request = new HttpRequest({...seen.request, ...(parts.path === undefined ? {} : {path: parts.path}), headers: {...seen.request.headers}, query: parts.query ?? {}, ...(parts.body === undefined ? {} : {body: parts.body})});
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
  /**
   * A full cycle starts a region's DescribeCluster calls all at once, before the SDK's first one
   * has shown its request: without this, nearly all of them would take the SDK's way. Calls that
   * come while an operation's first SDK call is on its way wait until it has passed the capture
   * (before signing and sending, so not for its answer), or until it settled without one (the
   * waiting calls then go on at once, the SDK's way).
   */
  const sendAfterFirst = (command: {readonly input: object; readonly schema?: unknown}, options?: {abortSignal?: AbortSignal}): Promise<unknown> => {
    const entry = byClass.get(command.constructor);
    if (!entry || captured.has(entry.commandName)) return send(command, options);
    const name = entry.commandName;
    const first = firstCalls.get(name);
    if (first) return first.started.then(() => send(command, options));
    let release = (): void => {};
    const started = new Promise<void>((resolve) => {
      release = resolve;
    });
    firstCalls.set(name, {started, release});
    const call = send(command, options);
    const done = (): void => {
      release();
      firstCalls.delete(name);
    };
    call.then(done, done);
    return call;
  };
  return {send: sendAfterFirst as unknown as C['send'], ways};
}

/** The fast read of a plain 2xx answer, else the SDK's deserialiser; errors carry `$response` and `$metadata` as the SDK's do. */
async function deserialize(config: ResolvedConfig, op: LeanOperation, schema: unknown, context: object, response: HttpResponse): Promise<{$metadata: object}> {
  try {
    if (response.statusCode >= 200 && response.statusCode < 300) {
      // A handler that read the whole answer (undici-handler.ts) gives its bytes.
      const bytes = response.body instanceof Uint8Array ? response.body : response.body instanceof Readable ? await collect(response.body) : await config.streamCollector(response.body);
      // Read once: the SDK's deserialiser (below) and the 2xx error-type check (lean-sdk.ts) read the same bytes.
      response.body = bytes;
      const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
      if (op.listing) {
        const key = duplicateKey(text);
        if (key !== undefined) throw Object.assign(invalidResponse(duplicateKeyProblem(key)), {$metadata: metadataOf(response)});
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const output = parsed === undefined ? undefined : op.read(parsed);
      if (output) return {...output, $metadata: metadataOf(response)};
      // Not the plain shape: the SDK reads the same bytes and decides (an output, or its error).
    }
    const [, ns, n, t, i, o] = schema as [number, string, string, object, unknown, unknown];
    return (await config.protocol.deserializeResponse(operation(ns, n, t as never, i as never, o as never), {...config, ...context}, response)) as {$metadata: object};
  } catch (error) {
    // As the SDK's deserializer middleware does: the retry and signing middlewares read these.
    if (error !== null && typeof error === 'object') {
      Object.defineProperty(error, '$response', {value: response, enumerable: false, writable: false, configurable: false});
      if (!('$metadata' in error)) {
        // The SDK's own words for an answer it could not read, so a logged error reads the same either way.
        try {
          (error as {message: string}).message += `\n  ${DESERIALIZATION_HINT}`;
        } catch {
          // a frozen error keeps its message
        }
        (error as {$metadata: object}).$metadata = metadataOf(response);
      }
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
  const {headers} = response;
  for (const k in headers) {
    if (Object.hasOwn(headers, k) && REQUEST_ID.test(k)) {
      requestId = headers[k];
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
    listing: true,
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
    // Not what exists, but a page lost to a second key would hide tag changes: the read fails, the cycle describes.
    listing: true,
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

/**
 * How the SDK's JSON deserialiser (codec v2 of @smithy/core, REST-JSON settings) turns one
 * schema node's parsed value into output, compiled once from the SDK's own schema so that a call
 * walks a plain tree instead of building normalised schemas. Only the kinds below are read here;
 * a node of any other kind (blob, big number, document, union, media-typed string, a timestamp
 * not in epoch seconds) is `bail`: an answer carrying one goes to the SDK.
 */
type Plan =
  | {readonly kind: 'plain'}
  | {readonly kind: 'number'}
  | {readonly kind: 'epoch'}
  | {readonly kind: 'bail'}
  | {readonly kind: 'list' | 'map'; readonly value: Plan}
  | {readonly kind: 'struct'; readonly members: readonly Member[]};
/** A structure member: its output name, its key in the JSON (`jsonName`), its plan. */
interface Member {
  readonly name: string;
  readonly key: string;
  readonly plan: Plan;
}

const PLAIN: Plan = {kind: 'plain'};
const BAIL: Plan = {kind: 'bail'};
/** Thrown inside a read when the answer is not one this reader can give exactly as the SDK would. */
const NOT_PLAIN = Symbol('not plain');
const REST_JSON_SETTINGS = {timestampFormat: {useTrait: true, default: 7}, httpBindings: true} as const;

function compilePlan(ns: NormalizedSchema, depth: number): Plan {
  // Recursive shapes (none in the outputs read here) are the SDK's to read.
  if (depth > 12) return BAIL;
  if (ns.isStructSchema()) {
    if (ns.isUnionSchema()) return BAIL;
    const members: Member[] = [];
    for (const [name, member] of ns.structIterator()) {
      const jsonName = (member.getMergedTraits() as {jsonName?: unknown}).jsonName;
      members.push({name, key: typeof jsonName === 'string' ? jsonName : name, plan: compilePlan(member, depth + 1)});
    }
    return {kind: 'struct', members};
  }
  if (ns.isListSchema()) return {kind: 'list', value: compilePlan(ns.getValueSchema(), depth + 1)};
  if (ns.isMapSchema()) return {kind: 'map', value: compilePlan(ns.getValueSchema(), depth + 1)};
  if (ns.isBlobSchema() || ns.isBigIntegerSchema() || ns.isBigDecimalSchema() || ns.isDocumentSchema()) return BAIL;
  if (ns.isStringSchema()) return (ns.getMergedTraits() as {mediaType?: unknown}).mediaType ? BAIL : PLAIN;
  if (ns.isTimestampSchema()) return determineTimestampFormat(ns, REST_JSON_SETTINGS as never) === 7 ? {kind: 'epoch'} : BAIL;
  if (ns.isNumericSchema()) return {kind: 'number'};
  return PLAIN;
}

/** Whether a plan holds a node that makes the SDK parse the whole body differently (its JSON reviver). */
function needsOwnParse(plan: Plan): boolean {
  if (plan.kind === 'bail') return true;
  if (plan.kind === 'list' || plan.kind === 'map') return needsOwnParse(plan.value);
  if (plan.kind === 'struct') return plan.members.some((m) => needsOwnParse(m.plan));
  return false;
}

/** One value as the SDK's `_read` gives it, new containers instead of the SDK's in-place edits; NOT_PLAIN thrown otherwise. */
function readPlan(plan: Plan, value: unknown): unknown {
  switch (plan.kind) {
    case 'plain':
      return value;
    case 'number':
      // The SDK's spelling of non-finite numbers in JSON.
      if (value === 'Infinity') return Infinity;
      if (value === '-Infinity') return -Infinity;
      if (value === 'NaN') return NaN;
      return value;
    case 'epoch':
      if (value === null || value === undefined) return value;
      if (typeof value !== 'number') throw NOT_PLAIN;
      return parseEpochTimestamp(value);
    case 'list': {
      if (!Array.isArray(value)) throw NOT_PLAIN;
      return plan.value.kind === 'plain' ? value : value.map((v: unknown) => readPlan(plan.value, v));
    }
    case 'map': {
      if (!isObject(value)) throw NOT_PLAIN;
      // The SDK rewrites a `__proto__` key its own way: not plain.
      if (Object.hasOwn(value, '__proto__')) throw NOT_PLAIN;
      if (plan.value.kind === 'plain') return value;
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(value)) out[k] = readPlan(plan.value, value[k]);
      return out;
    }
    case 'struct': {
      // A record with `__type` has its unknown members copied by the SDK: not plain.
      if (!isObject(value) || typeof value['__type'] === 'string') throw NOT_PLAIN;
      const out: Record<string, unknown> = {};
      // Indexed: a cold first cycle runs this before the optimiser removes a for-of's iterators.
      const {members} = plan;
      for (let i = 0; i < members.length; i++) {
        const m = members[i] as Member;
        const v = value[m.key];
        if (v !== null && v !== undefined) out[m.name] = readPlan(m.plan, v);
      }
      return out;
    }
    case 'bail':
      throw NOT_PLAIN;
  }
}

/** Compiled DescribeCluster plans by command class (null: the SDK reads every answer). */
const PLANS = new WeakMap<object, Plan | null>();

/**
 * EKS `DescribeCluster` (REST-JSON, `GET /clusters/{name}`), one call per cluster a full cycle.
 * The SDK reads its large answer through its schema-driven deserialiser (~0.3 ms of CPU a call);
 * the short path reads the parsed body with a plan compiled once from the same schema, giving
 * the output the SDK gives (timestamps as Date, members the model does not know dropped, nulls
 * left out). A name that needs escaping in the path, a body that is not an object, or any value
 * of a kind the plan does not read exactly goes to the SDK.
 */
export function describeClusterOperation(command: LeanOperation['command'], options: {readonly after?: LeanOperation['command']} = {}): LeanOperation {
  // One plan per command class, shared by every client's operation: a first cycle built it once per region.
  let plan: Plan | null | undefined;
  const bodyPlan = (): Plan | null => {
    plan ??= PLANS.get(command);
    if (plan === undefined) {
      try {
        const schema = (Reflect.construct(command, [{}]) as {schema?: unknown}).schema as [number, string, string, object, unknown, unknown];
        const output = NormalizedSchema.of(operation(schema[1], schema[2], schema[3] as never, schema[4] as never, schema[5] as never).output);
        // Only body members: a member bound to a header or the status is the SDK's to read.
        const bound = [...output.structIterator()].some(([, m]) => {
          const t = m.getMergedTraits() as Record<string, unknown>;
          return Boolean(t['httpHeader'] ?? t['httpPrefixHeaders'] ?? t['httpResponseCode'] ?? t['httpPayload']);
        });
        const compiled = compilePlan(output, 0);
        plan = bound || needsOwnParse(compiled) ? null : compiled;
      } catch {
        plan = null;
      }
      PLANS.set(command, plan);
    }
    return plan;
  };
  const after = options.after;
  return {
    command,
    // ListClusters of the same client: `GET <endpoint path>/clusters`, DescribeCluster `GET <endpoint path>/clusters/{name}`.
    ...(after ? {derive: {from: after, path: (listing: string) => (listing.endsWith('/clusters') ? `${listing}/` : undefined)}} : {}),
    request(input, captured) {
      if (!onlyKeys(input, ['name'])) return undefined;
      const {name} = input;
      // Names EKS allows need no escaping: the path is the same string the SDK would build.
      if (typeof name !== 'string' || !/^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/.test(name)) return undefined;
      const at = captured.path.lastIndexOf('/clusters/');
      if (at < 0 || bodyPlan() === null) return undefined;
      return {path: `${captured.path.slice(0, at)}/clusters/${name}`};
    },
    read(body) {
      const compiled = bodyPlan();
      if (!compiled || !isObject(body)) return undefined;
      try {
        return readPlan(compiled, body) as object;
      } catch (error) {
        if (error === NOT_PLAIN) return undefined;
        // An epoch the SDK's own parser refuses: the SDK reads the answer and throws its error.
        return undefined;
      }
    },
  };
}
