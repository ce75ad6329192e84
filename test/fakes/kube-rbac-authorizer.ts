/**
 * Authorizes requests of the fake Kubernetes API the way kube-apiserver's RBAC authorizer
 * does, from the ClusterRoles and ClusterRoleBindings in a KubeRbacStore: a request is allowed
 * when a binding names the user or one of its groups and the bound role has a rule matching
 * verb, API group and resource (or `*`). Groups in `superGroups` are allowed everything, like
 * `system:masters` or an EKS cluster-admin access policy.
 */
import type {AccessAttributes, KubeAuthorizer, KubeUser} from './kube-api-server.ts';
import type {KubeRbacStore} from './kube-rbac-store.ts';

/** Group the EKS fixtures give a principal whose access entry has AmazonEKSClusterAdminPolicy associated. */
export const EKS_CLUSTER_ADMIN_GROUP = 'eks:access-policy:AmazonEKSClusterAdminPolicy';

interface Rule {
  readonly apiGroups?: readonly string[];
  readonly resources?: readonly string[];
  readonly verbs?: readonly string[];
}

interface Subject {
  readonly kind?: string;
  readonly name?: string;
}

const matches = (list: readonly string[] | undefined, value: string): boolean => (list ?? []).some((v) => v === '*' || v === value);

/** An authorizer over `store`'s cluster-scoped RBAC. */
export function rbacAuthorizer(store: KubeRbacStore, options: {superGroups?: readonly string[]} = {}): KubeAuthorizer {
  const superGroups = new Set(['system:masters', ...(options.superGroups ?? [EKS_CLUSTER_ADMIN_GROUP])]);
  return (user: KubeUser, attrs: AccessAttributes) => {
    if (user.groups.some((g) => superGroups.has(g))) return {allowed: true, reason: 'member of a super-user group'};
    for (const binding of store.list('clusterrolebindings')) {
      const subjects = (binding['subjects'] as Subject[] | undefined) ?? [];
      const bound = subjects.some((s) => (s.kind === 'Group' && s.name !== undefined && user.groups.includes(s.name)) || (s.kind === 'User' && s.name === user.user));
      if (!bound) continue;
      const roleName = (binding['roleRef'] as {name?: string} | undefined)?.name ?? '';
      const rules = (store.get('clusterroles', roleName)?.['rules'] as Rule[] | undefined) ?? [];
      const allowed = rules.some(
        (r) => matches(r.verbs, attrs.verb) && matches(r.apiGroups, attrs.group ?? '') && matches(r.resources, attrs.resource ?? ''),
      );
      if (allowed) return {allowed: true, reason: `RBAC: allowed by ClusterRoleBinding "${binding.metadata.name}"`};
    }
    return {allowed: false, reason: ''};
  };
}
