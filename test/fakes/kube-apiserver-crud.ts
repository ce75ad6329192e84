/**
 * A wire-level fake Kubernetes API server with storage: namespaced CRUD of Secrets, Leases and
 * custom resources registered by CRDs, resourceVersion preconditions (409), label selectors,
 * paging, watch with bookmarks and `410 Gone`, finalizers and deletionTimestamp, status
 * subresources, merge patches, TokenReview, and the discovery documents (/api, /apis, /version,
 * /openapi/v2|v3) the real `kubectl` reads before `get` and `apply`. Faults (an error status,
 * a malformed body, a hang) can be injected per request for the registry-fault tests.
 */
import {randomUUID} from 'node:crypto';
import type {IncomingMessage, ServerResponse} from 'node:http';
import {listenHttps, readBody, sendJson} from './http-server.ts';
import {failureStatus, successStatus} from './kube-status.ts';
import type {ServerTls} from './tls-ca.ts';
import {sharedServerTls} from './tls-ca.ts';

/** A stored object (any kind). */
export type KubeObj = Record<string, unknown> & {metadata: Meta};

interface Meta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  generateName?: string;
  [k: string]: unknown;
}

/** A resource type the server serves. */
interface ResourceType {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly singular: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly shortNames: readonly string[];
  readonly statusSubresource: boolean;
  readonly verbs: readonly string[];
  /** additionalPrinterColumns of a CRD version. */
  readonly columns: readonly {name: string; type: string; jsonPath: string; description?: string; priority?: number}[];
}

/** Who a token belongs to. */
export interface FakeKubeUser {
  readonly username: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
}

/** What a fault hook returns: answer with this status/body, never answer, or answer normally once `until` settles (a slow answer). */
export type InjectedFault = {readonly status: number; readonly body: string} | 'hang' | {readonly until: Promise<unknown>};

/** Options of {@link startKubeApiServer}. */
export interface KubeApiServerOptions {
  /** Bearer tokens accepted for API calls; default `{'test-token': admin}`. Mutable through `tokens`. */
  readonly tokens?: Record<string, FakeKubeUser>;
  /** TokenReview answers; default: the same `tokens` map. */
  readonly reviewToken?: (token: string, audiences: readonly string[]) => FakeKubeUser | undefined;
  /** Authenticates a bearer token not in `tokens` (an EKS token checked like EKS does, say). */
  readonly authenticate?: (token: string) => Promise<FakeKubeUser | undefined>;
  readonly tls?: ServerTls;
  /** Seconds between watch BOOKMARK events; default 1 (0 disables the timer; `bookmark()` still works). */
  readonly bookmarkIntervalMs?: number;
}

/** A request as seen by the server, for call counting. */
export interface KubeCall {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly watch: boolean;
  /** User name of the bearer token, when valid. */
  readonly user?: string;
}

/** A running fake API server. */
export interface KubeApiServer {
  readonly url: string;
  readonly caPem: string;
  /** Accepted bearer tokens (mutable: tests rotate tokens). */
  readonly tokens: Map<string, FakeKubeUser>;
  /** Every request, in arrival order. */
  readonly calls: KubeCall[];
  /** Creates a namespace (`default` exists from the start). */
  createNamespace(name: string): void;
  /** Registers a CRD object (same as POSTing it to apiextensions). */
  addCrd(crd: Record<string, unknown>): void;
  /** Direct read of a stored object, bypassing HTTP. */
  getObject(group: string, plural: string, namespace: string | undefined, name: string): KubeObj | undefined;
  /** Every stored object of a resource in a namespace. */
  listObjects(group: string, plural: string, namespace?: string): KubeObj[];
  /** Forgets watch history up to now: watches from an older resourceVersion get 410 Gone; open watches are closed with 410. */
  compact(): void;
  /** Sends a BOOKMARK to every open watch now. */
  bookmark(): void;
  /** Ends every open watch stream (clients must resume). */
  dropWatches(): void;
  /**
   * Whether no request is being answered (watches and requests a 'hang' fault holds aside):
   * tests that step a fake clock wait for this rather than for a while of real time.
   */
  idle(): boolean;
  /** Hook consulted for every request; return a fault to answer it badly. */
  setFault(fault: ((call: KubeCall) => InjectedFault | undefined) | undefined): void;
  /** A kubeconfig (YAML) pointing at this server with `token`. */
  kubeconfig(namespace?: string, token?: string): string;
  close(): Promise<void>;
}

const ADMIN: FakeKubeUser = {username: 'kubernetes-admin', groups: ['system:masters']};

const builtin: ResourceType[] = [
  {group: '', version: 'v1', plural: 'secrets', singular: 'secret', kind: 'Secret', namespaced: true, shortNames: [], statusSubresource: false, verbs: allVerbs(), columns: []},
  {group: '', version: 'v1', plural: 'namespaces', singular: 'namespace', kind: 'Namespace', namespaced: false, shortNames: ['ns'], statusSubresource: false, verbs: allVerbs(), columns: []},
  {group: 'coordination.k8s.io', version: 'v1', plural: 'leases', singular: 'lease', kind: 'Lease', namespaced: true, shortNames: [], statusSubresource: false, verbs: allVerbs(), columns: [
    {name: 'Holder', type: 'string', jsonPath: '.spec.holderIdentity'},
  ]},
  {group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions', singular: 'customresourcedefinition', kind: 'CustomResourceDefinition', namespaced: false, shortNames: ['crd', 'crds'], statusSubresource: true, verbs: allVerbs(), columns: []},
  {group: 'authentication.k8s.io', version: 'v1', plural: 'tokenreviews', singular: 'tokenreview', kind: 'TokenReview', namespaced: false, shortNames: [], statusSubresource: false, verbs: ['create'], columns: []},
];

function allVerbs(): string[] {
  return ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
}

/** The part of a CRD's spec the fake serves from. */
interface CrdSpec {
  readonly group: string;
  readonly scope: string;
  readonly names: {readonly plural: string; readonly singular?: string; readonly kind: string; readonly shortNames?: string[]};
  readonly versions: ReadonlyArray<{
    readonly name: string;
    readonly served?: boolean;
    readonly subresources?: {readonly status?: unknown};
    readonly additionalPrinterColumns?: ResourceType['columns'];
  }>;
}

interface HistoryEvent {
  readonly rv: number;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly typeKey: string;
  readonly object: KubeObj;
}

interface OpenWatch {
  readonly typeKey: string;
  readonly namespace: string | undefined;
  readonly selector: LabelSelector;
  readonly res: ServerResponse;
  readonly bookmarks: boolean;
  readonly rt: ResourceType;
}

class HttpError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly details: Record<string, unknown> | undefined;
  constructor(status: number, reason: string, message: string, details?: Record<string, unknown>) {
    super(message);
    this.status = status;
    this.reason = reason;
    this.details = details;
  }
}

/** Starts the fake on 127.0.0.1 with a free port. */
export async function startKubeApiServer(options: KubeApiServerOptions = {}): Promise<KubeApiServer> {
  const tls = options.tls ?? await sharedServerTls();
  const tokens = new Map<string, FakeKubeUser>(Object.entries(options.tokens ?? {'test-token': ADMIN}));
  const reviewToken = options.reviewToken ?? ((token: string) => tokens.get(token));
  const types = new Map<string, ResourceType>();
  for (const rt of builtin) types.set(typeKeyOf(rt.group, rt.plural), rt);
  const store = new Map<string, KubeObj>();
  const history: HistoryEvent[] = [];
  const watches = new Set<OpenWatch>();
  const calls: KubeCall[] = [];
  let answering = 0;
  let rv = 100;
  let compactedRv = 0;
  let fault: ((call: KubeCall) => InjectedFault | undefined) | undefined;

  const objKey = (typeKey: string, ns: string | undefined, name: string) => `${typeKey}|${ns ?? ''}|${name}`;

  function typeKeyOf(group: string, plural: string): string {
    return `${group}/${plural}`;
  }

  function record(type: HistoryEvent['type'], typeKey: string, object: KubeObj): void {
    const event: HistoryEvent = {rv: Number(object.metadata.resourceVersion), type, typeKey, object: structuredClone(object)};
    history.push(event);
    for (const w of watches) {
      if (w.typeKey !== typeKey) continue;
      if (w.namespace !== undefined && object.metadata.namespace !== w.namespace) continue;
      if (!w.selector(object.metadata.labels ?? {})) continue;
      writeEvent(w.res, type, event.object);
    }
  }

  function registerCrd(crd: KubeObj): void {
    const spec = crd['spec'] as CrdSpec;
    const names = spec.names;
    for (const v of spec.versions) {
      if (v.served === false) continue;
      const rt: ResourceType = {
        group: spec.group,
        version: v.name,
        plural: names.plural,
        singular: names.singular ?? names.kind.toLowerCase(),
        kind: names.kind,
        namespaced: spec.scope === 'Namespaced',
        shortNames: names.shortNames ?? [],
        statusSubresource: v.subresources?.status !== undefined,
        verbs: allVerbs(),
        columns: v.additionalPrinterColumns ?? [],
      };
      types.set(typeKeyOf(rt.group, rt.plural), rt);
    }
  }

  function unregisterCrd(crd: KubeObj): void {
    const spec = crd['spec'] as CrdSpec;
    types.delete(typeKeyOf(spec.group, spec.names.plural));
  }

  function stamp(obj: KubeObj): void {
    obj.metadata.resourceVersion = String(++rv);
  }

  function create(rt: ResourceType, ns: string | undefined, body: KubeObj): KubeObj {
    const typeKey = typeKeyOf(rt.group, rt.plural);
    if (body.metadata === undefined || typeof body.metadata !== 'object') throw new HttpError(422, 'Invalid', `${rt.kind} is invalid: metadata: Required value`);
    let name = body.metadata.name;
    if ((name === undefined || name === '') && typeof body.metadata.generateName === 'string') {
      name = `${body.metadata.generateName}${randomUUID().slice(0, 5)}`;
    }
    if (typeof name !== 'string' || name === '') throw new HttpError(422, 'Invalid', `${rt.kind} "" is invalid: metadata.name: Required value: name or generateName is required`);
    validateMeta(rt, name, body.metadata);
    if (body.metadata.resourceVersion !== undefined && body.metadata.resourceVersion !== '') {
      throw new HttpError(422, 'Invalid', `${rt.kind} "${name}" is invalid: metadata.resourceVersion: Invalid value: "${body.metadata.resourceVersion}": must not be set on create`);
    }
    const key = objKey(typeKey, ns, name);
    if (store.has(key)) {
      throw new HttpError(409, 'AlreadyExists', `${rt.plural}${rt.group ? `.${rt.group}` : ''} "${name}" already exists`, {name, group: rt.group, kind: rt.plural});
    }
    const obj = structuredClone(body);
    obj['apiVersion'] = rt.group ? `${rt.group}/${rt.version}` : rt.version;
    obj['kind'] = rt.kind;
    obj.metadata = {...obj.metadata, name, uid: randomUUID(), creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), generation: 1};
    if (ns !== undefined) obj.metadata.namespace = ns;
    delete obj.metadata.deletionTimestamp;
    if (rt.statusSubresource) delete obj['status'];
    stamp(obj);
    store.set(key, obj);
    if (rt.kind === 'CustomResourceDefinition') registerCrd(obj);
    record('ADDED', typeKey, obj);
    return obj;
  }

  function get(rt: ResourceType, ns: string | undefined, name: string): KubeObj {
    const obj = store.get(objKey(typeKeyOf(rt.group, rt.plural), ns, name));
    if (!obj) throw notFound(rt, name);
    return obj;
  }

  /** Replaces an object (PUT or applied patch); `subresource` = 'status' changes status only. */
  function update(rt: ResourceType, ns: string | undefined, name: string, body: KubeObj, subresource: string | undefined): KubeObj {
    const typeKey = typeKeyOf(rt.group, rt.plural);
    const current = get(rt, ns, name);
    if (body.metadata?.name !== undefined && body.metadata.name !== name) {
      throw new HttpError(400, 'BadRequest', `the name of the object (${body.metadata.name}) does not match the name on the URL (${name})`);
    }
    const wanted = body.metadata?.resourceVersion;
    if (wanted !== undefined && wanted !== '' && wanted !== current.metadata.resourceVersion) {
      throw conflict(rt, name);
    }
    let next: KubeObj;
    if (subresource === 'status') {
      next = structuredClone(current);
      next['status'] = structuredClone(body['status']);
    } else {
      validateMeta(rt, name, body.metadata ?? {name});
      next = structuredClone(body);
      next['apiVersion'] = current['apiVersion'];
      next['kind'] = current['kind'];
      next.metadata = {
        ...(next.metadata ?? {}),
        name,
        uid: current.metadata.uid,
        creationTimestamp: current.metadata.creationTimestamp,
        generation: current.metadata.generation,
      } as Meta;
      if (ns !== undefined) next.metadata.namespace = ns;
      // deletionTimestamp cannot be set or cleared by an update.
      if (current.metadata.deletionTimestamp === undefined) delete next.metadata.deletionTimestamp;
      else next.metadata.deletionTimestamp = current.metadata.deletionTimestamp;
      if (rt.statusSubresource) {
        if (current['status'] === undefined) delete next['status'];
        else next['status'] = structuredClone(current['status']);
      }
      if (JSON.stringify(next['spec']) !== JSON.stringify(current['spec'])) next.metadata.generation = (current.metadata.generation ?? 1) + 1;
    }
    if (current.metadata.deletionTimestamp !== undefined) {
      const added = (next.metadata.finalizers ?? []).filter((f) => !(current.metadata.finalizers ?? []).includes(f));
      if (added.length > 0) {
        throw new HttpError(422, 'Invalid', `${rt.kind} "${name}" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted`);
      }
      // The last finalizer is gone: the object is deleted now.
      if ((next.metadata.finalizers ?? []).length === 0) return remove(rt, typeKey, ns, next);
    }
    stamp(next);
    store.set(objKey(typeKey, ns, name), next);
    if (rt.kind === 'CustomResourceDefinition') registerCrd(next);
    record('MODIFIED', typeKey, next);
    return next;
  }

  function remove(rt: ResourceType, typeKey: string, ns: string | undefined, obj: KubeObj): KubeObj {
    store.delete(objKey(typeKey, ns, obj.metadata.name));
    const gone = structuredClone(obj);
    stamp(gone);
    if (rt.kind === 'CustomResourceDefinition') unregisterCrd(gone);
    record('DELETED', typeKey, gone);
    return gone;
  }

  function del(rt: ResourceType, ns: string | undefined, name: string, body: string): {status: number; body: unknown} {
    const typeKey = typeKeyOf(rt.group, rt.plural);
    const current = get(rt, ns, name);
    if (body.trim() !== '') {
      const opts = parseJson(body) as {preconditions?: {resourceVersion?: string; uid?: string}};
      const pre = opts.preconditions;
      if (pre?.resourceVersion !== undefined && pre.resourceVersion !== current.metadata.resourceVersion) {
        throw new HttpError(409, 'Conflict', `Operation cannot be fulfilled on ${rt.plural}${rt.group ? `.${rt.group}` : ''} "${name}": the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${current.metadata.resourceVersion}). The object might have been modified`, {name, group: rt.group, kind: rt.plural});
      }
      if (pre?.uid !== undefined && pre.uid !== current.metadata.uid) {
        throw new HttpError(409, 'Conflict', `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${current.metadata.uid}`);
      }
    }
    if ((current.metadata.finalizers ?? []).length > 0) {
      if (current.metadata.deletionTimestamp !== undefined) return {status: 202, body: current};
      const next = structuredClone(current);
      next.metadata.deletionTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      stamp(next);
      store.set(objKey(typeKey, ns, name), next);
      record('MODIFIED', typeKey, next);
      return {status: 202, body: next};
    }
    const gone = remove(rt, typeKey, ns, current);
    return {status: 200, body: rt.group === '' || rt.kind === 'Lease' ? successStatus({name, group: rt.group, kind: rt.plural, uid: gone.metadata.uid ?? ''}) : gone};
  }

  function list(rt: ResourceType, ns: string | undefined, query: URLSearchParams): Record<string, unknown> {
    const typeKey = typeKeyOf(rt.group, rt.plural);
    const selector = parseSelector(query.get('labelSelector') ?? '');
    const fieldName = parseFieldSelector(query.get('fieldSelector') ?? '');
    const all = [...store.entries()]
      .filter(([k, o]) => k.startsWith(`${typeKey}|`) && (ns === undefined || o.metadata.namespace === ns)
        && selector(o.metadata.labels ?? {}) && (fieldName === undefined || o.metadata.name === fieldName))
      .map(([k, o]) => ({k, o}))
      .sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0));
    const limit = Number(query.get('limit') ?? '0');
    const cont = query.get('continue');
    let start = 0;
    let listRv = String(rv);
    if (cont !== null && cont !== '') {
      let token: {k: string; rv: string};
      try {
        token = JSON.parse(Buffer.from(cont, 'base64url').toString('utf8')) as {k: string; rv: string};
      } catch {
        throw new HttpError(400, 'BadRequest', 'continue key is not valid: illegal base64 data');
      }
      if (Number(token.rv) < compactedRv) {
        throw new HttpError(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.');
      }
      start = all.findIndex((e) => e.k > token.k);
      if (start < 0) start = all.length;
      listRv = token.rv;
    }
    const page = limit > 0 ? all.slice(start, start + limit) : all.slice(start);
    const more = limit > 0 && start + limit < all.length;
    const metadata: Record<string, unknown> = {resourceVersion: listRv};
    if (more) {
      const last = page[page.length - 1];
      metadata['continue'] = Buffer.from(JSON.stringify({k: last?.k ?? '', rv: listRv}), 'utf8').toString('base64url');
      metadata['remainingItemCount'] = all.length - start - limit;
    }
    return {
      kind: `${rt.kind}List`,
      apiVersion: rt.group ? `${rt.group}/${rt.version}` : rt.version,
      metadata,
      items: page.map((e) => e.o),
    };
  }

  function startWatch(rt: ResourceType, ns: string | undefined, query: URLSearchParams, res: ServerResponse): void {
    const typeKey = typeKeyOf(rt.group, rt.plural);
    const selector = parseSelector(query.get('labelSelector') ?? '');
    const fromParam = query.get('resourceVersion');
    res.writeHead(200, {'content-type': 'application/json', 'transfer-encoding': 'chunked', 'cache-control': 'no-cache, private'});
    // Headers go out now, as kube-apiserver does: a client waits for them before it streams.
    res.flushHeaders();
    const w: OpenWatch = {typeKey, namespace: ns, selector, res, bookmarks: query.get('allowWatchBookmarks') === 'true', rt};
    const matches = (o: KubeObj) => (ns === undefined || o.metadata.namespace === ns) && selector(o.metadata.labels ?? {});
    if (fromParam === null || fromParam === '' || fromParam === '0') {
      // No resourceVersion: synthetic ADDED for the current state, then changes.
      for (const [k, o] of store) if (k.startsWith(`${typeKey}|`) && matches(o)) writeEvent(res, 'ADDED', o);
    } else {
      const from = Number(fromParam);
      if (!Number.isFinite(from) || from < compactedRv) {
        writeEvent(res, 'ERROR', failureStatus(410, 'Expired', `too old resource version: ${fromParam} (${compactedRv})`) as KubeObj);
        res.end();
        return;
      }
      for (const e of history) if (e.rv > from && e.typeKey === typeKey && matches(e.object)) writeEvent(res, e.type, e.object);
    }
    watches.add(w);
    res.on('close', () => watches.delete(w));
    const timeout = Number(query.get('timeoutSeconds') ?? '0');
    if (timeout > 0) {
      const t = setTimeout(() => res.end(), timeout * 1000);
      t.unref();
      res.on('close', () => clearTimeout(t));
    }
  }

  function sendBookmarks(): void {
    for (const w of watches) {
      if (!w.bookmarks) continue;
      writeEvent(w.res, 'BOOKMARK', {
        kind: w.rt.kind,
        apiVersion: w.rt.group ? `${w.rt.group}/${w.rt.version}` : w.rt.version,
        metadata: {name: '', resourceVersion: String(rv), annotations: {'k8s.io/initial-events-end': 'true'}},
      });
    }
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://fake-kube');
    const method = req.method ?? 'GET';
    const isWatch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    let answered = isWatch;
    const done = (): void => {
      if (!answered) answering--;
      answered = true;
    };
    if (!isWatch) {
      answering++;
      res.once('finish', done);
      res.once('close', done);
    }
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
    const user = bearer === undefined ? undefined : (tokens.get(bearer) ?? await options.authenticate?.(bearer).catch(() => undefined));
    const caller = user?.username;
    const call: KubeCall = {method, path: url.pathname, query: url.search, watch: isWatch, ...(caller === undefined ? {} : {user: caller})};
    calls.push(call);
    const injected = fault?.(call);
    if (injected === 'hang') {
      done();
      return;
    }
    if (injected !== undefined && 'until' in injected) await injected.until.catch(() => undefined);
    else if (injected !== undefined) {
      res.writeHead(injected.status, {'content-type': 'application/json'});
      res.end(injected.body);
      return;
    }
    const reply = (status: number, body: unknown) => sendJson(res, status, body, {'audit-id': randomUUID(), 'cache-control': 'no-cache, private'});
    try {
      if (user === undefined && url.pathname !== '/version' && url.pathname !== '/healthz' && url.pathname !== '/readyz') {
        throw new HttpError(401, 'Unauthorized', 'Unauthorized');
      }
      const body = method === 'GET' ? '' : await readBody(req, 8 << 20);
      const answer = routeRequest(method, url, body, req.headers, res);
      if (answer !== undefined) reply(answer.status, answer.body);
    } catch (err) {
      if (err instanceof HttpError) reply(err.status, failureStatus(err.status, err.reason, err.message, err.details));
      else reply(500, failureStatus(500, 'InternalError', `Internal error occurred: ${(err as Error).message}`));
    }
  };

  function routeRequest(method: string, url: URL, body: string, headers: IncomingMessage['headers'], res: ServerResponse): {status: number; body: unknown} | undefined {
    const path = url.pathname.replace(/\/$/, '');
    const q = url.searchParams;
    switch (path) {
      case '/version': return {status: 200, body: {major: '1', minor: '31', gitVersion: 'v1.31.2', gitCommit: 'fake', gitTreeState: 'clean', buildDate: '2024-10-22T20:28:14Z', goVersion: 'go1.22.8', compiler: 'gc', platform: 'linux/amd64'}};
      case '/healthz': case '/readyz': case '/livez': return {status: 200, body: 'ok'};
      case '/api': return {status: 200, body: {kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{clientCIDR: '0.0.0.0/0', serverAddress: hostPort}]}};
      case '/apis': return {status: 200, body: apiGroupList()};
      case '/openapi/v2': return {status: 404, body: failureStatus(404, 'NotFound', 'the server could not find the requested resource')};
      case '/openapi/v3': return {status: 200, body: openApiRoot()};
    }
    if (path.startsWith('/openapi/v3/')) return {status: 200, body: openApiGroupVersion(path.slice('/openapi/v3/'.length))};
    const m = /^\/(?:api\/(?<cv>v1)|apis\/(?<g>[^/]+)\/(?<v>[^/]+))(?:\/namespaces\/(?<ns>[^/]+))?(?:\/(?<plural>[^/]+)(?:\/(?<name>[^/]+)(?:\/(?<sub>[^/]+))?)?)?$/.exec(path);
    if (!m?.groups) throw new HttpError(404, 'NotFound', 'the server could not find the requested resource');
    const group = m.groups['g'] ?? '';
    const version = m.groups['cv'] ?? m.groups['v'] ?? '';
    let ns = m.groups['ns'];
    let plural = m.groups['plural'];
    let name = m.groups['name'];
    let sub = m.groups['sub'];
    // `/api/v1/namespaces/foo` is the namespace object itself, not a namespaced collection.
    if (ns !== undefined && plural === undefined) {
      plural = 'namespaces';
      name = ns;
      ns = undefined;
      sub = undefined;
    }
    if (plural === undefined) {
      if (method !== 'GET') throw new HttpError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
      return {status: 200, body: resourceList(group, version)};
    }
    const rt = types.get(typeKeyOf(group, plural));
    if (!rt || rt.version !== version) throw new HttpError(404, 'NotFound', 'the server could not find the requested resource');
    if (rt.namespaced !== (ns !== undefined) && !(rt.namespaced && name === undefined && method === 'GET')) {
      throw new HttpError(404, 'NotFound', 'the server could not find the requested resource');
    }
    if (rt.kind === 'TokenReview') {
      if (method !== 'POST') throw new HttpError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
      return {status: 201, body: tokenReview(parseJson(body) as KubeObj)};
    }
    if (ns !== undefined && rt.namespaced && method !== 'GET' && !store.has(objKey('/namespaces', undefined, ns))) {
      throw new HttpError(404, 'NotFound', `namespaces "${ns}" not found`, {name: ns, kind: 'namespaces'});
    }
    if (name === undefined) {
      if (method === 'GET') {
        if (q.get('watch') === 'true' || q.get('watch') === '1') {
          startWatch(rt, ns, q, res);
          return undefined;
        }
        const result = list(rt, ns, q);
        if (wantsTable(headers)) return {status: 200, body: table(rt, result['items'] as KubeObj[], String((result['metadata'] as Record<string, unknown>)['resourceVersion']))};
        return {status: 200, body: result};
      }
      if (method === 'POST') return {status: 201, body: create(rt, ns, parseBody(body, headers))};
      throw new HttpError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    }
    if (sub !== undefined && !(sub === 'status' && rt.statusSubresource)) throw new HttpError(404, 'NotFound', 'the server could not find the requested resource');
    switch (method) {
      case 'GET': {
        const obj = get(rt, ns, name);
        if (wantsTable(headers)) return {status: 200, body: table(rt, [obj], obj.metadata.resourceVersion ?? '')};
        return {status: 200, body: obj};
      }
      case 'PUT': return {status: 200, body: update(rt, ns, name, parseBody(body, headers), sub)};
      case 'PATCH': {
        const type = String(headers['content-type'] ?? '');
        if (!/merge-patch\+json|strategic-merge-patch\+json/.test(type)) {
          throw new HttpError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (fake serves merge patches only, got ${type})`);
        }
        const current = get(rt, ns, name);
        const patched = mergePatch(structuredClone(current), parseJson(body)) as KubeObj;
        const wanted = (parseJson(body) as {metadata?: {resourceVersion?: string}}).metadata?.resourceVersion;
        if (wanted === undefined) patched.metadata.resourceVersion = current.metadata.resourceVersion;
        return {status: 200, body: update(rt, ns, name, patched, sub)};
      }
      case 'DELETE': return del(rt, ns, name, body);
      default: throw new HttpError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    }
  }

  function tokenReview(review: KubeObj): KubeObj {
    const spec = (review['spec'] ?? {}) as {token?: string; audiences?: string[]};
    const user = spec.token === undefined ? undefined : reviewToken(spec.token, spec.audiences ?? []);
    return {
      ...review,
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      metadata: {name: '', creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z')},
      status: user === undefined
        ? {authenticated: false, user: {}, error: 'invalid bearer token'}
        : {authenticated: true, user: {username: user.username, uid: user.uid ?? randomUUID(), groups: [...(user.groups ?? [])]}, audiences: spec.audiences ?? []},
    } as KubeObj;
  }

  /** The OpenAPI v3 index: one document per group-version. */
  function openApiRoot(): Record<string, unknown> {
    const paths: Record<string, unknown> = {};
    for (const rt of types.values()) {
      const gv = rt.group === '' ? `api/${rt.version}` : `apis/${rt.group}/${rt.version}`;
      paths[gv] = {serverRelativeURL: `/openapi/v3/${gv}?hash=${rv}`};
    }
    return {paths};
  }

  /**
   * A group-version's OpenAPI v3 document, reduced to what kubectl reads: each kind's PATCH
   * operation and its `fieldValidation` parameter, which makes kubectl leave validation to the server.
   */
  function openApiGroupVersion(gv: string): Record<string, unknown> {
    const paths: Record<string, unknown> = {};
    for (const rt of types.values()) {
      const mine = rt.group === '' ? `api/${rt.version}` : `apis/${rt.group}/${rt.version}`;
      if (mine !== gv) continue;
      const ns = rt.namespaced ? '/namespaces/{namespace}' : '';
      paths[`/${gv}${ns}/${rt.plural}/{name}`] = {
        patch: {
          'x-kubernetes-group-version-kind': {group: rt.group, version: rt.version, kind: rt.kind},
          parameters: [{name: 'fieldValidation', in: 'query', schema: {type: 'string', uniqueItems: true}}],
          responses: {},
        },
      };
    }
    return {openapi: '3.0.0', info: {title: 'Kubernetes', version: 'v1.31.2'}, paths, components: {schemas: {}}};
  }

  function apiGroupList(): Record<string, unknown> {
    const groups = new Map<string, Set<string>>();
    for (const rt of types.values()) {
      if (rt.group === '') continue;
      const set = groups.get(rt.group) ?? new Set<string>();
      set.add(rt.version);
      groups.set(rt.group, set);
    }
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: [...groups].sort(([a], [b]) => a.localeCompare(b)).map(([name, versions]) => {
        const vs = [...versions].map((v) => ({groupVersion: `${name}/${v}`, version: v}));
        return {name, versions: vs, preferredVersion: vs[0]};
      }),
    };
  }

  function resourceList(group: string, version: string): Record<string, unknown> {
    const resources = [...types.values()].filter((rt) => rt.group === group && rt.version === version);
    if (resources.length === 0) throw new HttpError(404, 'NotFound', 'the server could not find the requested resource');
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: group === '' ? version : `${group}/${version}`,
      resources: resources.flatMap((rt) => [
        {name: rt.plural, singularName: rt.singular, namespaced: rt.namespaced, kind: rt.kind, verbs: rt.verbs, ...(rt.shortNames.length > 0 ? {shortNames: rt.shortNames} : {})},
        ...(rt.statusSubresource ? [{name: `${rt.plural}/status`, singularName: '', namespaced: rt.namespaced, kind: rt.kind, verbs: ['get', 'patch', 'update']}] : []),
      ]),
    };
  }

  function table(rt: ResourceType, items: KubeObj[], listRv: string): Record<string, unknown> {
    const columns = [
      {name: 'Name', type: 'string', format: 'name', description: 'Name must be unique within a namespace.', priority: 0},
      ...rt.columns.map((c) => ({name: c.name, type: c.type, format: '', description: c.description ?? '', priority: c.priority ?? 0})),
    ];
    const hasAge = rt.columns.some((c) => c.jsonPath === '.metadata.creationTimestamp');
    if (!hasAge) columns.push({name: 'Age', type: 'date', format: '', description: 'creation time', priority: 0});
    return {
      kind: 'Table',
      apiVersion: 'meta.k8s.io/v1',
      metadata: {resourceVersion: listRv},
      columnDefinitions: columns,
      rows: items.map((o) => ({
        cells: [
          o.metadata.name,
          ...rt.columns.map((c) => {
            const value = jsonPathValue(o, c.jsonPath) ?? null;
            // kube-apiserver renders date columns as an age ("5m"), not a timestamp.
            return c.type === 'date' && typeof value === 'string' ? age(value) : value;
          }),
          ...(hasAge ? [] : [age(o.metadata.creationTimestamp ?? '')]),
        ],
        object: {kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata},
      })),
    };
  }

  create(types.get('/namespaces') as ResourceType, undefined, {metadata: {name: 'default'}} as KubeObj);
  let hostPort = '';
  const listener = await listenHttps(tls, handle);
  hostPort = `127.0.0.1:${listener.port}`;
  const bookmarkMs = options.bookmarkIntervalMs ?? 1000;
  const timer = bookmarkMs > 0 ? setInterval(sendBookmarks, bookmarkMs) : undefined;
  timer?.unref();

  return {
    url: listener.url,
    caPem: tls.caPem,
    tokens,
    calls,
    createNamespace: (name) => { create(types.get('/namespaces') as ResourceType, undefined, {metadata: {name}} as KubeObj); },
    addCrd: (crd) => { create(types.get('apiextensions.k8s.io/customresourcedefinitions') as ResourceType, undefined, crd as KubeObj); },
    getObject: (group, plural, namespace, name) => store.get(objKey(typeKeyOf(group, plural), namespace, name)),
    listObjects: (group, plural, namespace) => [...store.entries()]
      .filter(([k, o]) => k.startsWith(`${typeKeyOf(group, plural)}|`) && (namespace === undefined || o.metadata.namespace === namespace))
      .map(([, o]) => o),
    compact() {
      compactedRv = rv + 1;
      history.length = 0;
      for (const w of watches) {
        writeEvent(w.res, 'ERROR', failureStatus(410, 'Expired', 'The resourceVersion for the provided watch is too old.') as KubeObj);
        w.res.end();
      }
      watches.clear();
    },
    bookmark: sendBookmarks,
    dropWatches() {
      for (const w of watches) w.res.end();
      watches.clear();
    },
    idle: () => answering === 0,
    setFault(next) { fault = next; },
    kubeconfig(namespace = 'default', token = 'test-token') {
      return [
        'apiVersion: v1', 'kind: Config',
        'clusters:', '- name: fake', '  cluster:', `    server: ${listener.url}`,
        `    certificate-authority-data: ${Buffer.from(tls.caPem).toString('base64')}`,
        'users:', '- name: fake', '  user:', `    token: ${token}`,
        'contexts:', '- name: fake', '  context:', '    cluster: fake', '    user: fake', `    namespace: ${namespace}`,
        'current-context: fake', '',
      ].join('\n');
    },
    async close() {
      if (timer) clearInterval(timer);
      for (const w of watches) w.res.destroy();
      watches.clear();
      await listener.close();
    },
  };
}

function notFound(rt: ResourceType, name: string): HttpError {
  return new HttpError(404, 'NotFound', `${rt.plural}${rt.group ? `.${rt.group}` : ''} "${name}" not found`, {name, group: rt.group, kind: rt.plural});
}

function conflict(rt: ResourceType, name: string): HttpError {
  return new HttpError(409, 'Conflict', `Operation cannot be fulfilled on ${rt.plural}${rt.group ? `.${rt.group}` : ''} "${name}": the object has been modified; please apply your changes to the latest version and try again`, {name, group: rt.group, kind: rt.plural});
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** kube-apiserver's object name and label validation (422 Invalid). */
function validateMeta(rt: ResourceType, name: string, meta: Partial<Meta>): void {
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    throw new HttpError(422, 'Invalid', `${rt.kind} "${name}" is invalid: metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`);
  }
  for (const [key, value] of Object.entries(meta.labels ?? {})) {
    if (!validLabelKey(key)) throw new HttpError(422, 'Invalid', `${rt.kind} "${name}" is invalid: metadata.labels: Invalid value: "${key}": name part must consist of alphanumeric characters, '-', '_' or '.'`);
    if (typeof value !== 'string' || value.length > 63 || (value !== '' && !LABEL_NAME.test(value))) {
      throw new HttpError(422, 'Invalid', `${rt.kind} "${name}" is invalid: metadata.labels: Invalid value: "${String(value)}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'`);
    }
  }
}

/** A label key: optional DNS-subdomain prefix and `/`, then a name of at most 63 characters. */
export function validLabelKey(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && LABEL_NAME.test(name);
}

type LabelSelector = (labels: Record<string, string>) => boolean;

/** Parses the label selector grammar: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`. */
function parseSelector(text: string): LabelSelector {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (cur.trim() !== '') parts.push(cur);
  const tests: LabelSelector[] = parts.map((raw) => {
    const p = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(p))) {
      const [, key = '', op, list = ''] = m;
      const values = list.split(',').map((v) => v.trim());
      return op === 'in' ? (l) => l[key] !== undefined && values.includes(l[key]) : (l) => l[key] === undefined || !values.includes(l[key]);
    }
    if ((m = /^([^\s!=]+)\s*(==|=|!=)\s*(\S*)$/.exec(p))) {
      const [, key = '', op, value = ''] = m;
      return op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value;
    }
    if ((m = /^!([^\s!=]+)$/.exec(p))) {
      const key = m[1] ?? '';
      return (l) => l[key] === undefined;
    }
    if (/^[^\s!=(),]+$/.test(p)) return (l) => l[p] !== undefined;
    throw new HttpError(400, 'BadRequest', `unable to parse requirement: found '${p}', expected: in, notin, =, ==, !=, gt, lt`);
  });
  return (labels) => tests.every((t) => t(labels));
}

function parseFieldSelector(text: string): string | undefined {
  if (text === '') return undefined;
  const m = /^metadata\.name\s*==?\s*(.+)$/.exec(text.trim());
  if (!m) throw new HttpError(400, 'BadRequest', `"${text}" is not a known field selector: only "metadata.name" is supported by the fake`);
  return m[1];
}

function wantsTable(headers: IncomingMessage['headers']): boolean {
  return /as=Table/.test(String(headers.accept ?? ''));
}

/** `5s`, `3m`, `2h`, `4d`: the short age kubectl prints. */
function age(timestamp: string): string {
  const t = Date.parse(timestamp);
  if (!Number.isFinite(t)) return '<unknown>';
  const s = Math.max(0, Math.floor((Date.now() - t) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

function jsonPathValue(obj: unknown, path: string): unknown {
  let cur: unknown = obj;
  for (const part of path.replace(/^\./, '').split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function writeEvent(res: ServerResponse, type: string, object: unknown): void {
  if (!res.writableEnded) res.write(`${JSON.stringify({type, object})}\n`);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new HttpError(400, 'BadRequest', `the body of the request was in an unknown format: ${(err as Error).message}`);
  }
}

function parseBody(text: string, headers: IncomingMessage['headers']): KubeObj {
  const type = String(headers['content-type'] ?? 'application/json');
  if (!type.includes('json')) throw new HttpError(415, 'UnsupportedMediaType', `the fake reads JSON bodies only, got ${type}`);
  const obj = parseJson(text);
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new HttpError(400, 'BadRequest', 'expected a JSON object');
  return obj as KubeObj;
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target !== null && typeof target === 'object' && !Array.isArray(target) ? {...(target as Record<string, unknown>)} : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
