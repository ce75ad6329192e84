/**
 * The SDK's own way of the calls whose answers decide what exists: a key given twice at the top of
 * such an answer (src/core/json-keys.ts) fails the call as malformed before the SDK's deserialiser
 * parses it, since that parser keeps the last of two equal keys (`"clusters":[]` after the real
 * list, `"nextToken":null` after the real token). The short path of lean-read.ts judges the same
 * answers itself (`LeanOperation.listing`); this middleware covers a client's first call of an
 * operation, rate-shaped clients, and clients without a short path (Organizations). A 2xx that
 * names an error type (`x-amzn-ErrorType`, or `__type` at the top of the body, as the JSON
 * protocols name errors) fails the same way: the SDK would read `{"__type":"…","Accounts":[]}`
 * as an empty page; so does a 2xx other than the 200 these operations answer with.
 */
import {HttpResponse} from '@smithy/protocol-http';
import {duplicateKey, duplicateKeyProblem} from '../../core/json-keys.ts';
import {invalidResponse} from './errors.ts';

/**
 * The operations judged, by the SDK's command name, with the top-level objects judged too:
 * `Organization` holds the id the matcher's organization is checked against.
 */
const LISTINGS: ReadonlyMap<string, readonly string[]> = new Map([
  ['ListClustersCommand', []],
  // Not what exists, but a tag page cut short by a second key would hide changes: the read fails, the cycle describes.
  ['GetResourcesCommand', []],
  ['ListRegionsCommand', []],
  ['DescribeOrganizationCommand', ['Organization']],
  ['ListRootsCommand', []],
  ['ListOrganizationalUnitsForParentCommand', []],
  ['ListAccountsForParentCommand', []],
]);

const REQUEST_ID = /^x-[\w-]+-request-?id$/;

/**
 * The reads whose answers decide what exists, and DescribeCluster (a cluster's status): AWS
 * answers each with 200. Another 2xx is not that answer — 206 is part of one, 203 one a proxy
 * rewrote, 202 one not made yet — and the SDK would read `206 {"clusters":[]}` as an empty region.
 */
const ANSWERED_200: ReadonlySet<string> = new Set([...LISTINGS.keys(), 'DescribeClusterCommand']);

/** What is wrong with a 2xx answer to `commandName` whose status is not 200; undefined when nothing is (or the command is not one of those reads). */
export function partialStatusProblem(commandName: unknown, status: number): string | undefined {
  if (status === 200 || status < 200 || status >= 300 || typeof commandName !== 'string' || !ANSWERED_200.has(commandName)) return undefined;
  return `an answer with status ${status} to ${commandName.replace(/Command$/, '')}, which AWS answers with status 200: not a whole answer`;
}

type Handler = (args: {request?: unknown; input: unknown}) => Promise<{response?: unknown; output?: unknown}>;
type Middleware = (next: Handler, context: {commandName?: unknown}) => Handler;

/** What the middleware needs of a client: its stack and its stream collector (resolved config). */
export interface UniqueKeysClient {
  readonly config: object;
  readonly middlewareStack: {add(...args: never[]): void};
}

/**
 * Adds the check of the file comment to a client, innermost in the deserialize step: it sees the
 * raw answer before the SDK's deserialiser; other commands pass through untouched. Returns the client.
 */
export function refuseDuplicateKeys<C extends UniqueKeysClient>(client: C): C {
  const collect = (client.config as {streamCollector?: (body: unknown) => Promise<Uint8Array>}).streamCollector;
  const middleware: Middleware = (next, context) => {
    const within = typeof context.commandName === 'string' ? LISTINGS.get(context.commandName) : undefined;
    // A describe decides nothing about existence: resolved to the next handler itself, it costs nothing per call.
    if (within === undefined) return next;
    return async (args) => {
      const result = await next(args);
      const response = result.response;
      if (!HttpResponse.isInstance(response) || response.statusCode < 200 || response.statusCode >= 300) return result;
      const partial = partialStatusProblem(context.commandName, response.statusCode);
      if (partial !== undefined) {
        const error = Object.assign(invalidResponse(partial), {$metadata: metadataOf(response)});
        Object.defineProperty(error, '$response', {value: response, enumerable: false, writable: false, configurable: false});
        throw error;
      }
      let bytes: Uint8Array;
      if (response.body instanceof Uint8Array) bytes = response.body;
      else if (typeof response.body === 'string') bytes = Buffer.from(response.body, 'utf8');
      else if (response.body === undefined || response.body === null || !collect) return result;
      else bytes = await collect(response.body);
      // The body is read once: the SDK's deserialiser reads the same bytes.
      response.body = bytes;
      const key = duplicateKey(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'), within);
      // A 2xx naming an error type (header, or `__type` as the JSON protocols name errors) is no listing either.
      const type = key === undefined ? (response.headers['x-amzn-errortype'] ?? bodyErrorType(bytes)) : undefined;
      if (key === undefined && type === undefined) return result;
      const problem = key === undefined ? `an answer with status ${response.statusCode} names the error type ${JSON.stringify((type ?? '').slice(0, 60))}` : duplicateKeyProblem(key);
      const error = Object.assign(invalidResponse(problem), {$metadata: metadataOf(response)});
      // As the SDK's deserialiser attaches it: the retry and signing middlewares read it.
      Object.defineProperty(error, '$response', {value: response, enumerable: false, writable: false, configurable: false});
      throw error;
    };
  };
  (client.middlewareStack as unknown as {add(m: Middleware, o: object): void}).add(middleware, {step: 'deserialize', priority: 'low', name: 'kubeDiscoveryDuplicateKeys', tags: [], override: true});
  return client;
}

const TYPE_MEMBER = Buffer.from('"__type"');
/** JSON may spell a key with escapes (`"\u005f_type"`): a body with any is parsed to tell. */
const ESCAPE = Buffer.from('\\u');

/**
 * The `__type` at the top of a JSON body held in memory, as text; undefined when there is none (or
 * the body is a stream). The body is parsed only when it holds the bytes `"__type"` or an escape
 * (a tag named so is not at the top level). A body that is not JSON is the deserialiser's to judge.
 */
export function bodyErrorType(body: unknown): string | undefined {
  if (!(body instanceof Uint8Array)) return undefined;
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (bytes.indexOf(TYPE_MEMBER) < 0 && bytes.indexOf(ESCAPE) < 0) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || !Object.hasOwn(parsed, '__type')) return undefined;
  const value = (parsed as {__type: unknown}).__type;
  return typeof value === 'string' ? value : JSON.stringify(value) ?? 'null';
}

function metadataOf(response: HttpResponse): {httpStatusCode: number; requestId?: string} {
  const id = Object.entries(response.headers).find(([k]) => REQUEST_ID.test(k))?.[1];
  return {httpStatusCode: response.statusCode, ...(id === undefined ? {} : {requestId: id})};
}
