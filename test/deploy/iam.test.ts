// The shipped IAM policies and Azure role grant exactly what the code calls: a static scan of
// src/ for AWS SDK commands, credential providers and ARM operations, mapped to IAM / Azure
// actions by the tables below. A new SDK call without a table entry fails here, and so does a
// policy granting an action nothing calls.
import {readdirSync, readFileSync} from 'node:fs';
import path from 'node:path';
import {describe, expect, it} from 'vitest';
import {parse} from 'yaml';
import {AKS_RBAC_READER_ROLE_ID} from '../../src/access/aks-setup-step.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');

/** Files whose AWS calls belong to `configure eks` (the operator's policy), not to the discovery identity. */
const CONFIGURE_FILES = new Set(['src/clouds/aws/access-entries.ts']);
/** Files whose AWS calls belong to `setup_access_for_arn` (its own opt-in policy), not to plain discovery. */
const ACCESS_SETUP_FILES = new Set(['src/clouds/aws/access-setup-api.ts']);
/** Files whose AWS calls the management account makes for `organization` matchers (organization-policy.json). */
const ORGANIZATION_FILES = new Set(['src/clouds/aws/organization.ts']);
/** Files whose AWS calls an organization matcher makes as the member-account role (the StackSets template). */
const MEMBER_FILES = new Set(['src/clouds/aws/account-regions.ts']);

/** AWS operation (`service:Operation` as the SDK names it) → IAM action, or null when IAM needs no permission. */
const AWS_ACTIONS: Readonly<Record<string, string | null>> = {
  'eks:ListClusters': 'eks:ListClusters',
  'eks:DescribeCluster': 'eks:DescribeCluster',
  'resource-groups-tagging-api:GetResources': 'tag:GetResources',
  'eks:DescribeAccessEntry': 'eks:DescribeAccessEntry',
  'eks:CreateAccessEntry': 'eks:CreateAccessEntry',
  'eks:DeleteAccessEntry': 'eks:DeleteAccessEntry',
  'eks:ListAssociatedAccessPolicies': 'eks:ListAssociatedAccessPolicies',
  'eks:AssociateAccessPolicy': 'eks:AssociateAccessPolicy',
  'eks:DisassociateAccessPolicy': 'eks:DisassociateAccessPolicy',
  'sts:AssumeRole': 'sts:AssumeRole',
  'organizations:DescribeOrganization': 'organizations:DescribeOrganization',
  'organizations:ListRoots': 'organizations:ListRoots',
  'organizations:ListOrganizationalUnitsForParent': 'organizations:ListOrganizationalUnitsForParent',
  'organizations:ListAccountsForParent': 'organizations:ListAccountsForParent',
  'account:ListRegions': 'account:ListRegions',
  // "No permissions are required to perform this operation" (STS API reference): it cannot be denied.
  'sts:GetCallerIdentity': null,
};

/** Credential providers → the operation they perform with the caller's own credentials. */
const PROVIDER_OPERATIONS: Readonly<Record<string, string | null>> = {
  fromTemporaryCredentials: 'sts:AssumeRole',
  // The default chain: web identity (IRSA) and Pod Identity are granted by the role's trust policy, not by a permission.
  fromNodeProviderChain: null,
};

/** ARM operations (`operationGroup.method`) → Azure action. */
const AZURE_ACTIONS: Readonly<Record<string, string>> = {
  'managedClusters.list': 'Microsoft.ContainerService/managedClusters/read',
  'managedClusters.listByResourceGroup': 'Microsoft.ContainerService/managedClusters/read',
  'managedClusters.get': 'Microsoft.ContainerService/managedClusters/read',
  'managedClusters.listClusterUserCredentials': 'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action',
  'subscriptions.list': 'Microsoft.Resources/subscriptions/read',
  'subscriptions.get': 'Microsoft.Resources/subscriptions/read',
  // management_groups only (src/clouds/azure/management-groups.ts).
  'managementGroups.listDescendants': 'Microsoft.Management/managementGroups/descendants/read',
  // setup_access_for_principal_id only (deploy/azure/access-setup-role.json).
  'roleAssignments.listForScope': 'Microsoft.Authorization/roleAssignments/read',  // ARM REST via armCall('roleAssignments.…')
  'roleAssignments.get': 'Microsoft.Authorization/roleAssignments/read',
  'roleAssignments.create': 'Microsoft.Authorization/roleAssignments/write',
  'roleAssignments.delete': 'Microsoft.Authorization/roleAssignments/delete',
};

/** Files whose ARM calls belong to AKS access set-up, granted apart from discovery-role.json. */
const AZURE_ACCESS_SETUP_FILES = new Set(['src/clouds/azure/role-assignments-client.ts']);

const ARRAY_METHODS = new Set(Object.getOwnPropertyNames(Array.prototype));

interface Use {
  readonly operation: string;
  readonly file: string;
}

function sourceFiles(dir = 'src'): string[] {
  return readdirSync(path.join(ROOT, dir), {withFileTypes: true}).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(rel);
    return entry.name.endsWith('.ts') ? [rel] : [];
  });
}

/** Value imports (not `type` ones) of a module, per file. */
function valueImports(text: string, module: RegExp): {module: string; names: string[]}[] {
  const found: {module: string; names: string[]}[] = [];
  for (const m of text.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'([^']+)'/g)) {
    const [, typeOnly, list = '', from = ''] = m;
    if (typeOnly || !module.test(from)) continue;
    const names = list.split(',').map((n) => n.trim()).filter((n) => n !== '' && !n.startsWith('type ')).map((n) => n.split(/\s+as\s+/)[0] ?? n);
    found.push({module: from, names});
  }
  return found;
}

function scanAws(): Use[] {
  const uses: Use[] = [];
  for (const file of sourceFiles()) {
    const text = read(file);
    for (const {module, names} of valueImports(text, /^@aws-sdk\/client-/)) {
      const service = module.replace('@aws-sdk/client-', '');
      for (const name of names) {
        if (/^[A-Za-z0-9]+Client$/.test(name)) continue; // the client itself calls nothing
        const op = /^(\w+)Command$/.exec(name)?.[1] ?? /^paginate(\w+)$/.exec(name)?.[1];
        if (!op) throw new Error(`${file}: import ${name} from ${module}: expected a *Command, paginate* or *Client, classify it in iam.test.ts`);
        // Imported but unused would still be flagged: only `new XCommand(` / `paginateX(` count.
        if (new RegExp(`\\b(?:new\\s+${name}|${name})\\(`).test(text)) uses.push({operation: `${service}:${op}`, file});
      }
    }
    for (const {module, names} of valueImports(text, /^@aws-sdk\/credential-provider/)) {
      for (const name of names) {
        if (!(name in PROVIDER_OPERATIONS)) throw new Error(`${file}: credential provider ${name} from ${module} is not in PROVIDER_OPERATIONS`);
        const op = PROVIDER_OPERATIONS[name];
        if (op && new RegExp(`\\b${name}\\(`).test(text)) uses.push({operation: op, file});
      }
    }
  }
  return uses;
}

function scanAzure(): Use[] {
  const uses: Use[] = [];
  for (const file of sourceFiles()) {
    const text = read(file);
    for (const {module} of valueImports(text, /^@azure\/arm-/)) {
      expect(['@azure/arm-containerservice', '@azure/arm-resources-subscriptions', '@azure/arm-managementgroups'], `${file} imports ${module}: add its operations to AZURE_ACTIONS`).toContain(module);
    }
    // Narrow client types name the operations a fetcher may call...
    for (const m of text.matchAll(/Pick<\w+\['(\w+)'\],\s*([^>]+)>/g)) {
      for (const method of (m[2] ?? '').matchAll(/'(\w+)'/g)) uses.push({operation: `${m[1]}.${method[1]}`, file});
    }
    // ...REST requests sent through the pipeline name their operation (src/clouds/azure/role-assignments-client.ts)...
    for (const m of text.matchAll(/armCall\('(\w+\.\w+)'/g)) uses.push({operation: m[1] ?? '', file});
    // ...as do lists read page by page through a client's pipeline (src/clouds/azure/arm-list.ts)...
    for (const m of text.matchAll(/armListPages\('(\w+\.\w+)'/g)) uses.push({operation: m[1] ?? '', file});
    // ...and direct calls name the rest (config lists such as `matcher.subscriptions.includes(` are arrays, not ARM).
    for (const m of text.matchAll(/\.(managedClusters|subscriptions|resourceGroups|agentPools|tenants|roleAssignments|roleDefinitions)\.(\w+)\(/g)) {
      if (!ARRAY_METHODS.has(m[2] ?? '')) uses.push({operation: `${m[1]}.${m[2]}`, file});
    }
  }
  return uses;
}

interface PolicyDocument {
  readonly Statement: readonly {Effect: string; Action: string | string[]; Resource: string | string[]}[];
}

function policyActions(file: string): Set<string> {
  const doc = JSON.parse(read(file)) as PolicyDocument;
  return new Set(doc.Statement.filter((s) => s.Effect === 'Allow').flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action])));
}

function policyResources(file: string, action: string): string[] {
  const doc = JSON.parse(read(file)) as PolicyDocument;
  return doc.Statement.filter((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]).includes(action)).flatMap((s) => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]));
}

function iamActionsOf(uses: readonly Use[]): Set<string> {
  const actions = new Set<string>();
  for (const use of uses) {
    expect(Object.keys(AWS_ACTIONS), `${use.file} calls ${use.operation}: add it to AWS_ACTIONS with its IAM action`).toContain(use.operation);
    const action = AWS_ACTIONS[use.operation];
    if (action) actions.add(action);
  }
  return actions;
}

const sorted = (set: Iterable<string>): string[] => [...set].sort();
const iamWildcard = (pattern: string): RegExp => new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\/]/g, '\\$&')).join('.*')}$`);

describe('AWS', () => {
  const uses = scanAws();
  const discoveryUses = uses.filter((u) => !CONFIGURE_FILES.has(u.file) && !ACCESS_SETUP_FILES.has(u.file) && !ORGANIZATION_FILES.has(u.file) && !MEMBER_FILES.has(u.file));
  const memberUses = uses.filter((u) => MEMBER_FILES.has(u.file));
  const organizationUses = uses.filter((u) => ORGANIZATION_FILES.has(u.file));
  const configureUses = uses.filter((u) => CONFIGURE_FILES.has(u.file));
  const setupUses = uses.filter((u) => ACCESS_SETUP_FILES.has(u.file));

  it('finds the calls discovery is known to make (the scan works)', () => {
    expect(sorted(new Set(uses.map((u) => u.operation)))).toEqual(
      expect.arrayContaining(['eks:ListClusters', 'eks:DescribeCluster', 'sts:AssumeRole', 'eks:CreateAccessEntry']),
    );
  });

  it('discovery-policy.json grants exactly the actions the discovery code calls', () => {
    expect(sorted(policyActions('deploy/aws/discovery-policy.json'))).toEqual(sorted(iamActionsOf(discoveryUses)));
  });

  it('configure-policy.json grants exactly the actions configure calls', () => {
    expect(sorted(policyActions('deploy/aws/configure-policy.json'))).toEqual(sorted(iamActionsOf(configureUses)));
  });

  it('access-setup-policy.json grants exactly the actions setup_access_for_arn calls, apart from discovery-policy.json', () => {
    const setup = iamActionsOf(setupUses);
    expect(sorted(setup)).toEqual([
      'eks:AssociateAccessPolicy', 'eks:CreateAccessEntry', 'eks:DeleteAccessEntry', 'eks:DescribeAccessEntry',
      'eks:DisassociateAccessPolicy', 'eks:ListAssociatedAccessPolicies',
    ]);
    expect(sorted(policyActions('deploy/aws/access-setup-policy.json'))).toEqual(sorted(setup));
    // Operators who do not opt in grant none of it.
    for (const action of setup) expect(policyActions('deploy/aws/discovery-policy.json').has(action)).toBe(false);
  });

  it('access-setup-policy.json is scoped to clusters and access entries, and only ever associates cluster-admin', () => {
    const doc = JSON.parse(read('deploy/aws/access-setup-policy.json')) as {Statement: {Action: string[]; Resource: string[]; Condition?: Record<string, Record<string, string>>}[]};
    for (const statement of doc.Statement) {
      for (const resource of statement.Resource) expect(resource).toMatch(/^arn:aws:eks:\*:\*:(cluster|access-entry)\//);
      if (statement.Action.some((a) => a.endsWith('AccessPolicy'))) {
        expect(statement.Condition?.['StringEquals']?.['eks:policyArn']).toBe('arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy');
      }
    }
  });

  it('the target-account role grants the discovery EKS and tag-read actions, which the assumed role performs', () => {
    const eksActions = sorted([...iamActionsOf(discoveryUses)].filter((a) => a.startsWith('eks:') || a.startsWith('tag:')));
    expect(sorted(policyActions('deploy/aws/target-account-role.json'))).toEqual(eksActions);
  });

  it('organization-policy.json grants the organization walk and sts:AssumeRole on the member role name', () => {
    const walk = iamActionsOf(organizationUses);
    expect(sorted(walk)).toEqual(['organizations:DescribeOrganization', 'organizations:ListAccountsForParent', 'organizations:ListOrganizationalUnitsForParent', 'organizations:ListRoots']);
    expect(sorted(policyActions('deploy/aws/organization-policy.json'))).toEqual(sorted([...walk, 'sts:AssumeRole']));
    const patterns = policyResources('deploy/aws/organization-policy.json', 'sts:AssumeRole').map(iamWildcard);
    const config = parse(read('discovery.example.yaml')) as {discovery_service: {aws?: {assume_role_name?: string; organization?: unknown}[]}};
    const names = (config.discovery_service.aws ?? []).flatMap((m) => (m.organization && m.assume_role_name ? [m.assume_role_name] : []));
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) expect(patterns.some((p) => p.test(`arn:aws:iam::222222222222:role/${name}`)), `role ${name} not assumable`).toBe(true);
  });

  it('the StackSets member role grants the discovery EKS actions and trusts only the discovery principal, in the organization, with the external id', () => {
    interface Statement {Effect: string; Action: string | string[]; Principal?: {AWS: unknown}; Condition?: {StringEquals: Record<string, unknown>}}
    const template = parse(read('deploy/aws/member-account-role.stackset.yaml')) as {
      Resources: Record<string, {Type: string; Properties: {AssumeRolePolicyDocument: {Statement: Statement[]}; Policies: {PolicyDocument: {Statement: Statement[]}}[]}}>;
    };
    const role = Object.values(template.Resources).find((r) => r.Type === 'AWS::IAM::Role');
    expect(role).toBeDefined();
    const granted = role!.Properties.Policies.flatMap((p) => p.PolicyDocument.Statement).filter((s) => s.Effect === 'Allow').flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]));
    // The member role lists, describes and reads tags (incremental discovery) like a single-account role.
    const eksActions = [...iamActionsOf(discoveryUses)].filter((a) => a.startsWith('eks:') || a.startsWith('tag:'));
    expect(eksActions).toContain('tag:GetResources');
    expect(sorted(granted)).toEqual(sorted([...eksActions, ...iamActionsOf(memberUses)]));
    const trust = role!.Properties.AssumeRolePolicyDocument.Statement;
    expect(trust).toHaveLength(1);
    expect(trust[0]?.Principal).toEqual({AWS: {Ref: 'DiscoveryPrincipalArn'}});
    expect(trust[0]?.Condition?.StringEquals).toEqual({'sts:ExternalId': {Ref: 'ExternalId'}, 'aws:PrincipalOrgID': {Ref: 'OrganizationId'}});
  });

  it('every assume_role_arn of the shipped configs is assumable under discovery-policy.json', () => {
    const patterns = policyResources('deploy/aws/discovery-policy.json', 'sts:AssumeRole').map(iamWildcard);
    const configs = ['discovery.example.yaml', 'deploy/kubernetes/overlays/eks/discovery.yaml'];
    const roles = configs.flatMap((file) => {
      const config = parse(read(file)) as {discovery_service: {aws?: {assume_role_arn?: string}[]}};
      return (config.discovery_service.aws ?? []).flatMap((m) => (m.assume_role_arn ? [m.assume_role_arn] : []));
    });
    expect(roles.length).toBeGreaterThan(0);
    for (const role of roles) expect(patterns.some((p) => p.test(role)), `${role} is not covered by sts:AssumeRole`).toBe(true);
  });

  it('trust policies tie the roles to the kube-discovery service account and the external id', () => {
    const irsa = read('deploy/aws/irsa-trust-policy.json');
    expect(irsa).toContain('"system:serviceaccount:kube-discovery:kube-discovery"');
    expect(irsa).toContain('sts:AssumeRoleWithWebIdentity');
    expect(read('deploy/aws/pod-identity-trust-policy.json')).toContain('pods.eks.amazonaws.com');
    const target = JSON.parse(read('deploy/aws/target-account-trust-policy.json')) as {Statement: {Condition: {StringEquals: Record<string, string>}}[]};
    expect(target.Statement[0]?.Condition.StringEquals['sts:ExternalId']).toBeTruthy();
  });
});

describe('Azure', () => {
  const uses = scanAzure();

  const actionsOf = (list: readonly Use[]): Set<string> => new Set(list.map((u) => AZURE_ACTIONS[u.operation] ?? ''));

  it('discovery-role.json grants exactly the actions of the ARM operations the code calls', () => {
    expect(uses.map((u) => u.operation)).toEqual(expect.arrayContaining(['managedClusters.listClusterUserCredentials']));
    const needed = new Set<string>();
    for (const use of uses.filter((u) => !AZURE_ACCESS_SETUP_FILES.has(u.file))) {
      expect(Object.keys(AZURE_ACTIONS), `${use.file} calls ${use.operation}: add it to AZURE_ACTIONS with its Azure action`).toContain(use.operation);
      needed.add(AZURE_ACTIONS[use.operation] ?? '');
    }
    const role = JSON.parse(read('deploy/azure/discovery-role.json')) as {Actions: string[]; DataActions: string[]; AssignableScopes: string[]};
    expect(sorted(role.Actions)).toEqual(sorted(needed));
    expect(role.DataActions).toEqual([]);
    expect(role.AssignableScopes.length).toBeGreaterThan(0);
  });

  it('access-setup-role.json grants exactly the role assignment actions setup_access_for_principal_id calls, apart from discovery-role.json', () => {
    const setup = uses.filter((u) => AZURE_ACCESS_SETUP_FILES.has(u.file));
    for (const use of setup) expect(Object.keys(AZURE_ACTIONS), `${use.file} calls ${use.operation}`).toContain(use.operation);
    expect(sorted(actionsOf(setup))).toEqual([
      'Microsoft.Authorization/roleAssignments/delete', 'Microsoft.Authorization/roleAssignments/read', 'Microsoft.Authorization/roleAssignments/write',
    ]);
    const role = JSON.parse(read('deploy/azure/access-setup-role.json')) as {Actions: string[]; DataActions: string[]};
    expect(sorted(role.Actions)).toEqual(sorted(actionsOf(setup)));
    expect(role.DataActions).toEqual([]);
    // Operators who do not opt in grant none of it.
    const discovery = JSON.parse(read('deploy/azure/discovery-role.json')) as {Actions: string[]};
    for (const action of role.Actions) expect(discovery.Actions).not.toContain(action);
  });

  it('access-setup-condition.txt lets the identity write and delete assignments of the AKS RBAC Reader role only', () => {
    const condition = read('deploy/azure/access-setup-condition.txt');
    expect(condition).toContain("ActionMatches{'Microsoft.Authorization/roleAssignments/write'}");
    expect(condition).toContain("ActionMatches{'Microsoft.Authorization/roleAssignments/delete'}");
    const guids = [...condition.matchAll(/GuidEquals \{([0-9a-f-]+)\}/g)].map((m) => m[1]);
    expect(guids).toEqual([AKS_RBAC_READER_ROLE_ID, AKS_RBAC_READER_ROLE_ID]);
  });
});
