/**
 * `kube-discovery configure eks|aks ...`: grants the discovery identity access to one
 * cluster (the RFD's `teleport kube configure`). Prints what to do; `configure eks --apply`
 * does it: the EKS access entry (or, for aws-auth-only clusters, prints the mapping to add)
 * and the ClusterRole/ClusterRoleBinding, written through the cluster's API with an EKS token
 * of the identity running the command. Idempotent: a second run changes nothing and says so.
 */
import {oneLine} from './common.ts';
import {aksAccessInstructions, checkGuid} from '../access/aks-access.ts';
import {
  awsAuthMapping,
  checkGroupName,
  createAccessEntryCommand,
  eksctlMappingCommand,
  enableAccessEntriesCommand,
  parsePrincipalArn,
  updateAccessEntryCommand,
  usesAccessEntries,
  type EksAccessRequest,
} from '../access/eks-access.ts';
import {applyRbacObject, describe, type ApplyOutcome} from '../access/kube-apply.ts';
import {DEFAULT_RBAC_NAME, discoveryClusterRole, discoveryClusterRoleBinding, rbacYaml, type RbacObject} from '../access/rbac.ts';
import {createEksAccessApi, type EksAccessApi, type EksClusterAccess} from '../clouds/aws/access-entries.ts';
import {systemClock, type Clock} from '../core/clock.ts';
import {InputError} from '../core/errors.ts';
import {AwsCredentialProviders, type AwsCredentialProvider} from '../credentials/aws-credentials.ts';
import {mintEksToken} from '../credentials/eks-token.ts';
import {partitionOf} from '../credentials/sts-endpoint.ts';
import type {CliIo, Command} from './io.ts';
import {flagsOf} from './flags.ts';

const USAGE = `usage: kube-discovery configure eks --cluster-name NAME --region REGION --principal-arn ARN
                                    [--group kube-discovery] [--apply] [--role-arn ARN [--external-id ID]]
       kube-discovery configure aks --subscription ID --resource-group GROUP --name NAME --principal-id OBJECT_ID
Grants the discovery identity (--principal-arn / --principal-id) what it needs in one cluster.
Without --apply it only prints the changes. --role-arn/--external-id: the role configure itself
assumes to make them (it needs deploy/aws/configure-policy.json and cluster-admin in the cluster).
`;

/** Injected dependencies of the configure command; only tests change them. */
export interface ConfigureDeps {
  readonly clock?: Clock;
}

type Sub = (argv: readonly string[], io: CliIo, clock: Clock) => Promise<number>;

/** Builds the configure command. */
export function configureCommand(deps: ConfigureDeps = {}): Command {
  const clock = deps.clock ?? systemClock;
  const subs: Readonly<Record<string, Sub>> = {eks: configureEks, aks: configureAks};
  return async (argv, io) => {
    const [cloud, ...rest] = argv;
    if (cloud === undefined || cloud === '-h' || cloud === '--help' || cloud === 'help' || rest.includes('-h') || rest.includes('--help')) {
      (cloud === undefined ? io.stderr : io.stdout)(USAGE);
      return cloud === undefined ? 2 : 0;
    }
    const sub = Object.hasOwn(subs, cloud) ? subs[cloud] : undefined;
    if (!sub) {
      io.stderr(`kube-discovery configure: expected one of ${Object.keys(subs).join(', ')}, got ${JSON.stringify(cloud)}\n${USAGE}`);
      return 2;
    }
    try {
      return await sub(rest, io, clock);
    } catch (error) {
      io.stderr(`kube-discovery configure ${cloud}: ${oneLine(error, io)}\n`);
      return error instanceof InputError ? 2 : 1;
    }
  };
}

/** `kube-discovery configure ...` with the real clock. */
export const runConfigure: Command = configureCommand();

// The SDK warns on the console about e.g. conflicting credential sources; our output stays ours.
const quietLogger = {debug() {}, info() {}, warn() {}, error() {}};

async function configureEks(argv: readonly string[], io: CliIo, clock: Clock): Promise<number> {
  const {values} = flagsOf(argv, {
    'cluster-name': {type: 'string'},
    region: {type: 'string'},
    'principal-arn': {type: 'string'},
    group: {type: 'string'},
    apply: {type: 'boolean'},
    'role-arn': {type: 'string'},
    'external-id': {type: 'string'},
  });
  const clusterName = required(values, 'cluster-name', 'NAME');
  const region = stringValue(values['region']) ?? io.env['AWS_REGION'] ?? io.env['AWS_DEFAULT_REGION'];
  if (!region) throw new InputError('expected --region REGION (or AWS_REGION), got none');
  partitionOf(region);
  const principal = parsePrincipalArn(required(values, 'principal-arn', 'ARN'));
  const group = checkGroupName(stringValue(values['group']) ?? DEFAULT_RBAC_NAME);
  const roleArn = stringValue(values['role-arn']);
  const externalId = stringValue(values['external-id']);
  if (externalId && !roleArn) throw new InputError('expected --role-arn with --external-id, got only --external-id');
  const apply = values['apply'] === true;
  if (principal.note) io.stderr(`kube-discovery configure eks: ${principal.note}\n`);

  const providers = new AwsCredentialProviders({env: io.env, clock, logger: quietLogger});
  const credentials = providers.provider({region, ...(roleArn ? {roleArn} : {}), ...(externalId ? {externalId} : {})});
  const api = createEksAccessApi({region, credentials, env: io.env});
  try {
    const cluster = await api.describeCluster(clusterName);
    const request: EksAccessRequest = {clusterName, region, principal, group};
    const rbac: RbacObject[] = [discoveryClusterRole(DEFAULT_RBAC_NAME), discoveryClusterRoleBinding({kind: 'Group', name: group}, DEFAULT_RBAC_NAME)];
    if (!apply) {
      io.stdout(eksPlan(cluster, request, rbac));
      return 0;
    }
    return await applyEks({api, cluster, request, rbac, io, clock, region, credentials});
  } finally {
    api.close();
  }
}

/** The printed plan: the access entry command or the aws-auth mapping, then the RBAC YAML. */
function eksPlan(cluster: EksClusterAccess, request: EksAccessRequest, rbac: readonly RbacObject[]): string {
  const lines = [
    `# kube-discovery access to EKS cluster ${cluster.name} (${request.region}), authentication mode ${cluster.authenticationMode}.`,
    '# Nothing was changed. Run again with --apply to make these changes, or make them yourself:',
    '',
  ];
  if (usesAccessEntries(cluster.authenticationMode)) {
    lines.push(`# 1. Access entry mapping ${request.principal.arn} to the Kubernetes group ${request.group}:`, createAccessEntryCommand(request));
  } else {
    lines.push(...awsAuthInstructions(request, '1. '));
  }
  lines.push('', `# 2. RBAC for the group ${request.group} (kubectl apply -f -, as a cluster admin):`, rbacYaml(rbac).trimEnd(), '');
  return lines.join('\n');
}

function awsAuthInstructions(request: EksAccessRequest, number: string): string[] {
  const mapping = awsAuthMapping(request);
  return [
    `# ${number}The cluster authenticates through the aws-auth ConfigMap only (mode CONFIG_MAP), so it has no access entries.`,
    `#    Add this item to data.${mapping.key} of kube-system/aws-auth (kubectl edit -n kube-system configmap aws-auth):`,
    mapping.yaml.trimEnd(),
    '#    or, with eksctl:',
    eksctlMappingCommand(request),
    '#    or switch the cluster to access entries and run configure again:',
    enableAccessEntriesCommand(request),
  ];
}

interface ApplyContext {
  readonly api: EksAccessApi;
  readonly cluster: EksClusterAccess;
  readonly request: EksAccessRequest;
  readonly rbac: readonly RbacObject[];
  readonly io: CliIo;
  readonly clock: Clock;
  readonly region: string;
  readonly credentials: AwsCredentialProvider;
}

async function applyEks(ctx: ApplyContext): Promise<number> {
  const {api, cluster, request, io} = ctx;
  // Checked first, so a cluster that is still being created is not left half-configured.
  if (!cluster.endpoint || !cluster.caPem) {
    throw new Error(`cluster ${cluster.name} has no API endpoint or CA yet (status ${cluster.status}); run configure again once it is ACTIVE`);
  }
  const say = (line: string): void => io.stdout(`${line}\n`);
  say(`EKS cluster ${cluster.name} (${ctx.region}), authentication mode ${cluster.authenticationMode}:`);
  let changes = 0;
  let problems = 0;
  let manual = false;

  const entryLabel = `access entry ${request.principal.arn}`;
  if (usesAccessEntries(cluster.authenticationMode)) {
    const existing = await api.describeAccessEntry(cluster.name, request.principal.arn);
    if (!existing) {
      await api.createAccessEntry(cluster.name, request.principal.arn, [request.group]);
      changes += 1;
      say(`  ${entryLabel}: created (kubernetes groups: ${request.group})`);
    } else if (existing.kubernetesGroups.includes(request.group)) {
      say(`  ${entryLabel}: unchanged (kubernetes groups: ${existing.kubernetesGroups.join(', ')})`);
    } else {
      // Someone else's entry: adding a group is theirs to decide, so say exactly how.
      problems += 1;
      const groups = existing.kubernetesGroups.length > 0 ? existing.kubernetesGroups.join(', ') : 'none';
      say(`  ${entryLabel}: exists without the group ${request.group} (kubernetes groups: ${groups}); not changed. Add the group with:`);
      say(`    ${updateAccessEntryCommand(request, existing.kubernetesGroups)}`);
    }
  } else {
    manual = true;
    say(`  ${entryLabel}: skipped, the cluster has no access entries (mode ${cluster.authenticationMode})`);
  }

  const {token} = await mintEksToken({clusterName: cluster.name, region: ctx.region, credentials: await ctx.credentials(), clock: ctx.clock, env: io.env});
  const target = {server: cluster.endpoint, caPem: cluster.caPem, token};
  for (const object of ctx.rbac) {
    const outcome: ApplyOutcome = await applyRbacObject(target, object);
    if (outcome !== 'unchanged') changes += 1;
    say(`  ${describe(object)}: ${outcome}`);
  }

  if (manual) {
    say('');
    say(awsAuthInstructions(request, '').join('\n'));
  }
  say(
    changes === 0 && problems === 0 && !manual
      ? `Nothing changed: cluster ${cluster.name} is already configured.`
      : `${changes === 0 ? 'Nothing changed' : `Applied ${changes} change${changes === 1 ? '' : 's'}`}` +
          `${manual ? '; the aws-auth mapping above is left to you' : ''}${problems > 0 ? '; the access entry above needs your attention' : ''}.`,
  );
  return problems > 0 ? 1 : 0;
}

async function configureAks(argv: readonly string[], io: CliIo): Promise<number> {
  const {values} = flagsOf(argv, {
    subscription: {type: 'string'},
    'resource-group': {type: 'string'},
    name: {type: 'string'},
    'principal-id': {type: 'string'},
    apply: {type: 'boolean'},
  });
  if (values['apply'] === true) {
    throw new InputError('configure aks --apply is not supported; run the printed az and kubectl commands as an administrator');
  }
  const resourceGroup = required(values, 'resource-group', 'GROUP');
  if (!/^[-\w._()]{1,90}$/u.test(resourceGroup)) throw new InputError(`expected --resource-group to be a resource group name, got ${JSON.stringify(resourceGroup)}`);
  const name = required(values, 'name', 'NAME');
  if (!/^[A-Za-z0-9][-_A-Za-z0-9]{0,62}$/.test(name)) throw new InputError(`expected --name to be an AKS cluster name, got ${JSON.stringify(name)}`);
  io.stdout(
    aksAccessInstructions({
      subscription: checkGuid('--subscription', required(values, 'subscription', 'ID')),
      resourceGroup,
      name,
      principalId: checkGuid('--principal-id', required(values, 'principal-id', 'OBJECT_ID')),
      rbacName: DEFAULT_RBAC_NAME,
    }),
  );
  return 0;
}

function required(values: Record<string, unknown>, flag: string, placeholder: string): string {
  const value = stringValue(values[flag]);
  if (value === undefined) throw new InputError(`expected --${flag} ${placeholder}, got none`);
  return value;
}

function stringValue(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

