/**
 * The role assignment calls over `@azure/arm-authorization`, on the same credential and pipeline
 * policies as discovery. Every answer used is checked for the fields set-up relies on: a
 * malformed answer is an error, never "no assignment" (which would make set-up write, or
 * cleanup skip, on a guess).
 */
import {AuthorizationManagementClient, type RoleAssignment} from '@azure/arm-authorization';
import type {TokenCredential} from '@azure/core-auth';
import {azureFailure} from './errors.ts';
import type {ROLE_ASSIGNMENT_ACTIONS} from './role-assignments-api.ts';
import { RoleAssignmentCallError, type RoleAssignmentRecord, type RoleAssignmentsApi} from './role-assignments-api.ts';
import type {AzureSourceMatcher} from './sources.ts';

/** Options of {@link createRoleAssignmentsApi}: what `armClientOptions` builds, plus the credential. */
export interface RoleAssignmentsApiOptions {
  readonly credential: TokenCredential;
  readonly subscriptionId: string;
  readonly clientOptions: ConstructorParameters<typeof AuthorizationManagementClient>[2];
}

/** Role assignment calls over `@azure/arm-authorization`. */
export function createRoleAssignmentsApi(options: RoleAssignmentsApiOptions): RoleAssignmentsApi {
  const client = new AuthorizationManagementClient(options.credential, options.subscriptionId, options.clientOptions);
  // The SDK's path template is `/{scope}/providers/...` with the scope unencoded: a leading slash would double.
  const rel = (scope: string): string => scope.replace(/^\/+/, '');
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
        for await (const item of client.roleAssignments.listForScope(rel(scope), {filter: `principalId eq '${principalId}'`, abortSignal: signal})) out.push(checked(item));
        return out;
      }),
    get: (scope, name, signal) =>
      call('get', async () => {
        try {
          return checked(await client.roleAssignments.get(rel(scope), name, {abortSignal: signal}));
        } catch (error) {
          if ((error as {statusCode?: number}).statusCode === 404) return undefined;
          throw error;
        }
      }),
    create: (scope, name, assignment, signal) =>
      call('create', async () => {
        checked(await client.roleAssignments.create(rel(scope), name, assignment, {abortSignal: signal}));
      }),
    delete: (scope, name, signal) =>
      call('delete', async () => {
        try {
          await client.roleAssignments.delete(rel(scope), name, {abortSignal: signal});
        } catch (error) {
          // Gone already is what we wanted.
          if ((error as {statusCode?: number}).statusCode !== 404) throw error;
        }
      }),
  };
}

/** The fields set-up decides on, or an InvalidResponse error naming what is missing. */
function checked(item: RoleAssignment): RoleAssignmentRecord {
  const {name, scope, principalId, roleDefinitionId, description} = item;
  for (const [key, value] of Object.entries({name, scope, principalId, roleDefinitionId})) {
    if (typeof value !== 'string' || value === '') {
      throw Object.assign(new Error(`ARM answered a role assignment without ${key === 'name' ? 'name' : `properties.${key}`}`), {name: 'InvalidResponse', code: 'InvalidResponse'});
    }
  }
  return {name: name ?? '', scope: scope ?? '', principalId: principalId ?? '', roleDefinitionId: roleDefinitionId ?? '', ...(typeof description === 'string' ? {description} : {})};
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
      api = sources.armAccess(matcher).then(({credential, options}) => createRoleAssignmentsApi({credential, subscriptionId, clientOptions: options}));
      // A failure (no credential yet) is retried next time instead of being remembered.
      api.catch(() => apis.delete(key));
      apis.set(key, api);
    }
    return api;
  };
}
