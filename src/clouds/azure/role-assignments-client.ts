/**
 * The role assignment calls of AKS access set-up, as ARM REST requests (api-version
 * 2022-04-01) sent through `@azure/core-client`'s pipeline with the same credential, retries and
 * policies (timeout, list shape, error bodies) as the discovery clients. Every answer used is
 * checked for the fields set-up relies on: a malformed answer is an error, never "no
 * assignment" (which would make set-up write, or cleanup skip, on a guess).
 */
import type {TokenCredential} from '@azure/core-auth';
import {ServiceClient, type ServiceClientOptions} from '@azure/core-client';
import {createPipelineRequest, type PipelineResponse} from '@azure/core-rest-pipeline';
import {sameOrigin} from './arm-list.ts';
import {azureFailure} from './errors.ts';
import type {ROLE_ASSIGNMENT_ACTIONS} from './role-assignments-api.ts';
import { RoleAssignmentCallError, type RoleAssignmentRecord, type RoleAssignmentsApi} from './role-assignments-api.ts';
import type {AzureSourceMatcher} from './sources.ts';

/** api-version of `Microsoft.Authorization/roleAssignments` these calls speak. */
export const ROLE_ASSIGNMENTS_API_VERSION = '2022-04-01';

/** Options of {@link createRoleAssignmentsApi}: what `armClientOptions` builds, plus the credential. */
export interface RoleAssignmentsApiOptions {
  readonly credential: TokenCredential;
  readonly clientOptions: ServiceClientOptions & {readonly endpoint: string};
}

/** ARM operation names (as the SDKs call them) of the requests below; test/deploy/iam.test.ts maps them to actions. */
type ArmOperation = 'roleAssignments.listForScope' | 'roleAssignments.get' | 'roleAssignments.create' | 'roleAssignments.delete';

/** Role assignment calls over ARM REST. */
export function createRoleAssignmentsApi(options: RoleAssignmentsApiOptions): RoleAssignmentsApi {
  const base = options.clientOptions.endpoint.replace(/\/+$/, '');
  const client = new ServiceClient({...options.clientOptions, credential: options.credential});
  const url = (scope: string, name?: string, query = ''): string =>
    `${base}/${scope.replace(/^\/+/, '')}/providers/Microsoft.Authorization/roleAssignments${name ? `/${encodeURIComponent(name)}` : ''}?api-version=${ROLE_ASSIGNMENTS_API_VERSION}${query}`;
  /** One request; an answer other than `ok` statuses throws an error shaped like the SDKs' RestError. */
  const armCall = async (operation: ArmOperation, method: 'GET' | 'PUT' | 'DELETE', target: string, ok: readonly number[], signal: AbortSignal, body?: unknown): Promise<PipelineResponse> => {
    const request = createPipelineRequest({url: target, method, abortSignal: signal, ...(body === undefined ? {} : {body: JSON.stringify(body)})});
    if (body !== undefined) request.headers.set('content-type', 'application/json');
    const response = await client.sendRequest(request);
    if (!ok.includes(response.status)) throw restError(operation, response);
    return response;
  };
  const call = async <T>(name: keyof typeof ROLE_ASSIGNMENT_ACTIONS, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw new RoleAssignmentCallError(name, azureFailure(error, `RoleAssignments.${name}`), error);
    }
  };
  return {
    listForPrincipal: (scope, principalId, signal) =>
      call('listForPrincipal', async () => {
        const out: RoleAssignmentRecord[] = [];
        let next: string | undefined = url(scope, undefined, `&$filter=${encodeURIComponent(`principalId eq '${principalId}'`)}`);
        for (let pages = 0; next; pages++) {
          if (pages >= 1000) throw invalid('role assignment list never ended (1000 pages)');
          const page = json(await armCall('roleAssignments.listForScope', 'GET', next, [200], signal)) as {value?: unknown; nextLink?: unknown};
          if (!Array.isArray(page.value)) throw invalid('a role assignment list page without value');
          out.push(...page.value.map(checked));
          next = typeof page.nextLink === 'string' && page.nextLink !== '' ? page.nextLink : undefined;
          // The bearer token goes with every page: never to a host other than ARM's.
          if (next !== undefined && !sameOrigin(next, base)) throw invalid('a role assignment list page whose nextLink names another host');
        }
        return out;
      }),
    get: (scope, name, signal) =>
      call('get', async () => {
        const response = await armCall('roleAssignments.get', 'GET', url(scope, name), [200, 404], signal);
        return response.status === 404 ? undefined : checked(json(response));
      }),
    create: (scope, name, assignment, signal) =>
      call('create', async () => {
        checked(json(await armCall('roleAssignments.create', 'PUT', url(scope, name), [200, 201], signal, {properties: assignment})));
      }),
    delete: (scope, name, signal) =>
      call('delete', async () => {
        // 204 (or 404): gone already, which is what we wanted.
        await armCall('roleAssignments.delete', 'DELETE', url(scope, name), [200, 204, 404], signal);
      }),
  };
}

function json(response: PipelineResponse): unknown {
  try {
    return JSON.parse(response.bodyAsText ?? '');
  } catch {
    throw invalid(`a ${response.status} answer whose body is not JSON`);
  }
}

function invalid(message: string): Error {
  return Object.assign(new Error(`ARM answered ${message}`), {name: 'InvalidResponse', code: 'InvalidResponse'});
}

/** ARM's `{error: {code, message}}` as the SDKs' RestError carries it (code, statusCode, response headers). */
function restError(operation: ArmOperation, response: PipelineResponse): Error {
  let body: {error?: {code?: unknown; message?: unknown}} | undefined;
  try {
    body = JSON.parse(response.bodyAsText ?? '') as typeof body;
  } catch {
    body = undefined;
  }
  const code = typeof body?.error?.code === 'string' ? body.error.code : `HTTP${response.status}`;
  const message = typeof body?.error?.message === 'string' ? body.error.message : `${operation} answered HTTP ${response.status}`;
  return Object.assign(new Error(message), {name: 'RestError', code, statusCode: response.status, response: {status: response.status, headers: response.headers}});
}

/** The fields set-up decides on, or an InvalidResponse error naming what is missing. */
function checked(item: unknown): RoleAssignmentRecord {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) throw invalid('a role assignment that is not a JSON object');
  const {name, properties} = item as {name?: unknown; properties?: Record<string, unknown> | null};
  const {scope, principalId, roleDefinitionId, description} = properties ?? {};
  for (const [key, value] of Object.entries({name, 'properties.scope': scope, 'properties.principalId': principalId, 'properties.roleDefinitionId': roleDefinitionId})) {
    if (typeof value !== 'string' || value === '') throw invalid(`a role assignment without ${key}`);
  }
  return {name: name as string, scope: scope as string, principalId: principalId as string, roleDefinitionId: roleDefinitionId as string, ...(typeof description === 'string' ? {description} : {})};
}

/** What {@link roleAssignmentsApis} needs of the Azure sources: a matcher's credential and client options. */
export interface ArmAccessSource {
  armAccess(matcher: AzureSourceMatcher): Promise<{credential: TokenCredential; options: RoleAssignmentsApiOptions['clientOptions']}>;
}

/** Role assignment clients per (`azure:` matcher, subscription), built on first use and kept. */
export function roleAssignmentsApis(config: {readonly discovery_service: {readonly azure: readonly AzureSourceMatcher[]}}, sources: ArmAccessSource): (matcherIndex: number, subscriptionId: string) => Promise<RoleAssignmentsApi> {
  const apis = new Map<string, Promise<RoleAssignmentsApi>>();
  return (matcherIndex, subscriptionId) => {
    const key = `${matcherIndex}|${subscriptionId}`;
    let api = apis.get(key);
    if (!api) {
      const matcher = config.discovery_service.azure[matcherIndex];
      if (!matcher) return Promise.reject(new Error(`no azure matcher #${matcherIndex} in the configuration any more`));
      api = sources.armAccess(matcher).then(({credential, options}) => createRoleAssignmentsApi({credential, clientOptions: options}));
      // A failure (no credential yet) is retried next time instead of being remembered.
      api.catch(() => apis.delete(key));
      apis.set(key, api);
    }
    return api;
  };
}
