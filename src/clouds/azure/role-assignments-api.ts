/**
 * The contract of the ARM calls of automatic AKS access set-up (`setup_access_for_principal_id`):
 * `Microsoft.Authorization/roleAssignments` at a managed cluster's scope. No SDK import here, so
 * AWS-only configurations never load the Azure SDK; the client is role-assignments-client.ts.
 */
import {createHash} from 'node:crypto';

/** The role assignment fields set-up reads. */
export interface RoleAssignmentRecord {
  readonly name: string;
  readonly scope: string;
  readonly principalId: string;
  readonly roleDefinitionId: string;
  readonly description?: string;
}

/** What a new role assignment says. */
export interface NewRoleAssignment {
  readonly principalId: string;
  readonly roleDefinitionId: string;
  readonly description: string;
}

/** The four calls set-up makes, narrow so tests could hand in anything speaking them. */
export interface RoleAssignmentsApi {
  /** Assignments of `principalId` at, above or below `scope`. */
  listForPrincipal(scope: string, principalId: string, signal: AbortSignal): Promise<RoleAssignmentRecord[]>;
  /** The assignment `name` at `scope`, or undefined when ARM says it does not exist. */
  get(scope: string, name: string, signal: AbortSignal): Promise<RoleAssignmentRecord | undefined>;
  create(scope: string, name: string, assignment: NewRoleAssignment, signal: AbortSignal): Promise<void>;
  delete(scope: string, name: string, signal: AbortSignal): Promise<void>;
}

/** The Azure RBAC action each call needs (what a 403 names in the health message). */
export const ROLE_ASSIGNMENT_ACTIONS = {
  listForPrincipal: 'Microsoft.Authorization/roleAssignments/read',
  get: 'Microsoft.Authorization/roleAssignments/read',
  create: 'Microsoft.Authorization/roleAssignments/write',
  delete: 'Microsoft.Authorization/roleAssignments/delete',
} as const;

/** A failed role assignment call: which call, the Azure RBAC action it needs, ARM's code and reason. */
export class RoleAssignmentCallError extends Error {
  override readonly name = 'RoleAssignmentCallError';
  readonly operation: string;
  readonly action: string;
  readonly code: string;
  readonly reason: string;
  constructor(call: keyof typeof ROLE_ASSIGNMENT_ACTIONS, failure: {readonly operation: string; readonly code: string; readonly reason: string; readonly message: string}, cause: unknown) {
    super(failure.message, {cause});
    this.operation = failure.operation;
    this.action = ROLE_ASSIGNMENT_ACTIONS[call];
    this.code = failure.code;
    this.reason = failure.reason;
  }
}

/**
 * The assignment's name: a GUID derived from scope, principal and role, so every run (and every
 * replica) PUTs the same resource and a repeated create is a no-op instead of a duplicate.
 */
export function roleAssignmentName(scope: string, principalId: string, roleDefinitionGuid: string): string {
  const hex = createHash('sha256').update(`${scope.toLowerCase()}|${principalId.toLowerCase()}|${roleDefinitionGuid.toLowerCase()}`).digest('hex');
  // Shaped as an RFC 9562 name-based GUID (version 8, variant 10).
  const variant = ((Number.parseInt(hex.slice(16, 17), 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

