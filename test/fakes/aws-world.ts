/**
 * The mutable model behind the AWS fakes: accounts with access keys and roles, credentials
 * issued by the fake AssumeRole, and EKS clusters per (account, region). Tests and the cloud
 * simulator change it between cycles; the HTTP servers (aws-server.ts) and the EKS token
 * verifier (eks-token.ts) only read it, apart from AssumeRole issuing credentials and
 * CreateAccessEntry adding entries.
 */
import {createHash, randomBytes} from 'node:crypto';
import {systemClock, type Clock} from '../../src/core/clock.ts';
import type {FakeOrganization} from './organizations-api.ts';

/** EKS cluster states, as DescribeCluster reports them. */
export type EksClusterStatus = 'CREATING' | 'ACTIVE' | 'UPDATING' | 'DELETING' | 'FAILED' | 'PENDING';

/** EKS authentication modes (`accessConfig.authenticationMode`). */
export type EksAuthenticationMode = 'API' | 'API_AND_CONFIG_MAP' | 'CONFIG_MAP';

/** A long-lived access key; with `sessionToken` the key is only accepted together with that token. */
export interface FakeAccessKey {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  /** Caller ARN reported by GetCallerIdentity; defaults to `arn:<partition>:iam::<account>:user/fake-user`. */
  readonly arn?: string;
}

/** An IAM role that AssumeRole can hand out credentials for. */
export interface FakeRole {
  /** `arn:aws:iam::<account>:role/<name>`; its account must be the account it is added to. */
  readonly arn: string;
  /** When set, AssumeRole must pass exactly this ExternalId. */
  readonly externalId?: string;
  /** Account ids whose principals may assume the role. */
  readonly trust: readonly string[];
  /** Longest DurationSeconds accepted; AWS's default is one hour. */
  readonly maxSessionDurationSeconds?: number;
}

/** Who a set of credentials belongs to, as STS and the token verifier see it. */
export interface ResolvedCredentials {
  readonly kind: 'static' | 'assumed-role';
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  readonly account: string;
  /** Caller ARN as GetCallerIdentity reports it (user ARN or `assumed-role` ARN). */
  readonly arn: string;
  readonly userId: string;
  /** Epoch ms after which the credentials are refused; absent for static keys. */
  readonly expiresAt?: number;
}

/** An EKS access entry (CreateAccessEntry / DescribeAccessEntry). */
export interface FakeAccessEntry {
  readonly clusterName: string;
  readonly principalArn: string;
  readonly kubernetesGroups: readonly string[];
  readonly accessEntryArn: string;
  readonly createdAt: number;
  readonly modifiedAt: number;
  readonly tags: Readonly<Record<string, string>>;
  readonly username: string;
  readonly type: string;
  /** Associated access policies by policy ARN (AssociateAccessPolicy). */
  readonly accessPolicies: ReadonlyMap<string, FakeAssociatedPolicy>;
}

/** An access policy associated with an access entry. */
export interface FakeAssociatedPolicy {
  readonly policyArn: string;
  readonly accessScope: {readonly type: string; readonly namespaces: readonly string[]};
  readonly associatedAt: number;
  readonly modifiedAt: number;
}

/** An EKS cluster as the fake serves it. Times are epoch ms. */
export interface FakeEksCluster {
  readonly name: string;
  readonly account: string;
  readonly region: string;
  readonly arn: string;
  readonly status: EksClusterStatus;
  readonly tags: Readonly<Record<string, string>>;
  /** Absent while CREATING, as on real EKS. */
  readonly endpoint?: string;
  /** Base64 of the CA PEM; absent while CREATING. */
  readonly caData?: string;
  readonly version: string;
  readonly platformVersion: string;
  readonly authenticationMode: EksAuthenticationMode;
  readonly roleArn: string;
  readonly createdAt: number;
  readonly accessEntries: ReadonlyMap<string, FakeAccessEntry>;
}

/** What a test or the simulator passes to `addCluster`; everything but the name has a default. */
export interface FakeClusterInit {
  readonly name: string;
  readonly status?: EksClusterStatus;
  readonly tags?: Readonly<Record<string, string>>;
  readonly endpoint?: string;
  readonly caData?: string;
  readonly version?: string;
  readonly platformVersion?: string;
  readonly authenticationMode?: EksAuthenticationMode;
  readonly roleArn?: string;
  readonly createdAt?: number;
}

/** Fields `updateCluster` may change. */
export type FakeClusterPatch = Partial<Omit<FakeClusterInit, 'name'>>;

/** A placeholder CA (base64 PEM) for clusters whose CA no test cares about. */
export const PLACEHOLDER_CA_DATA = Buffer.from(
  '-----BEGIN CERTIFICATE-----\nZmFrZS1la3MtY2x1c3Rlci1jYQ==\n-----END CERTIFICATE-----\n',
).toString('base64');

interface AccountState {
  readonly id: string;
  readonly accessKeys: Map<string, FakeAccessKey>;
  readonly roles: Map<string, FakeRole>;
}

type MutableCluster = {-readonly [K in keyof FakeEksCluster]: FakeEksCluster[K]} & {
  accessEntries: Map<string, FakeAccessEntry>;
};

/** AWS partition of a region: `aws`, `aws-cn` or `aws-us-gov`. */
export function partitionOf(region: string): 'aws' | 'aws-cn' | 'aws-us-gov' {
  if (region.startsWith('cn-')) return 'aws-cn';
  if (region.startsWith('us-gov-')) return 'aws-us-gov';
  return 'aws';
}

/** Account id and role name of an IAM role ARN, or undefined when it is not one. */
export function parseRoleArn(arn: string): {partition: string; account: string; name: string} | undefined {
  const m = /^arn:(aws|aws-cn|aws-us-gov):iam::(\d{12}):role\/(?:[\w+=,.@-]+\/)*([\w+=,.@-]+)$/.exec(arn);
  if (!m?.[1] || !m[2] || !m[3]) return undefined;
  return {partition: m[1], account: m[2], name: m[3]};
}

/** A stable IAM-style unique id (`AIDA…`, `AROA…`) derived from an ARN. */
function uniqueId(prefix: string, arn: string): string {
  const digest = createHash('sha256').update(arn).digest();
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let out = prefix;
  for (let i = 0; out.length < 21; i++) out += alphabet[(digest[i] ?? 0) % 32];
  return out;
}

function randomAlnum(length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  return Array.from(randomBytes(length), (b) => alphabet[b % alphabet.length]).join('');
}

/** The world the AWS fakes serve; see the file comment. */
export class FakeAwsWorld {
  /** Decides credential expiry, token age, AssumeRole expirations and the servers' latency. */
  readonly clock: Clock;
  /** The AWS organization Organizations answers about (organizations-api.ts); none by default. */
  organization: FakeOrganization | undefined;
  /** Regions each account has enabled, for the Account API's ListRegions (account-api.ts); absent = the default regions. */
  readonly enabledRegions = new Map<string, readonly string[]>();
  readonly #accounts = new Map<string, AccountState>();
  readonly #issued = new Map<string, ResolvedCredentials>();
  readonly #clusters = new Map<string, Map<string, MutableCluster>>();

  constructor(options: {clock?: Clock} = {}) {
    this.clock = options.clock ?? systemClock;
  }

  /** Current time of the world, epoch ms. */
  now(): number {
    return this.clock.now();
  }

  /** Adds (or extends) an account with access keys and roles. */
  addAccount(accountId: string, init: {accessKeys?: readonly FakeAccessKey[]; roles?: readonly FakeRole[]} = {}): void {
    if (!/^\d{12}$/.test(accountId)) throw new Error(`expected a 12-digit account id, got ${JSON.stringify(accountId)}`);
    if (!this.#accounts.has(accountId)) {
      this.#accounts.set(accountId, {id: accountId, accessKeys: new Map(), roles: new Map()});
    }
    for (const key of init.accessKeys ?? []) this.addAccessKey(accountId, key);
    for (const role of init.roles ?? []) this.addRole(role);
  }

  /** Adds a static access key to an existing account. */
  addAccessKey(accountId: string, key: FakeAccessKey): void {
    const account = this.#account(accountId);
    if (this.lookupAccessKey(key.accessKeyId)) throw new Error(`access key ${key.accessKeyId} already exists`);
    account.accessKeys.set(key.accessKeyId, key);
  }

  /** Removes a static access key; requests signed with it then fail as an unknown key. */
  removeAccessKey(accessKeyId: string): boolean {
    for (const account of this.#accounts.values()) if (account.accessKeys.delete(accessKeyId)) return true;
    return false;
  }

  /** Adds a role to the account named in its ARN (the account must exist). */
  addRole(role: FakeRole): void {
    const parsed = parseRoleArn(role.arn);
    if (!parsed) throw new Error(`expected an IAM role ARN (arn:aws:iam::<account>:role/<name>), got ${role.arn}`);
    this.#account(parsed.account).roles.set(role.arn, role);
  }

  /** The role with this ARN, if any account has it. */
  role(arn: string): FakeRole | undefined {
    const parsed = parseRoleArn(arn);
    return parsed ? this.#accounts.get(parsed.account)?.roles.get(arn) : undefined;
  }

  /** Static or issued credentials for an access key id; expiry is the caller's to check. */
  lookupAccessKey(accessKeyId: string): ResolvedCredentials | undefined {
    const issued = this.#issued.get(accessKeyId);
    if (issued) return issued;
    for (const account of this.#accounts.values()) {
      const key = account.accessKeys.get(accessKeyId);
      if (!key) continue;
      const arn = key.arn ?? `arn:aws:iam::${account.id}:user/fake-user`;
      return {
        kind: 'static',
        accessKeyId: key.accessKeyId,
        secretAccessKey: key.secretAccessKey,
        ...(key.sessionToken === undefined ? {} : {sessionToken: key.sessionToken}),
        account: account.id,
        arn,
        userId: uniqueId('AIDA', arn),
      };
    }
    return undefined;
  }

  /** Issues temporary credentials for a role (what AssumeRole returns), valid for `durationSeconds`. */
  issueRoleCredentials(roleArn: string, sessionName: string, durationSeconds: number): ResolvedCredentials {
    const parsed = parseRoleArn(roleArn);
    if (!parsed) throw new Error(`expected an IAM role ARN, got ${roleArn}`);
    const creds: ResolvedCredentials = {
      kind: 'assumed-role',
      accessKeyId: `ASIA${randomAlnum(16)}`,
      secretAccessKey: randomBytes(30).toString('base64'),
      sessionToken: `FwoGZXIvYXdzE${randomBytes(96).toString('base64')}`,
      account: parsed.account,
      arn: `arn:${parsed.partition}:sts::${parsed.account}:assumed-role/${parsed.name}/${sessionName}`,
      userId: `${uniqueId('AROA', roleArn)}:${sessionName}`,
      expiresAt: this.now() + durationSeconds * 1000,
    };
    this.#issued.set(creds.accessKeyId, creds);
    return creds;
  }

  /** Every set of temporary credentials AssumeRole handed out (tests check none of them leaks). */
  issuedCredentials(): ResolvedCredentials[] {
    return [...this.#issued.values()];
  }

  /** Adds a cluster; a CREATING cluster gets no endpoint or CA unless given, like real EKS. */
  addCluster(accountId: string, region: string, init: FakeClusterInit): FakeEksCluster {
    this.#account(accountId);
    const clusters = this.#regionClusters(accountId, region, true);
    if (clusters.has(init.name)) throw new Error(`cluster ${init.name} already exists in ${accountId}/${region}`);
    const status = init.status ?? 'ACTIVE';
    const partition = partitionOf(region);
    const dnsSuffix = partition === 'aws-cn' ? 'amazonaws.com.cn' : 'amazonaws.com';
    const id = createHash('sha256').update(`${accountId}/${region}/${init.name}`).digest('hex').slice(0, 32).toUpperCase();
    const ready = status !== 'CREATING';
    const endpoint = init.endpoint ?? (ready ? `https://${id}.gr7.${region}.eks.${dnsSuffix}` : undefined);
    const caData = init.caData ?? (ready ? PLACEHOLDER_CA_DATA : undefined);
    const cluster: MutableCluster = {
      name: init.name,
      account: accountId,
      region,
      arn: `arn:${partition}:eks:${region}:${accountId}:cluster/${init.name}`,
      status,
      tags: {...init.tags},
      ...(endpoint === undefined ? {} : {endpoint}),
      ...(caData === undefined ? {} : {caData}),
      version: init.version ?? '1.31',
      platformVersion: init.platformVersion ?? 'eks.12',
      authenticationMode: init.authenticationMode ?? 'API_AND_CONFIG_MAP',
      roleArn: init.roleArn ?? `arn:${partition}:iam::${accountId}:role/eks-cluster-role`,
      createdAt: init.createdAt ?? this.now(),
      accessEntries: new Map(),
    };
    clusters.set(init.name, cluster);
    return cluster;
  }

  /** Removes a cluster; returns whether it existed. */
  removeCluster(accountId: string, region: string, name: string): boolean {
    return this.#regionClusters(accountId, region, false)?.delete(name) ?? false;
  }

  /** Replaces a cluster's tags. */
  retagCluster(accountId: string, region: string, name: string, tags: Readonly<Record<string, string>>): FakeEksCluster {
    return this.updateCluster(accountId, region, name, {tags});
  }

  /** Changes fields of an existing cluster (status, tags, endpoint, CA, version, auth mode ...). */
  updateCluster(accountId: string, region: string, name: string, patch: FakeClusterPatch): FakeEksCluster {
    const cluster = this.#mutableCluster(accountId, region, name);
    Object.assign(cluster, patch.tags ? {...patch, tags: {...patch.tags}} : patch);
    return cluster;
  }

  /** One cluster, or undefined. */
  cluster(accountId: string, region: string, name: string): FakeEksCluster | undefined {
    return this.#regionClusters(accountId, region, false)?.get(name);
  }

  /** The clusters of one (account, region), sorted by name (the order ListClusters pages through). */
  clusters(accountId: string, region: string): FakeEksCluster[] {
    return [...(this.#regionClusters(accountId, region, false)?.values() ?? [])].sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
  }

  /** Adds an access entry to a cluster; throws if the principal already has one. */
  addAccessEntry(
    accountId: string,
    region: string,
    clusterName: string,
    entry: {principalArn: string; kubernetesGroups?: readonly string[]; type?: string; username?: string; tags?: Readonly<Record<string, string>>},
  ): FakeAccessEntry {
    const cluster = this.#mutableCluster(accountId, region, clusterName);
    if (cluster.accessEntries.has(entry.principalArn)) {
      throw new Error(`access entry for ${entry.principalArn} already exists on ${clusterName}`);
    }
    const role = parseRoleArn(entry.principalArn);
    const now = this.now();
    const created: FakeAccessEntry = {
      clusterName,
      principalArn: entry.principalArn,
      kubernetesGroups: [...(entry.kubernetesGroups ?? [])],
      accessEntryArn: `arn:${partitionOf(region)}:eks:${region}:${accountId}:access-entry/${clusterName}/${
        role ? `role/${role.account}/${role.name}` : 'user'
      }/${createHash('sha256').update(entry.principalArn).digest('hex').slice(0, 12)}`,
      createdAt: now,
      modifiedAt: now,
      tags: {...entry.tags},
      // EKS's default username for a role maps every session of it, as in its docs.
      username:
        entry.username ?? (role ? `arn:${role.partition}:sts::${role.account}:assumed-role/${role.name}/{{SessionName}}` : entry.principalArn),
      type: entry.type ?? 'STANDARD',
      accessPolicies: new Map(),
    };
    cluster.accessEntries.set(entry.principalArn, created);
    return created;
  }

  /** Deletes an access entry (and its policy associations); returns whether it existed. */
  removeAccessEntry(accountId: string, region: string, clusterName: string, principalArn: string): boolean {
    return this.#mutableCluster(accountId, region, clusterName).accessEntries.delete(principalArn);
  }

  /** Associates (or re-scopes) an access policy with an existing entry. */
  associateAccessPolicy(
    accountId: string,
    region: string,
    clusterName: string,
    principalArn: string,
    policy: {policyArn: string; accessScope?: {type: string; namespaces?: readonly string[]}},
  ): FakeAssociatedPolicy {
    const entry = this.#mutableCluster(accountId, region, clusterName).accessEntries.get(principalArn);
    if (!entry) throw new Error(`no access entry for ${principalArn} on ${clusterName}`);
    const policies = entry.accessPolicies as Map<string, FakeAssociatedPolicy>;
    const now = this.now();
    const associated: FakeAssociatedPolicy = {
      policyArn: policy.policyArn,
      accessScope: {type: policy.accessScope?.type ?? 'cluster', namespaces: [...(policy.accessScope?.namespaces ?? [])]},
      associatedAt: policies.get(policy.policyArn)?.associatedAt ?? now,
      modifiedAt: now,
    };
    policies.set(policy.policyArn, associated);
    return associated;
  }

  /** Removes a policy association; returns whether it existed. */
  disassociateAccessPolicy(accountId: string, region: string, clusterName: string, principalArn: string, policyArn: string): boolean {
    const entry = this.#mutableCluster(accountId, region, clusterName).accessEntries.get(principalArn);
    return (entry?.accessPolicies as Map<string, FakeAssociatedPolicy> | undefined)?.delete(policyArn) ?? false;
  }

  #account(accountId: string): AccountState {
    const account = this.#accounts.get(accountId);
    if (!account) throw new Error(`account ${accountId} does not exist in the fake world; call addAccount first`);
    return account;
  }

  #regionClusters(accountId: string, region: string, create: true): Map<string, MutableCluster>;
  #regionClusters(accountId: string, region: string, create: false): Map<string, MutableCluster> | undefined;
  #regionClusters(accountId: string, region: string, create: boolean): Map<string, MutableCluster> | undefined {
    const key = `${accountId}/${region}`;
    let clusters = this.#clusters.get(key);
    if (!clusters && create) {
      clusters = new Map();
      this.#clusters.set(key, clusters);
    }
    return clusters;
  }

  #mutableCluster(accountId: string, region: string, name: string): MutableCluster {
    const cluster = this.#regionClusters(accountId, region, false)?.get(name);
    if (!cluster) throw new Error(`cluster ${name} does not exist in ${accountId}/${region}`);
    return cluster;
  }
}
