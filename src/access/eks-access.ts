/**
 * What `configure eks` asks of a cluster, as data and as the commands an operator would run:
 * an access entry mapping the discovery principal to a Kubernetes group (or, on clusters
 * that authenticate through the aws-auth ConfigMap only, the aws-auth mapping and its
 * eksctl equivalent), and the RBAC objects for that group. Pure: no I/O.
 */
import {stringify} from 'yaml';
import {InputError} from '../core/errors.ts';

/** Authentication modes in which EKS accepts access entries. */
const ACCESS_ENTRY_MODES: ReadonlySet<string> = new Set(['API', 'API_AND_CONFIG_MAP']);

/** Whether a cluster in this authentication mode takes access entries (else only aws-auth). */
export function usesAccessEntries(authenticationMode: string): boolean {
  return ACCESS_ENTRY_MODES.has(authenticationMode);
}

/** A principal ARN as access entries and aws-auth want it, and a note when it was rewritten. */
export interface Principal {
  readonly arn: string;
  readonly kind: 'role' | 'user';
  readonly note?: string;
}

const PRINCIPAL = /^arn:(aws|aws-cn|aws-us-gov):(iam|sts)::(\d{12}):(role|user|assumed-role)\/(.+)$/;

/**
 * Validates `--principal-arn`. An assumed-role ARN (what `aws sts get-caller-identity` prints
 * inside a pod) becomes its role ARN, which is what EKS maps.
 */
export function parsePrincipalArn(text: string): Principal {
  const m = PRINCIPAL.exec(text);
  const [, partition, service, account, type, rest] = m ?? [];
  if (!m || !partition || !account || !type || !rest || (service === 'sts') !== (type === 'assumed-role')) {
    throw new InputError(
      `expected --principal-arn to be an IAM role or user ARN such as arn:aws:iam::111111111111:role/kube-discovery, got ${JSON.stringify(text)}`,
    );
  }
  if (type === 'assumed-role') {
    const role = rest.split('/')[0] ?? '';
    const arn = `arn:${partition}:iam::${account}:role/${role}`;
    return {arn, kind: 'role', note: `using the role ARN ${arn} for the assumed-role session ${text}`};
  }
  return {arn: text, kind: type === 'role' ? 'role' : 'user'};
}

/** Inputs of the commands and snippets below. */
export interface EksAccessRequest {
  readonly clusterName: string;
  readonly region: string;
  readonly principal: Principal;
  readonly group: string;
  /** Kubernetes user name in the aws-auth mapping. */
  readonly username?: string;
}

/** `aws eks create-access-entry ...` for the request. */
export function createAccessEntryCommand(r: EksAccessRequest): string {
  return shellCommand([
    'aws', 'eks', 'create-access-entry', '--region', r.region, '--cluster-name', r.clusterName,
    '--principal-arn', r.principal.arn, '--kubernetes-groups', r.group, '--type', 'STANDARD',
  ]);
}

/** `aws eks update-access-entry ...` that adds the group to an entry that has others. */
export function updateAccessEntryCommand(r: EksAccessRequest, existingGroups: readonly string[]): string {
  return shellCommand([
    'aws', 'eks', 'update-access-entry', '--region', r.region, '--cluster-name', r.clusterName,
    '--principal-arn', r.principal.arn, '--kubernetes-groups', ...new Set([...existingGroups, r.group]),
  ]);
}

/** The `mapRoles` (or `mapUsers`) item of the kube-system/aws-auth ConfigMap. */
export function awsAuthMapping(r: EksAccessRequest): {key: 'mapRoles' | 'mapUsers'; yaml: string} {
  const username = r.username ?? r.group;
  const arn = mappingArn(r.principal);
  const item = r.principal.kind === 'role' ? {rolearn: arn, username, groups: [r.group]} : {userarn: arn, username, groups: [r.group]};
  return {key: r.principal.kind === 'role' ? 'mapRoles' : 'mapUsers', yaml: stringify([item])};
}

/** The ARN aws-auth matches: a role's without its path, since the authenticator strips it from the session ARN. */
function mappingArn(principal: Principal): string {
  return principal.kind === 'role' ? principal.arn.replace(/:role\/(?:[^/]+\/)*([^/]+)$/, ':role/$1') : principal.arn;
}

/** `eksctl create iamidentitymapping ...`, the same mapping through eksctl. */
export function eksctlMappingCommand(r: EksAccessRequest): string {
  return shellCommand([
    'eksctl', 'create', 'iamidentitymapping', '--cluster', r.clusterName, '--region', r.region,
    '--arn', mappingArn(r.principal), '--username', r.username ?? r.group, '--group', r.group,
  ]);
}

/** `aws eks update-cluster-config ...` that enables access entries next to aws-auth. */
export function enableAccessEntriesCommand(r: Pick<EksAccessRequest, 'clusterName' | 'region'>): string {
  return shellCommand([
    'aws', 'eks', 'update-cluster-config', '--region', r.region, '--name', r.clusterName,
    '--access-config', 'authenticationMode=API_AND_CONFIG_MAP',
  ]);
}

/** Kubernetes group names EKS refuses in access entries and that RBAC reserves. */
export function checkGroupName(group: string): string {
  if (!/^[a-z0-9]([-a-z0-9.:]{0,61}[a-z0-9])?$/.test(group) || group.startsWith('system:') || group.startsWith('eks:')) {
    throw new InputError(`expected --group to be a Kubernetes group name not starting with system: or eks:, such as kube-discovery, got ${JSON.stringify(group)}`);
  }
  return group;
}

/** Joins arguments into a command line, quoting only what a POSIX shell would split or expand. */
export function shellCommand(args: readonly string[]): string {
  return args.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", `'"'"'`)}'`)).join(' ');
}
