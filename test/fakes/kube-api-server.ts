/**
 * A local HTTPS Kubernetes API server for the probe and `configure --apply`: bearer-token
 * authentication through a callback (EKS and AKS tests plug in their own token checks),
 * `/version`, health endpoints, minimal discovery, SelfSubjectAccessReview, and in-memory
 * ClusterRoles / ClusterRoleBindings. It answers with kube-apiserver's real `Status` bodies
 * and can hang or turn unready at runtime for timeout and health tests.
 */
import {randomUUID} from 'node:crypto';
import type {IncomingMessage, ServerResponse} from 'node:http';
import {delay, listenHttps, readBody, sendJson} from './http-server.ts';
import type {RbacResource} from './kube-rbac-store.ts';
import {KubeRbacStore, RBAC_GROUP} from './kube-rbac-store.ts';
import {failureStatus} from './kube-status.ts';
import type {ServerTls} from './tls-ca.ts';
import {sharedServerTls} from './tls-ca.ts';

export {KubeRbacStore} from './kube-rbac-store.ts';
export type {KubeObject, RbacResource} from './kube-rbac-store.ts';

/** An authenticated Kubernetes user. */
export interface KubeUser {
  readonly user: string;
  readonly groups: readonly string[];
}

/** Maps a bearer token to a user; undefined means 401. */
export type KubeAuthenticator = (bearerToken: string) => KubeUser | undefined | Promise<KubeUser | undefined>;

/** What is being accessed: resource attributes (as in a SubjectAccessReview), or `path` for non-resource URLs. */
export interface AccessAttributes {
  readonly verb: string;
  readonly group?: string;
  readonly version?: string;
  readonly resource?: string;
  readonly subresource?: string;
  readonly name?: string;
  readonly namespace?: string;
  readonly path?: string;
}

/** Decides access; a reason is reported in SelfSubjectAccessReview status and Forbidden messages. */
export type KubeAuthorizer = (user: KubeUser, attrs: AccessAttributes) => boolean | {readonly allowed: boolean; readonly reason?: string};

/** `ok` answers; `hang` accepts requests and never answers; `unready` fails /readyz and /healthz. */
export type KubeApiMode = 'ok' | 'hang' | 'unready';

/** Options of {@link startFakeKubeApi}. */
export interface FakeKubeApiOptions {
  readonly authenticate: KubeAuthenticator;
  /** Default: allow everything. */
  readonly authorize?: KubeAuthorizer;
  /** Server certificate; default the per-process shared loopback certificate. */
  readonly tls?: ServerTls;
  readonly mode?: KubeApiMode;
  readonly latencyMs?: number;
  /** Reported by /version; default `v1.31.2` (EKS style `v1.31.2-eks-7f9249a` gives minor `31+`). */
  readonly gitVersion?: string;
  /** Treat requests without a token as system:anonymous (public /version and health only), like EKS. Default false: 401. */
  readonly anonymous?: boolean;
  /** RBAC objects to serve; pass one to build an authorizer over it (see kube-rbac-authorizer.ts). Default a new empty store. */
  readonly rbac?: KubeRbacStore;
}

/** One request the fake received. `authorization` is the raw header (a secret: assert on it, never print it). */
export interface KubeRequestRecord {
  readonly method: string;
  readonly path: string;
  readonly authorization?: string;
  readonly user?: string;
  /** 0 while unanswered (hang mode). */
  readonly status: number;
}

type MutableRecord = {-readonly [K in keyof KubeRequestRecord]: KubeRequestRecord[K]};

/** A running fake Kubernetes API server. */
export interface FakeKubeApi {
  /** `https://127.0.0.1:<port>`. */
  readonly url: string;
  /** CA that signed the server certificate. */
  readonly caPem: string;
  readonly requests: readonly KubeRequestRecord[];
  readonly rbac: KubeRbacStore;
  readonly mode: KubeApiMode;
  /** Flips health at runtime. */
  setMode(mode: KubeApiMode): void;
  setLatency(ms: number): void;
  close(): Promise<void>;
}

const publicPaths = new Set(['/version', '/healthz', '/readyz', '/livez']);
const AUTHZ_GROUP = 'authorization.k8s.io';

/** Starts a fake Kubernetes API server on 127.0.0.1. */
export async function startFakeKubeApi(options: FakeKubeApiOptions): Promise<FakeKubeApi> {
  const tls = options.tls ?? await sharedServerTls();
  const authorize = options.authorize ?? (() => true);
  const rbac = options.rbac ?? new KubeRbacStore();
  const requests: KubeRequestRecord[] = [];
  let mode: KubeApiMode = options.mode ?? 'ok';
  let latencyMs = options.latencyMs ?? 0;
  let hostPort = '';

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://fake-kube');
    const header = req.headers.authorization;
    const record: MutableRecord = {method: req.method ?? 'GET', path: url.pathname, ...(header === undefined ? {} : {authorization: header}), status: 0};
    requests.push(record);
    if (mode === 'hang') return;
    await delay(latencyMs);
    const reply = (status: number, body: unknown): void => {
      record.status = status;
      if (typeof body === 'string') {
        res.writeHead(status, {'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-cache, private', 'x-content-type-options': 'nosniff'});
        res.end(body);
      } else {
        sendJson(res, status, body, {'audit-id': randomUUID(), 'cache-control': 'no-cache, private'});
      }
    };

    const user = await authenticateRequest(header, options);
    if (user === undefined) {
      reply(401, failureStatus(401, 'Unauthorized', 'Unauthorized'));
      return;
    }
    record.user = user.user;
    if (user.user === 'system:anonymous' && !publicPaths.has(url.pathname)) {
      reply(403, failureStatus(403, 'Forbidden', `forbidden: User "system:anonymous" cannot ${verbOf(req.method)} path "${url.pathname}"`, {}));
      return;
    }
    const body = req.method === 'POST' || req.method === 'PUT' ? await readBody(req) : '';
    const answer = route({method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, body, user, mode, authorize, rbac, hostPort, gitVersion: options.gitVersion ?? 'v1.31.2'});
    reply(answer.status, answer.body);
  };

  const listener = await listenHttps(tls, handle);
  hostPort = `127.0.0.1:${listener.port}`;
  return {
    url: listener.url,
    caPem: tls.caPem,
    requests,
    rbac,
    get mode() { return mode; },
    setMode(next) { mode = next; },
    setLatency(ms) { latencyMs = ms; },
    close: () => listener.close(),
  };
}

async function authenticateRequest(header: string | undefined, options: FakeKubeApiOptions): Promise<KubeUser | undefined> {
  if (header === undefined || header === '') {
    return options.anonymous === true ? {user: 'system:anonymous', groups: ['system:unauthenticated']} : undefined;
  }
  // A presented but invalid token is 401 even with anonymous access on, as in kube-apiserver.
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (m?.[1] === undefined) return undefined;
  return options.authenticate(m[1]);
}

interface RouteInput {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly body: string;
  readonly user: KubeUser;
  readonly mode: KubeApiMode;
  readonly authorize: KubeAuthorizer;
  readonly rbac: KubeRbacStore;
  readonly hostPort: string;
  readonly gitVersion: string;
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
}

const rbacPath = new RegExp(`^/apis/${RBAC_GROUP.replaceAll('.', '\\.')}/v1/(?<resource>clusterroles|clusterrolebindings)(?:/(?<name>[^/]+))?/?$`);

function route(input: RouteInput): Answer {
  const {method, path} = input;
  if (method === 'GET') {
    const fixed = fixedGet(input);
    if (fixed !== undefined) return fixed;
  }
  if (path === `/apis/${AUTHZ_GROUP}/v1/selfsubjectaccessreviews`) {
    return method === 'POST' ? selfSubjectAccessReview(input) : methodNotAllowed();
  }
  const m = rbacPath.exec(path);
  if (m?.groups !== undefined) {
    const resource = m.groups['resource'] as RbacResource;
    const name = m.groups['name'] === undefined ? undefined : decodeURIComponent(m.groups['name']);
    return rbacRequest(input, resource, name);
  }
  return {status: 404, body: failureStatus(404, 'NotFound', 'the server could not find the requested resource', {})};
}

function fixedGet(input: RouteInput): Answer | undefined {
  switch (input.path) {
    case '/version': return {status: 200, body: versionInfo(input.gitVersion)};
    case '/livez': return {status: 200, body: 'ok'};
    case '/readyz':
    case '/healthz':
      return input.mode === 'unready'
        ? {status: 500, body: `[+]ping ok\n[-]etcd failed: reason withheld\n${input.path.slice(1)} check failed\n`}
        : {status: 200, body: 'ok'};
    case '/api': return {status: 200, body: {kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{clientCIDR: '0.0.0.0/0', serverAddress: input.hostPort}]}};
    case '/api/v1': return {status: 200, body: {kind: 'APIResourceList', groupVersion: 'v1', resources: []}};
    case '/apis': return {status: 200, body: {kind: 'APIGroupList', apiVersion: 'v1', groups: [AUTHZ_GROUP, RBAC_GROUP].map(groupInfo)}};
    case `/apis/${AUTHZ_GROUP}/v1`: return {status: 200, body: resourceList(AUTHZ_GROUP, [
      {name: 'selfsubjectaccessreviews', singularName: 'selfsubjectaccessreview', namespaced: false, kind: 'SelfSubjectAccessReview', verbs: ['create']},
    ])};
    case `/apis/${RBAC_GROUP}/v1`: return {status: 200, body: resourceList(RBAC_GROUP, [
      {name: 'clusterrolebindings', singularName: 'clusterrolebinding', namespaced: false, kind: 'ClusterRoleBinding', verbs: ['create', 'delete', 'get', 'list', 'update']},
      {name: 'clusterroles', singularName: 'clusterrole', namespaced: false, kind: 'ClusterRole', verbs: ['create', 'delete', 'get', 'list', 'update']},
    ])};
    default: return undefined;
  }
}

function versionInfo(gitVersion: string): Record<string, string> {
  const m = /^v(\d+)\.(\d+)\.\d+(-.*)?$/.exec(gitVersion);
  if (m === null) throw new Error(`fake kube API: expected gitVersion like v1.31.2, got ${gitVersion}`);
  return {
    major: m[1] ?? '1',
    minor: `${m[2] ?? '0'}${m[3] === undefined ? '' : '+'}`,
    gitVersion,
    gitCommit: '5864a4677267e6adeae276ad85882a8714d69d9d',
    gitTreeState: 'clean',
    buildDate: '2024-10-22T20:28:14Z',
    goVersion: 'go1.22.8',
    compiler: 'gc',
    platform: 'linux/amd64',
  };
}

function groupInfo(name: string): Record<string, unknown> {
  const v = {groupVersion: `${name}/v1`, version: 'v1'};
  return {name, versions: [v], preferredVersion: v};
}

function resourceList(group: string, resources: readonly Record<string, unknown>[]): Record<string, unknown> {
  return {kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${group}/v1`, resources};
}

function selfSubjectAccessReview(input: RouteInput): Answer {
  const parsed = parseJson(input.body);
  if (parsed === undefined) return badBody();
  const spec = (parsed as {spec?: Record<string, unknown>}).spec ?? {};
  const resourceAttributes = spec['resourceAttributes'] as Record<string, unknown> | undefined;
  const nonResourceAttributes = spec['nonResourceAttributes'] as Record<string, unknown> | undefined;
  if ((resourceAttributes === undefined) === (nonResourceAttributes === undefined)) {
    const message = 'exactly one of nonResourceAttributes or resourceAttributes must be specified';
    return {status: 422, body: failureStatus(422, 'Invalid', `SelfSubjectAccessReview.${AUTHZ_GROUP} "" is invalid: spec.resourceAttributes: Invalid value: "null": ${message}`,
      {group: AUTHZ_GROUP, kind: 'SelfSubjectAccessReview', causes: [{reason: 'FieldValueInvalid', message, field: 'spec.resourceAttributes'}]})};
  }
  const attrs: AccessAttributes = resourceAttributes !== undefined
    ? pickStrings(resourceAttributes, ['verb', 'group', 'version', 'resource', 'subresource', 'name', 'namespace'])
    : pickStrings(nonResourceAttributes ?? {}, ['verb', 'path']);
  const decision = decide(input.authorize, input.user, attrs);
  return {status: 201, body: {
    kind: 'SelfSubjectAccessReview',
    apiVersion: `${AUTHZ_GROUP}/v1`,
    metadata: {creationTimestamp: null},
    spec,
    status: {allowed: decision.allowed, ...(decision.reason === undefined ? {} : {reason: decision.reason})},
  }};
}

function rbacRequest(input: RouteInput, resource: RbacResource, name: string | undefined): Answer {
  const {method, rbac} = input;
  const verb = name === undefined
    ? ({GET: 'list', POST: 'create'} as Record<string, string>)[method]
    : ({GET: 'get', PUT: 'update', DELETE: 'delete'} as Record<string, string>)[method];
  if (verb === undefined) return methodNotAllowed();
  const decision = decide(input.authorize, input.user, {verb, group: RBAC_GROUP, version: 'v1', resource, ...(name === undefined ? {} : {name})});
  if (!decision.allowed) {
    const subject = `${resource}.${RBAC_GROUP}${name === undefined ? '' : ` "${name}"`}`;
    const why = decision.reason === undefined ? '' : `: ${decision.reason}`;
    return {status: 403, body: failureStatus(403, 'Forbidden',
      `${subject} is forbidden: User "${input.user.user}" cannot ${verb} resource "${resource}" in API group "${RBAC_GROUP}" at the cluster scope${why}`,
      {...(name === undefined ? {} : {name}), group: RBAC_GROUP, kind: resource})};
  }
  const dryRun = input.query.get('dryRun') === 'All';
  if (verb === 'list') return rbac.handleList(resource);
  if (verb === 'get') return rbac.handleGet(resource, name ?? '');
  if (verb === 'delete') return rbac.handleDelete(resource, name ?? '', dryRun);
  const parsed = parseJson(input.body);
  if (parsed === undefined) return badBody();
  return verb === 'create' ? rbac.handleCreate(resource, parsed, dryRun) : rbac.handleUpdate(resource, name ?? '', parsed, dryRun);
}

function decide(authorize: KubeAuthorizer, user: KubeUser, attrs: AccessAttributes): {allowed: boolean; reason?: string} {
  const d = authorize(user, attrs);
  return typeof d === 'boolean' ? {allowed: d} : d;
}

function pickStrings(source: Record<string, unknown>, keys: readonly (keyof AccessAttributes)[]): AccessAttributes {
  const out: Record<string, string> = {verb: ''};
  for (const k of keys) {
    const v = source[k];
    if (typeof v === 'string') out[k] = v;
  }
  return out as unknown as AccessAttributes;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function badBody(): Answer {
  return {status: 400, body: failureStatus(400, 'BadRequest', 'the body of the request was in an unknown format - accepted media types include: application/json')};
}

function methodNotAllowed(): Answer {
  return {status: 405, body: failureStatus(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {})};
}

function verbOf(method: string | undefined): string {
  return ({POST: 'post', PUT: 'put', DELETE: 'delete', PATCH: 'patch'} as Record<string, string>)[method ?? 'GET'] ?? 'get';
}
