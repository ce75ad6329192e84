/**
 * The Kubernetes RBAC the discovery identity needs in every cluster it probes:
 * impersonate users, groups and service accounts; get pods; create self-subject access and
 * rules reviews. One ClusterRole, bound to a group (EKS access entry or aws-auth group) or
 * to a user (an AKS managed identity's object id).
 */
import {stringify} from 'yaml';

/** API version of the RBAC objects. */
export const RBAC_API_VERSION = 'rbac.authorization.k8s.io/v1';
/** Default name of the ClusterRole, the ClusterRoleBinding and the Kubernetes group. */
export const DEFAULT_RBAC_NAME = 'kube-discovery';
/** Label put on what `configure` creates, so an operator can find it. */
export const MANAGED_BY_LABEL = {'app.kubernetes.io/managed-by': 'kube-discovery-configure'} as const;

/** One RBAC policy rule. */
export interface PolicyRule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
}

/** Who a binding grants the role to. */
export interface RbacSubject {
  readonly kind: 'Group' | 'User';
  readonly name: string;
  readonly apiGroup: 'rbac.authorization.k8s.io';
}

/** A ClusterRole as configure writes it. */
export interface ClusterRole {
  readonly apiVersion: typeof RBAC_API_VERSION;
  readonly kind: 'ClusterRole';
  readonly metadata: {readonly name: string; readonly labels: Readonly<Record<string, string>>};
  readonly rules: readonly PolicyRule[];
}

/** A ClusterRoleBinding as configure writes it. */
export interface ClusterRoleBinding {
  readonly apiVersion: typeof RBAC_API_VERSION;
  readonly kind: 'ClusterRoleBinding';
  readonly metadata: {readonly name: string; readonly labels: Readonly<Record<string, string>>};
  readonly roleRef: {readonly apiGroup: 'rbac.authorization.k8s.io'; readonly kind: 'ClusterRole'; readonly name: string};
  readonly subjects: readonly RbacSubject[];
}

/** Either RBAC object configure writes. */
export type RbacObject = ClusterRole | ClusterRoleBinding;

/** The rules of the discovery ClusterRole: what the probe checks and what a Kubernetes proxy in front of the cluster needs. */
export const DISCOVERY_RULES: readonly PolicyRule[] = [
  {apiGroups: [''], resources: ['users', 'groups', 'serviceaccounts'], verbs: ['impersonate']},
  {apiGroups: [''], resources: ['pods'], verbs: ['get']},
  {apiGroups: ['authorization.k8s.io'], resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'], verbs: ['create']},
];

/** The discovery ClusterRole. */
export function discoveryClusterRole(name: string = DEFAULT_RBAC_NAME): ClusterRole {
  return {apiVersion: RBAC_API_VERSION, kind: 'ClusterRole', metadata: {name, labels: {...MANAGED_BY_LABEL}}, rules: DISCOVERY_RULES};
}

/** The binding of the discovery ClusterRole `roleName` to one subject. */
export function discoveryClusterRoleBinding(subject: Omit<RbacSubject, 'apiGroup'>, name: string = DEFAULT_RBAC_NAME, roleName: string = name): ClusterRoleBinding {
  return {
    apiVersion: RBAC_API_VERSION,
    kind: 'ClusterRoleBinding',
    metadata: {name, labels: {...MANAGED_BY_LABEL}},
    roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName},
    subjects: [{...subject, apiGroup: 'rbac.authorization.k8s.io'}],
  };
}

/** The objects as one multi-document YAML stream, ready for `kubectl apply -f -`. */
export function rbacYaml(objects: readonly RbacObject[]): string {
  return objects.map((o) => `---\n${stringify(o)}`).join('');
}

/** Whether a stored object (as the API server returns it) already has everything `desired` sets. */
export function rbacUpToDate(desired: RbacObject, stored: Readonly<Record<string, unknown>>): boolean {
  const labels = ((stored['metadata'] as {labels?: Record<string, string>} | undefined)?.labels) ?? {};
  const labelsOk = Object.entries(desired.metadata.labels).every(([k, v]) => labels[k] === v);
  if (desired.kind === 'ClusterRole') return labelsOk && sameJson(normalizeRules(stored['rules']), normalizeRules(desired.rules));
  return labelsOk && sameJson(stored['roleRef'], desired.roleRef) && sameJson(normalizeSubjects(stored['subjects']), normalizeSubjects(desired.subjects));
}

/** Rules compared as sets: the API server keeps order, but a hand-edited role may list them differently. */
function normalizeRules(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value
    .map((rule: Record<string, unknown>) =>
      JSON.stringify(['apiGroups', 'resources', 'verbs', 'resourceNames', 'nonResourceURLs'].map((k) => sortedStrings(rule[k]))),
    )
    .sort();
}

function normalizeSubjects(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value.map((s: Record<string, unknown>) => JSON.stringify([s['kind'], s['name'], s['namespace'] ?? '', s['apiGroup'] ?? ''])).sort();
}

function sortedStrings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(String).sort() : [];
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
