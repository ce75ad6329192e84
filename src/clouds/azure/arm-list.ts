/**
 * Reads an ARM list (every page, following `nextLink`) through an SDK client's own pipeline —
 * its bearer token, retries, timeouts and our policies — but parses each page once, strictly,
 * into plain JSON objects. The SDK's pager parsed every page twice more (its JSON body, then its
 * model mapper), which was most of a steady W5 cycle's CPU for 500 pages of clusters.
 *
 * Malformed is not empty: a page that is not a 200 JSON object with a `value` array of objects
 * throws `InvalidResponse`, so the caller's source fails instead of reading it as no resources.
 */
import {hash} from 'node:crypto';
import {createHttpHeaders, createPipelineRequest, RestError, type HttpClient, type Pipeline, type PipelineResponse} from '@azure/core-rest-pipeline';
import {pageTokenKey} from '../../core/page-token.ts';
import {TurnGate} from '../../core/turns.ts';
import type {LeanAnswer} from './lean-get.ts';
import {parseListPage, shapeCheckedByCaller} from './pipeline.ts';

/** Sends one GET through a client's pipeline (an SDK client's `pipeline` with the shared HTTP client). */
export type ArmGet = (url: string, signal: AbortSignal) => Promise<PipelineResponse>;

/** The short path of a GET (lean-get.ts): its answer, or undefined when the pipeline must be asked. */
export type ShortGet = (url: string, signal: AbortSignal) => Promise<LeanAnswer | undefined>;

/** What a caller made of one well-formed page, and the page's nextLink. */
export interface MadePage<T> {
  readonly made: T;
  readonly nextLink: string | undefined;
}

/**
 * What a caller made of each page of a list's last good reading, by the SHA-256 of the page's
 * body. A steady cycle gets most pages back byte for byte: such a page is the page already
 * parsed, checked and made into T, so it is neither parsed nor made again.
 */
export interface PageMemory<T> {
  /** The pages of the last good reading (undefined: none). */
  readonly previous: ReadonlyMap<string, MadePage<T>> | undefined;
  /** Where this reading notes its pages; the caller keeps it only when the whole reading succeeds. */
  readonly next: Map<string, MadePage<T>>;
  /** Makes T of a page read for the first time (its resources parsed and checked). */
  make(resources: readonly Record<string, unknown>[]): T;
}

/**
 * The short path's pages are worked through two per turn of the event loop (src/core/turns.ts):
 * the walk's and the subscriptions list's next pages, written and read between turns, no longer
 * wait behind a whole burst of a hundred listings' pages.
 */
const pageTurns = new TurnGate(2);

/** Pages per list before it is given up as endless: a nextLink that never ends is not an answer. */
export const MAX_LIST_PAGES = 10_000;

/** An {@link ArmGet} over an SDK client's pipeline; the request is marked so the shape policy leaves the parsing to {@link armListPages}. */
export function pipelineGet(pipeline: Pipeline, httpClient: HttpClient): ArmGet {
  return (url, signal) => {
    const request = createPipelineRequest({url, method: 'GET', abortSignal: signal, headers: createHttpHeaders({accept: 'application/json'})});
    shapeCheckedByCaller(request);
    return pipeline.sendRequest(httpClient, request);
  };
}

/**
 * Every page of the list at `url`, in order: each page's resources as parsed JSON objects, or,
 * with `memory`, what `memory.make` made of them — a page whose body is byte for byte one of the
 * last good reading's is then not parsed again (see {@link PageMemory}). Throws a RestError for
 * an error answer (ARM's code and message, as the SDK would) and `InvalidResponse` for a
 * malformed page, a repeated nextLink or an endless list: the strict checks ran on a page's
 * first reading, and nextLinks are checked on every reading. `operation` (`managedClusters.list`)
 * names the call in the messages; test/deploy/iam.test.ts reads it to check the role grants its action.
 * With `short`, each page is first asked for on the short path (lean-get.ts); a page it declines,
 * or a 200 it cannot read as a list page, is asked for again through `get`.
 */
export function armListPages(operation: string, get: ArmGet, url: string, signal: AbortSignal, apiVersion: string): AsyncGenerator<readonly Record<string, unknown>[]>;
export function armListPages<T>(operation: string, get: ArmGet, url: string, signal: AbortSignal, apiVersion: string, memory: PageMemory<T>, short?: ShortGet): AsyncGenerator<T>;
export function armListPages<T>(operation: string, get: ArmGet, url: string, signal: AbortSignal, apiVersion: string, memory?: PageMemory<T>, short?: ShortGet): AsyncGenerator<T | readonly Record<string, unknown>[]> {
  return memory ? readList(operation, get, url, signal, apiVersion, memory.make, memory, short) : readList(operation, get, url, signal, apiVersion, (resources) => resources, undefined, undefined);
}

async function* readList<T>(
  operation: string,
  get: ArmGet,
  url: string,
  signal: AbortSignal,
  apiVersion: string,
  make: (resources: readonly Record<string, unknown>[]) => T,
  memory: Omit<PageMemory<T>, 'make'> | undefined,
  short: ShortGet | undefined,
): AsyncGenerator<T> {
  const seen = new Set<string>();
  let next: string | undefined = url;
  while (next !== undefined) {
    // The signal goes with every page (the SDK's pager sent pages after the first without it).
    signal.throwIfAborted();
    let key: string | undefined;
    let page: MadePage<T> | undefined;
    let status = 200;
    const answer: LeanAnswer | undefined = short === undefined ? undefined : await short(next, signal);
    // The page's own work (digest, records, the source's clusters) waits for its turn: with a
    // hundred listings in flight, a management group walk's next page was sent only after every
    // answer ahead of it had been worked through, and the plan waited on the walk (W5: the event
    // loop idled ~40 ms a steady cycle in the plan, ~20 ms with one setImmediate per page, and each
    // walk page still took 35–55 ms against its 20 ms round trip; two pages a turn: see pageTurns).
    if (answer?.kind === 'page') await pageTurns.turn();
    if (answer?.kind === 'error') throw errorAnswer(answer.response);
    if (answer?.kind === 'page' && answer.body.length > 0) {
      // The raw bytes are looked up before anything is decoded: a steady cycle's pages mostly come back unchanged.
      key = memory === undefined ? undefined : hash('sha256', answer.body, 'base64');
      page = key === undefined ? undefined : memory?.previous?.get(key);
      if (page === undefined) {
        const parsed = parseListPage(200, answer.body.toString('utf8'));
        // A page that does not read as a list is asked for again through the pipeline, which judges it as before.
        if ('problem' in parsed) key = undefined;
        else page = {made: make(parsed.value), nextLink: parsed.nextLink};
      }
    }
    if (page === undefined) {
      const response = await get(next, signal);
      status = response.status;
      if (response.status < 200 || response.status >= 300) throw errorAnswer(response);
      const text = response.bodyAsText;
      // Only a 200 with a body is ever noted; anything else gets the full check below.
      key = memory && response.status === 200 && text ? hash('sha256', text, 'base64') : undefined;
      page = key === undefined ? undefined : memory?.previous?.get(key);
      if (page === undefined) {
        const parsed = parseListPage(response.status, text);
        if ('problem' in parsed) throw invalid(`${operation}: ARM answered ${pathOf(response.request.url)} with ${parsed.problem}`, response.status);
        page = {made: make(parsed.value), nextLink: parsed.nextLink};
      }
    }
    if (key !== undefined) memory?.next.set(key, page);
    const link: string | undefined = page.nextLink;
    if (link !== undefined) {
      // The bearer token goes with every page: a nextLink off the list's own origin is never followed.
      if (!sameOrigin(link, url)) throw invalid(`${operation}: the list at ${pathOf(url)} returned a nextLink to another host`, status);
      // ARM pages a list at its own path: a nextLink into another list (another subscription's, a
      // resource group's, another resource type's) would be read as this list's remaining pages.
      if (!samePath(link, url)) throw invalid(`${operation}: the list at ${pathOf(url)} returned a nextLink to another list, ${pathOf(new URL(link, url).href)}`, status);
      // Remembered by digest when long: fresh megabyte nextLinks page after page must not pile up here.
      const linkKey = pageTokenKey(link);
      if (seen.has(linkKey)) throw invalid(`${operation}: the list at ${pathOf(url)} returned a nextLink it had already returned`, status);
      if (seen.size >= MAX_LIST_PAGES) throw invalid(`${operation}: the list at ${pathOf(url)} returned more than ${MAX_LIST_PAGES} pages`, status);
      seen.add(linkKey);
    }
    yield page.made;
    next = link === undefined ? undefined : withApiVersion(link, apiVersion);
  }
}

/** A nextLink without api-version gets the list's (as the SDK's pager does). */
function withApiVersion(link: string, apiVersion: string): string {
  const parsed = new URL(link, 'https://management.azure.com');
  return parsed.searchParams.get('api-version') ? link : `${link}${parsed.search ? '&' : '?'}api-version=${encodeURIComponent(apiVersion)}`;
}

/** An ARM error answer as the SDK throws it: status, ARM's error code and message, request and response. */
function errorAnswer(response: PipelineResponse): RestError {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const body = JSON.parse(response.bodyAsText ?? '') as {error?: {code?: unknown; message?: unknown}} | null;
    const error = body?.error ?? (body as {code?: unknown; message?: unknown} | null);
    if (typeof error?.code === 'string') code = error.code;
    if (typeof error?.message === 'string') message = error.message;
  } catch {
    // Not ARM's JSON (a proxy's HTML page): the status has to do.
  }
  return new RestError(message ?? `Unexpected status code: ${response.status}`, {
    statusCode: response.status,
    ...(code === undefined ? {} : {code}),
    request: response.request,
    response,
  });
}

function invalid(message: string, statusCode: number): Error {
  return Object.assign(new Error(message), {name: 'InvalidResponse', code: 'InvalidResponse', statusCode});
}

/** Whether `link` (absolute, or relative to `base`) has the scheme, host and port of `base`. */
export function sameOrigin(link: string, base: string): boolean {
  try {
    return new URL(link, base).origin === new URL(base).origin;
  } catch {
    return false;
  }
}

/** Whether `link` (absolute, or relative to `base`) names the path of `base` (ARM paths are case-insensitive). */
export function samePath(link: string, base: string): boolean {
  try {
    const path = (u: URL): string => u.pathname.replace(/\/+$/, '').toLowerCase();
    return path(new URL(link, base)) === path(new URL(base));
  } catch {
    return false;
  }
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return '(unparsable url)';
  }
}
