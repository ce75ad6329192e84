// The fake API server's RBAC authorizer: SSAR answers follow the ClusterRoles and bindings it holds.
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {applyRbacObject, canI} from '../../src/access/kube-apply.ts';
import {discoveryClusterRole, discoveryClusterRoleBinding} from '../../src/access/rbac.ts';
import {startFakeKubeApi, KubeRbacStore, type FakeKubeApi} from './kube-api-server.ts';
import {EKS_CLUSTER_ADMIN_GROUP, rbacAuthorizer} from './kube-rbac-authorizer.ts';

const USERS: Record<string, {user: string; groups: string[]}> = {
  agent: {user: 'agent', groups: ['kube-discovery']},
  admin: {user: 'admin', groups: [EKS_CLUSTER_ADMIN_GROUP]},
  other: {user: 'other', groups: ['dev']},
};
let kube: FakeKubeApi;
const as = (token: string) => ({server: kube.url, caPem: kube.caPem, token});

beforeAll(async () => {
  const rbac = new KubeRbacStore();
  kube = await startFakeKubeApi({authenticate: (token) => USERS[token], rbac, authorize: rbacAuthorizer(rbac)});
});

afterAll(async () => {
  await kube.close();
});

describe('rbacAuthorizer', () => {
  it('denies what no binding grants, allows it once a role is bound to a group of the user, and lets cluster-admin write RBAC', async () => {
    expect(await canI(as('agent'), 'impersonate', 'users')).toBe(false);
    await expect(applyRbacObject(as('agent'), discoveryClusterRole())).rejects.toMatchObject({status: 403});

    await applyRbacObject(as('admin'), discoveryClusterRole());
    await applyRbacObject(as('admin'), discoveryClusterRoleBinding({kind: 'Group', name: 'kube-discovery'}));

    for (const resource of ['users', 'groups', 'serviceaccounts']) expect(await canI(as('agent'), 'impersonate', resource)).toBe(true);
    expect(await canI(as('agent'), 'delete', 'pods')).toBe(false);
    expect(await canI(as('other'), 'impersonate', 'users')).toBe(false);
  });
});
