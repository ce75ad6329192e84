/**
 * A local HTTPS Azure Resource Manager that answers what `@azure/arm-containerservice` and
 * `@azure/arm-resources-subscriptions` send: subscriptions and AKS managed cluster lists
 * (always paged through absolute `nextLink`s), `listClusterUserCredential`, bearer-token
 * checks, api-version checks, role assignments (list with `$filter=principalId eq '…'`, get,
 * create, delete at any scope), and injectable latency and faults. HTTPS because the SDK's
 * bearer-token policy refuses to send tokens over plain HTTP; clients trust `caPem`.
 */
import {randomUUID} from 'node:crypto';
import type {IncomingMessage, ServerResponse} from 'node:http';
import type {CredentialFormat} from './arm-json.ts';
import {descendantsPage} from './arm-management-groups.ts';
import {managedClusterJson, roleAssignmentJson, subscriptionJson, userKubeconfig} from './arm-json.ts';
import type {ArmOperation} from './arm-stats.ts';
import {ArmStats} from './arm-stats.ts';
import type {ArmWorld, FakeManagedCluster} from './arm-world.ts';
import {delay, listenHttps, sendJson} from './http-server.ts';
import type {ServerTls} from './tls-ca.ts';
import {sharedServerTls} from './tls-ca.ts';

export type {ArmOperation, ArmRequestRecord, ArmCountFilter, ArmCounter} from './arm-stats.ts';
export {ArmStats} from './arm-stats.ts';

/** The bearer token the fake accepts when no `acceptToken` is given. */
export const FAKE_ARM_TOKEN = 'fake-arm-access-token';

/** api-versions the installed SDKs send (arm-resources-subscriptions 2.1.1, arm-containerservice 25.3.0). */
export const ARM_API_VERSIONS = {
  subscriptions: ['2022-12-01'],
  containerService: ['2026-04-01'],
  authorization: ['2022-04-01'],
  managementGroups: ['2021-04-01'],
} as const;

/** What the fault and latency hooks learn about a request. */
export interface ArmRequestContext {
  readonly operation: ArmOperation;
  readonly subscription?: string;
  readonly resourceGroup?: string;
  readonly clusterName?: string;
  /** Management group of a descendants request. */
  readonly managementGroup?: string;
  readonly apiVersion: string;
  /** 1 for the first request of this operation/scope/page, 2 for its first retry... */
  readonly attempt: number;
}

/** How the fault hook bends one answer. */
export type ArmFault =
  /** An ARM error answer; code and message default per status (403 AuthorizationFailed, 429 TooManyRequests...); 429 defaults to Retry-After: 1. */
  | {readonly status: number; readonly code?: string; readonly message?: string; readonly retryAfterSeconds?: number}
  /** 200 with a truncated JSON body. */
  | {readonly malformed: true}
  /** Accept the request and never answer (until the fake closes). */
  | {readonly hang: true}
  /** Destroy the connection without an answer. */
  | {readonly reset: true};

/** Decides a fault per request; undefined answers normally. */
export type ArmFaultHook = (ctx: ArmRequestContext) => ArmFault | undefined;

/** Added delay per request, fixed or per context. */
export type ArmLatency = number | ((ctx: ArmRequestContext) => number);

/** Options of {@link startFakeArm}. */
export interface FakeArmOptions {
  readonly world: ArmWorld;
  readonly latencyMs?: ArmLatency;
  readonly fault?: ArmFaultHook;
  /** Items per page of every list; default 2 so every test pages. */
  readonly pageSize?: number;
  /** Accepted bearer tokens, or a predicate; default only {@link FAKE_ARM_TOKEN}. */
  readonly acceptToken?: ((token: string) => boolean) | Iterable<string>;
  /** Accepted api-versions per API; default {@link ARM_API_VERSIONS}. */
  readonly apiVersions?: {readonly subscriptions?: readonly string[]; readonly containerService?: readonly string[]; readonly authorization?: readonly string[]; readonly managementGroups?: readonly string[]};
  /** Server certificate; default the per-process shared loopback certificate. */
  readonly tls?: ServerTls;
}

/** A running fake ARM endpoint. */
export interface FakeArm {
  /** `https://127.0.0.1:<port>`: the SDK client's `endpoint`. */
  readonly url: string;
  /** CA to trust (SDK: `tlsOptions: {ca}`). */
  readonly caPem: string;
  readonly world: ArmWorld;
  readonly stats: ArmStats;
  /** Replaces the fault hook (undefined: no faults). */
  setFault(fault: ArmFaultHook | undefined): void;
  /** Replaces the latency. */
  setLatency(latency: ArmLatency): void;
  close(): Promise<void>;
}

interface Route {
  readonly operation: ArmOperation;
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly pattern: RegExp;
}

const MC = 'providers/Microsoft\\.ContainerService/managedClusters';
// A role assignment's scope: a subscription, a resource group or a managed cluster.
const RA_SCOPE = `(?<scope>/subscriptions/(?<sub>[^/]+)(?:/resourceGroups/(?<rg>[^/]+)(?:/${MC}/(?<name>[^/]+))?)?)/providers/Microsoft\\.Authorization/roleAssignments`;
const routes: readonly Route[] = [
  {operation: 'subscriptions.list', method: 'GET', pattern: /^\/subscriptions\/?$/i},
  {operation: 'subscriptions.get', method: 'GET', pattern: /^\/subscriptions\/(?<sub>[^/]+)\/?$/i},
  {operation: 'managedClusters.list', method: 'GET', pattern: new RegExp(`^/subscriptions/(?<sub>[^/]+)/${MC}/?$`, 'i')},
  {operation: 'managedClusters.listByResourceGroup', method: 'GET', pattern: new RegExp(`^/subscriptions/(?<sub>[^/]+)/resourceGroups/(?<rg>[^/]+)/${MC}/?$`, 'i')},
  {operation: 'managedClusters.get', method: 'GET', pattern: new RegExp(`^/subscriptions/(?<sub>[^/]+)/resourceGroups/(?<rg>[^/]+)/${MC}/(?<name>[^/]+)/?$`, 'i')},
  {operation: 'managedClusters.listClusterUserCredentials', method: 'POST', pattern: new RegExp(`^/subscriptions/(?<sub>[^/]+)/resourceGroups/(?<rg>[^/]+)/${MC}/(?<name>[^/]+)/listClusterUserCredential/?$`, 'i')},
  {operation: 'roleAssignments.list', method: 'GET', pattern: new RegExp(`^${RA_SCOPE}/?$`, 'i')},
  {operation: 'roleAssignments.get', method: 'GET', pattern: new RegExp(`^${RA_SCOPE}/(?<ra>[^/]+)/?$`, 'i')},
  {operation: 'roleAssignments.create', method: 'PUT', pattern: new RegExp(`^${RA_SCOPE}/(?<ra>[^/]+)/?$`, 'i')},
  {operation: 'roleAssignments.delete', method: 'DELETE', pattern: new RegExp(`^${RA_SCOPE}/(?<ra>[^/]+)/?$`, 'i')},
  {operation: 'managementGroups.descendants', method: 'GET', pattern: /^\/providers\/Microsoft\.Management\/managementGroups\/(?<mg>[^/]+)\/descendants\/?$/i},
];

const defaultCodes: Readonly<Record<number, string>> = {
  400: 'BadRequest', 401: 'InvalidAuthenticationToken', 403: 'AuthorizationFailed', 404: 'ResourceNotFound',
  409: 'Conflict', 429: 'TooManyRequests', 500: 'InternalServerError', 502: 'BadGateway',
  503: 'ServiceUnavailable', 504: 'GatewayTimeout',
};

const actions: Readonly<Record<ArmOperation, string>> = {
  'subscriptions.list': 'Microsoft.Resources/subscriptions/read',
  'subscriptions.get': 'Microsoft.Resources/subscriptions/read',
  'managedClusters.list': 'Microsoft.ContainerService/managedClusters/read',
  'managedClusters.listByResourceGroup': 'Microsoft.ContainerService/managedClusters/read',
  'managedClusters.get': 'Microsoft.ContainerService/managedClusters/read',
  'managedClusters.listClusterUserCredentials': 'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action',
  'roleAssignments.list': 'Microsoft.Authorization/roleAssignments/read',
  'roleAssignments.get': 'Microsoft.Authorization/roleAssignments/read',
  'roleAssignments.create': 'Microsoft.Authorization/roleAssignments/write',
  'roleAssignments.delete': 'Microsoft.Authorization/roleAssignments/delete',
  'managementGroups.descendants': 'Microsoft.Management/managementGroups/descendants/read',
};

/** An answer the handler computed; `error` answers use ARM's `{error: {code, message}}` body. */
type Answer =
  | {readonly kind: 'json'; readonly status: number; readonly body: unknown}
  /** A JSON body already serialised (a list page assembled from its items' cached text). */
  | {readonly kind: 'text'; readonly status: number; readonly text: string}
  | {readonly kind: 'error'; readonly status: number; readonly code: string; readonly message: string; readonly headers?: Record<string, string>};

/** Starts a fake ARM endpoint over `world` on 127.0.0.1. */
export async function startFakeArm(options: FakeArmOptions): Promise<FakeArm> {
  const pageSize = options.pageSize ?? 2;
  if (!Number.isInteger(pageSize) || pageSize < 1) {
    throw new Error(`startFakeArm: expected pageSize to be an integer >= 1, got ${String(pageSize)}`);
  }
  const {world} = options;
  const stats = new ArmStats();
  const accept = tokenPredicate(options.acceptToken);
  const versions = {
    subscriptions: options.apiVersions?.subscriptions ?? ARM_API_VERSIONS.subscriptions,
    containerService: options.apiVersions?.containerService ?? ARM_API_VERSIONS.containerService,
    authorization: options.apiVersions?.authorization ?? ARM_API_VERSIONS.authorization,
    managementGroups: options.apiVersions?.managementGroups ?? ARM_API_VERSIONS.managementGroups,
  };
  let fault = options.fault;
  let latency: ArmLatency = options.latencyMs ?? 0;
  const tls = options.tls ?? await sharedServerTls();
  let baseUrl = '';

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // Read the whole body (role assignment PUTs carry one) before answering.
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const requestBody = Buffer.concat(chunks).toString('utf8');
    const requestId = randomUUID();
    const url = new URL(req.url ?? '/', baseUrl);
    const method = req.method ?? 'GET';
    const apiVersion = url.searchParams.get('api-version') ?? undefined;
    const match = matchRoute(url.pathname, req.method ?? 'GET');
    const base = {method, path: url.pathname, requestId, ...(apiVersion === undefined ? {} : {apiVersion})};
    const finish = (answer: Answer, extra: {fault?: 'status' | 'malformed'} = {}): void => {
      const headers = {'x-ms-request-id': requestId, 'x-ms-correlation-request-id': requestId};
      if (answer.kind === 'json' && answer.status === 204) {
        res.writeHead(204, headers);
        res.end();
      } else if (answer.kind === 'json') {
        sendJson(res, answer.status, answer.body, headers);
      } else if (answer.kind === 'text') {
        sendJsonText(res, answer.status, answer.text, headers);
      } else {
        sendJson(res, answer.status, {error: {code: answer.code, message: answer.message}}, {...headers, ...answer.headers});
      }
      stats.record({
        ...base, ...scopeOf(match), operation: match?.route.operation ?? 'unknown', status: answer.status,
        ...(answer.kind === 'error' ? {errorCode: answer.code} : {}), ...extra,
      });
    };

    if (match === undefined) {
      finish({kind: 'error', status: 404, code: 'NotFound', message: `The fake ARM server has no route for ${method} ${url.pathname}.`});
      return;
    }
    if (match.route.method !== method) {
      finish({kind: 'error', status: 405, code: 'MethodNotAllowed', message: `The requested resource does not support http method '${method}'.`});
      return;
    }
    const authError = checkToken(req.headers.authorization, accept);
    if (authError !== undefined) {
      finish(authError);
      return;
    }
    const op = match.route.operation;
    const known = op.startsWith('subscriptions.') ? versions.subscriptions : op.startsWith('roleAssignments.') ? versions.authorization
      : op.startsWith('managementGroups.') ? versions.managementGroups : versions.containerService;
    if (apiVersion === undefined) {
      finish({kind: 'error', status: 400, code: 'MissingApiVersionParameter', message: 'The api-version query parameter (?api-version=) is required for all requests.'});
      return;
    }
    if (!known.includes(apiVersion)) {
      finish({kind: 'error', status: 400, code: 'InvalidApiVersionParameter', message: `The api-version '${apiVersion}' is invalid. The supported versions are '${known.join(',')}'.`});
      return;
    }

    const scope = scopeOf(match);
    const skipToken = url.searchParams.get('$skipToken') ?? url.searchParams.get('$skiptoken') ?? '';
    const attemptKey = [match.route.operation, scope.subscription, scope.resourceGroup, scope.clusterName, match.groups['ra'], scope.managementGroup, skipToken].join('\u0000').toLowerCase();
    const ctx: ArmRequestContext = {operation: match.route.operation, ...scope, apiVersion, attempt: stats.nextAttempt(attemptKey)};
    const injected = fault?.(ctx);
    await delay(typeof latency === 'function' ? latency(ctx) : latency);

    if (injected !== undefined) {
      if ('hang' in injected) {
        stats.record({...base, ...scope, operation: ctx.operation, status: 0, fault: 'hang'});
        return;
      }
      if ('reset' in injected) {
        stats.record({...base, ...scope, operation: ctx.operation, status: 0, fault: 'reset'});
        req.socket.destroy();
        return;
      }
      if ('malformed' in injected) {
        res.writeHead(200, {'content-type': 'application/json; charset=utf-8', 'x-ms-request-id': requestId});
        res.end('{"value": [{"id": "/subscriptions/');
        stats.record({...base, ...scope, operation: ctx.operation, status: 200, fault: 'malformed'});
        return;
      }
      finish(faultAnswer(injected, ctx), {fault: 'status'});
      return;
    }
    finish(ctx.operation.startsWith('roleAssignments.') ? roleAssignmentAnswer(ctx, match.groups, url, requestBody, world, pageSize, baseUrl) : answerFor(ctx, url, world, pageSize, baseUrl));
  };

  const listener = await listenHttps(tls, handle);
  baseUrl = listener.url;
  return {
    url: listener.url,
    caPem: tls.caPem,
    world,
    stats,
    setFault(next) { fault = next; },
    setLatency(next) { latency = next; },
    close: () => listener.close(),
  };
}

interface RouteMatch {
  readonly route: Route;
  readonly groups: Readonly<Record<string, string>>;
}

function matchRoute(pathname: string, method: string): RouteMatch | undefined {
  // The route of this method when the path has several (role assignments), else any (answered 405).
  const candidates = routes.filter((r) => r.pattern.test(pathname));
  for (const route of [...candidates.filter((r) => r.method === method), ...candidates]) {
    const m = route.pattern.exec(pathname);
    if (m === null) continue;
    const groups: Record<string, string> = {};
    for (const [k, v] of Object.entries(m.groups ?? {})) groups[k] = decodeURIComponent(v);
    return {route, groups};
  }
  return undefined;
}

function scopeOf(match: RouteMatch | undefined): {subscription?: string; resourceGroup?: string; clusterName?: string; managementGroup?: string} {
  const g = match?.groups ?? {};
  return {
    ...(g['mg'] === undefined ? {} : {managementGroup: g['mg']}),
    ...(g['sub'] === undefined ? {} : {subscription: g['sub']}),
    ...(g['rg'] === undefined ? {} : {resourceGroup: g['rg']}),
    ...(g['name'] === undefined ? {} : {clusterName: g['name']}),
  };
}

function tokenPredicate(accept: FakeArmOptions['acceptToken']): (token: string) => boolean {
  if (typeof accept === 'function') return accept;
  const tokens = new Set(accept ?? [FAKE_ARM_TOKEN]);
  return (token) => tokens.has(token);
}

function checkToken(header: string | undefined, accept: (token: string) => boolean): Answer | undefined {
  const challenge = 'Bearer authorization_uri="https://login.microsoftonline.com/common", error="invalid_token"';
  if (header === undefined || header === '') {
    return {kind: 'error', status: 401, code: 'AuthenticationFailed',
      message: "Authentication failed. The 'Authorization' header is missing.",
      headers: {'www-authenticate': `${challenge}, error_description="The authentication failed because of missing 'Authorization' header."`}};
  }
  const m = /^Bearer\s+(\S+)$/i.exec(header);
  if (m?.[1] === undefined || !accept(m[1])) {
    return {kind: 'error', status: 401, code: 'InvalidAuthenticationToken', message: 'The access token is invalid.',
      headers: {'www-authenticate': `${challenge}, error_description="The access token is invalid."`}};
  }
  return undefined;
}

function faultAnswer(f: {status: number; code?: string; message?: string; retryAfterSeconds?: number}, ctx: ArmRequestContext): Answer {
  const code = f.code ?? defaultCodes[f.status] ?? 'InternalServerError';
  const scope = ctx.subscription === undefined ? '/'
    : `/subscriptions/${ctx.subscription}${ctx.resourceGroup === undefined ? '' : `/resourceGroups/${ctx.resourceGroup}`}`;
  const principal = '11111111-2222-3333-4444-555555555555';
  const defaultMessage = code === 'AuthorizationFailed'
    ? `The client '${principal}' with object id '${principal}' does not have authorization to perform action '${actions[ctx.operation]}' over scope '${scope}' or the scope is invalid. If access was recently granted, please refresh your credentials.`
    : code === 'TooManyRequests'
      ? 'The request is being throttled as the limit has been reached for operation type - Read_ObservationWindow_00:05:00. For more information, refer to - https://aka.ms/srpthrottlinglimits'
      : `The fake ARM server injected a ${f.status} ${code} fault.`;
  const retryAfter = f.retryAfterSeconds ?? (f.status === 429 ? 1 : undefined);
  return {
    kind: 'error', status: f.status, code, message: f.message ?? defaultMessage,
    ...(retryAfter === undefined ? {} : {headers: {'retry-after': String(retryAfter)}}),
  };
}

function answerFor(ctx: ArmRequestContext, url: URL, world: ArmWorld, pageSize: number, baseUrl: string): Answer {
  if (ctx.operation === 'managementGroups.descendants') {
    const group = ctx.managementGroup ?? '';
    const items = world.managementGroups.descendants(group);
    // ARM answers a group the caller cannot see like one that does not exist.
    if (items === undefined) return {kind: 'error', status: 404, code: 'NotFound', message: `'/providers/Microsoft.Management/managementGroups/${group}' not found`};
    const body = descendantsPage(items, url, pageSize, baseUrl, ctx.apiVersion);
    return body === undefined ? {kind: 'error', status: 400, code: 'InvalidSkipToken', message: 'The $skiptoken is invalid.'} : {kind: 'json', status: 200, body};
  }
  if (ctx.operation === 'subscriptions.list') {
    return page(world.listSubscriptions(), subscriptionJson, url, pageSize, baseUrl, ctx.apiVersion);
  }
  const sub = world.getSubscription(ctx.subscription ?? '');
  if (sub === undefined) {
    return {kind: 'error', status: 404, code: 'SubscriptionNotFound', message: `The subscription '${ctx.subscription ?? ''}' could not be found.`};
  }
  if (ctx.operation === 'subscriptions.get') return {kind: 'json', status: 200, body: subscriptionJson(sub)};
  if (ctx.operation === 'managedClusters.list') {
    return textPage(world.listClusters(sub.subscriptionId), (c) => managedClusterText(c, sub.tenantId), url, pageSize, baseUrl, ctx.apiVersion);
  }
  const rg = ctx.resourceGroup ?? '';
  if (!world.hasResourceGroup(sub.subscriptionId, rg)) {
    return {kind: 'error', status: 404, code: 'ResourceGroupNotFound', message: `Resource group '${rg}' could not be found.`};
  }
  if (ctx.operation === 'managedClusters.listByResourceGroup') {
    return textPage(world.listClusters(sub.subscriptionId, rg), (c) => managedClusterText(c, sub.tenantId), url, pageSize, baseUrl, ctx.apiVersion);
  }
  const name = ctx.clusterName ?? '';
  const cluster = world.getCluster({subscriptionId: sub.subscriptionId, resourceGroup: rg, name});
  if (cluster === undefined) {
    return {kind: 'error', status: 404, code: 'ResourceNotFound',
      message: `The Resource 'Microsoft.ContainerService/managedClusters/${name}' under resource group '${rg}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix`};
  }
  if (ctx.operation === 'managedClusters.get') return {kind: 'json', status: 200, body: managedClusterJson(cluster, sub.tenantId)};

  const format = url.searchParams.get('format') ?? 'exec';
  if (format !== 'exec' && format !== 'azure') {
    return {kind: 'error', status: 400, code: 'BadRequest', message: `Invalid format '${format}': expected 'azure' or 'exec'.`};
  }
  if (cluster.aadProfile === undefined && cluster.disableLocalAccounts === true) {
    return {kind: 'error', status: 400, code: 'BadRequest',
      message: 'Getting static credential is not allowed because this cluster is set to disable local accounts.'};
  }
  const kubeconfig = userKubeconfig(cluster, sub.tenantId, format satisfies CredentialFormat);
  return {kind: 'json', status: 200, body: {kubeconfigs: [{name: 'clusterUser', value: Buffer.from(kubeconfig, 'utf8').toString('base64')}]}};
}

/** One page of a list, with an absolute nextLink back to this server while items remain. */
function page<T>(items: readonly T[], toJson: (item: T) => unknown, url: URL, pageSize: number, baseUrl: string, apiVersion: string, extraQuery = ''): Answer {
  const window = pageWindow(items.length, url, pageSize, baseUrl, apiVersion, extraQuery);
  if ('kind' in window) return window;
  const body: Record<string, unknown> = {value: items.slice(window.offset, window.offset + pageSize).map(toJson)};
  if (window.nextLink !== undefined) body['nextLink'] = window.nextLink;
  return {kind: 'json', status: 200, body};
}

/**
 * {@link page} for items whose JSON text is cached: the same bytes as `JSON.stringify` of
 * {value, nextLink}, without serialising every item again for every request (the W5 bench reads
 * 500 pages a cycle; the fake shares the service's two cores).
 */
function textPage<T>(items: readonly T[], toText: (item: T) => string, url: URL, pageSize: number, baseUrl: string, apiVersion: string): Answer {
  const window = pageWindow(items.length, url, pageSize, baseUrl, apiVersion, '');
  if ('kind' in window) return window;
  const value = items.slice(window.offset, window.offset + pageSize).map(toText).join(',');
  const next = window.nextLink === undefined ? '' : `,"nextLink":${JSON.stringify(window.nextLink)}`;
  return {kind: 'text', status: 200, text: `{"value":[${value}]${next}}`};
}

/** Where a page starts (its `$skipToken`) and its nextLink, or the error answer for a bad token. */
function pageWindow(count: number, url: URL, pageSize: number, baseUrl: string, apiVersion: string, extraQuery: string): {offset: number; nextLink: string | undefined} | Answer {
  const token = url.searchParams.get('$skipToken');
  let offset = 0;
  if (token !== null) {
    const parsed = decodeSkipToken(token);
    if (parsed === undefined) {
      return {kind: 'error', status: 400, code: 'InvalidSkipToken', message: `The $skipToken '${token}' is invalid.`};
    }
    offset = parsed;
  }
  if (offset + pageSize >= count) return {offset, nextLink: undefined};
  const next = Buffer.from(JSON.stringify({o: offset + pageSize}), 'utf8').toString('base64url');
  return {offset, nextLink: `${baseUrl}${url.pathname}?api-version=${apiVersion}${extraQuery}&$skipToken=${next}`};
}

/**
 * A managed cluster's list-record JSON text, kept per cluster object and tenant. The world
 * replaces a cluster's object on every change (updateCluster, retagCluster, addCluster), so a
 * changed cluster is serialised afresh on the next list: answers follow the world at once.
 */
const clusterTexts = new WeakMap<FakeManagedCluster, {readonly tenantId: string; readonly text: string}>();

function managedClusterText(cluster: FakeManagedCluster, tenantId: string): string {
  const cached = clusterTexts.get(cluster);
  if (cached?.tenantId === tenantId) return cached.text;
  const text = JSON.stringify(managedClusterJson(cluster, tenantId));
  clusterTexts.set(cluster, {tenantId, text});
  return text;
}

/** sendJson for a body already serialised. */
function sendJsonText(res: ServerResponse, status: number, text: string, headers: Record<string, string>): void {
  res.writeHead(status, {'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), ...headers});
  res.end(text);
}

function decodeSkipToken(token: string): number | undefined {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    const o = (parsed as {o?: unknown}).o;
    return typeof o === 'number' && Number.isInteger(o) && o >= 0 ? o : undefined;
  } catch {
    return undefined;
  }
}

/** Role assignment list, get, create and delete, with ARM's answers and error codes. */
function roleAssignmentAnswer(ctx: ArmRequestContext, groups: Readonly<Record<string, string>>, url: URL, body: string, world: ArmWorld, pageSize: number, baseUrl: string): Answer {
  const scope = groups['scope'] ?? '';
  if (world.getSubscription(ctx.subscription ?? '') === undefined) {
    return {kind: 'error', status: 404, code: 'SubscriptionNotFound', message: `The subscription '${ctx.subscription ?? ''}' could not be found.`};
  }
  if (ctx.operation === 'roleAssignments.list') {
    const filter = url.searchParams.get('$filter');
    let principalId: string | undefined;
    if (filter !== null) {
      const m = /^principalId eq '([0-9a-f-]{36})'$/i.exec(filter);
      if (!m?.[1]) return {kind: 'error', status: 400, code: 'UnsupportedQuery', message: `The fake ARM server does not support the filter '${filter}'.`};
      principalId = m[1];
    }
    return page(world.listRoleAssignments(scope, principalId), roleAssignmentJson, url, pageSize, baseUrl, ctx.apiVersion, filter === null ? '' : `&$filter=${encodeURIComponent(filter)}`);
  }
  const name = groups['ra'] ?? '';
  const existing = world.getRoleAssignment(scope, name);
  if (ctx.operation === 'roleAssignments.get') {
    return existing === undefined
      ? {kind: 'error', status: 404, code: 'RoleAssignmentNotFound', message: `The role assignment '${name}' is not found.`}
      : {kind: 'json', status: 200, body: roleAssignmentJson(existing)};
  }
  if (ctx.operation === 'roleAssignments.delete') {
    if (existing === undefined) return {kind: 'json', status: 204, body: undefined};
    world.deleteRoleAssignment(scope, name);
    return {kind: 'json', status: 200, body: roleAssignmentJson(existing)};
  }
  let props: {principalId?: unknown; roleDefinitionId?: unknown; description?: unknown; principalType?: unknown} | undefined;
  try {
    props = (JSON.parse(body) as {properties?: typeof props}).properties;
  } catch {
    props = undefined;
  }
  if (typeof props?.principalId !== 'string' || typeof props.roleDefinitionId !== 'string') {
    return {kind: 'error', status: 400, code: 'InvalidRequestContent', message: 'The request content was invalid: properties.principalId and properties.roleDefinitionId are required.'};
  }
  if (!/^[0-9a-f-]{36}$/i.test(name)) return {kind: 'error', status: 400, code: 'InvalidRoleAssignmentId', message: `The role assignment ID '${name}' is not valid. The role assignment ID must be a GUID.`};
  const {principalId, roleDefinitionId} = props;
  const duplicate = world.listRoleAssignments(scope, principalId)
    .find((a) => a.name.toLowerCase() !== name.toLowerCase() && a.scope.toLowerCase() === scope.toLowerCase() && a.roleDefinitionId.toLowerCase() === roleDefinitionId.toLowerCase());
  if (duplicate !== undefined) return {kind: 'error', status: 409, code: 'RoleAssignmentExists', message: 'The role assignment already exists.'};
  if (existing !== undefined && (existing.principalId.toLowerCase() !== principalId.toLowerCase() || existing.roleDefinitionId.toLowerCase() !== roleDefinitionId.toLowerCase())) {
    return {kind: 'error', status: 400, code: 'RoleAssignmentUpdateNotPermitted', message: 'Tenant ID, application ID, principal ID, and scope are not allowed to be updated.'};
  }
  const created = world.putRoleAssignment({
    name, scope, principalId, roleDefinitionId,
    ...(typeof props.description === 'string' ? {description: props.description} : {}),
    ...(typeof props.principalType === 'string' ? {principalType: props.principalType} : {}),
  });
  return {kind: 'json', status: 201, body: roleAssignmentJson(created)};
}
