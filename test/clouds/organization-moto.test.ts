/**
 * Organization-wide discovery against moto (an AWS emulator we did not write): the real SDK
 * builds an organization with nested OUs and member accounts, assumes a role into each member to
 * create its EKS clusters (moto scopes EKS by the account of the assumed role), then one matcher
 * runs through the real Discovery cycle.
 */
import {
  CreateAccountCommand,
  CreateOrganizationalUnitCommand,
  CreateOrganizationCommand,
  DescribeCreateAccountStatusCommand,
  ListRootsCommand,
  MoveAccountCommand,
  OrganizationsClient,
} from '@aws-sdk/client-organizations';
import {CreateClusterCommand, DeleteClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import {AssumeRoleCommand, STSClient} from '@aws-sdk/client-sts';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {setEnv} from '../helpers/env.ts';
import {describeWithMoto, startMoto, type Moto} from '../helpers/moto.ts';

const ROLE = 'kube-discovery';
const REGIONS = ['us-east-1', 'eu-west-1'];

describeWithMoto('organization matcher against moto', () => {
  let moto: Moto;
  let restoreEnv: () => void;
  let orgs: OrganizationsClient;
  let orgId = '';
  let root = '';
  const ou = {prod: '', prodEu: '', dev: ''};

  /** Credentials of the member's role: moto keeps EKS per account of the caller. */
  async function asMember(id: string) {
    const sts = new STSClient({region: 'us-east-1'});
    try {
      const c = (await sts.send(new AssumeRoleCommand({RoleArn: `arn:aws:iam::${id}:role/${ROLE}`, RoleSessionName: 'setup'}))).Credentials;
      return {accessKeyId: c?.AccessKeyId ?? '', secretAccessKey: c?.SecretAccessKey ?? '', sessionToken: c?.SessionToken ?? ''};
    } finally {
      sts.destroy();
    }
  }

  async function createAccount(name: string, parent: string): Promise<string> {
    const created = await orgs.send(new CreateAccountCommand({AccountName: name, Email: `${name}@example.com`}));
    const status = await orgs.send(new DescribeCreateAccountStatusCommand({CreateAccountRequestId: created.CreateAccountStatus?.Id ?? ''}));
    const id = status.CreateAccountStatus?.AccountId ?? '';
    await orgs.send(new MoveAccountCommand({AccountId: id, SourceParentId: root, DestinationParentId: parent}));
    // Clusters are created as the member itself: moto keeps EKS per account of the caller.
    const sts = new STSClient({region: 'us-east-1'});
    const assumed = await sts.send(new AssumeRoleCommand({RoleArn: `arn:aws:iam::${id}:role/${ROLE}`, RoleSessionName: 'setup'}));
    const c = assumed.Credentials;
    const credentials = {accessKeyId: c?.AccessKeyId ?? '', secretAccessKey: c?.SecretAccessKey ?? '', sessionToken: c?.SessionToken ?? ''};
    for (const region of REGIONS) {
      const eks = new EKSClient({region, credentials});
      await eks.send(new CreateClusterCommand({name: `${name}-${region}`, roleArn: `arn:aws:iam::${id}:role/eks`, resourcesVpcConfig: {subnetIds: ['subnet-1']}}));
      eks.destroy();
    }
    sts.destroy();
    return id;
  }

  beforeAll(async () => {
    moto = await startMoto();
    restoreEnv = setEnv({...moto.env, AWS_MAX_ATTEMPTS: '1'});
    orgs = new OrganizationsClient({region: 'us-east-1'});
    orgId = (await orgs.send(new CreateOrganizationCommand({FeatureSet: 'ALL'}))).Organization?.Id ?? '';
    root = (await orgs.send(new ListRootsCommand({}))).Roots?.[0]?.Id ?? '';
    const unit = async (name: string, parent: string) => (await orgs.send(new CreateOrganizationalUnitCommand({ParentId: parent, Name: name}))).OrganizationalUnit?.Id ?? '';
    ou['prod'] = await unit('prod', root);
    ou['prodEu'] = await unit('prod-eu', ou['prod']);
    ou['dev'] = await unit('dev', root);
  }, 60_000);

  afterAll(async () => {
    orgs?.destroy();
    restoreEnv?.();
    await moto?.stop();
  });

  it('finds every cluster of the members in included OUs (nested too), none of the excluded, and a joining account next cycle', async () => {
    const prod = await createAccount('prod1', ou['prod']);
    const prodEu = await createAccount('prodeu1', ou['prodEu']);
    const dev = await createAccount('dev1', ou['dev']);
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: org-moto
  aws:
    - types: [eks]
      regions: [${REGIONS.join(', ')}]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${orgId}, organizational_units: {include: ["*"], exclude: ["${ou['dev']}"]}}
storage: {type: memory}
`,
      'moto.yaml',
    );
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'org-moto', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve({accessKeyId: moto.env['AWS_ACCESS_KEY_ID'] ?? '', secretAccessKey: moto.env['AWS_SECRET_ACCESS_KEY'] ?? ''})});
    // Calls that went through the SDK's serialize step, by command: the organization path's short
    // ListClusters / GetResources calls (lean-read.ts) skip it once each region client made one.
    const serialized = new Map<string, number>();
    const countSerialized = (client: {middlewareStack: unknown}): void =>
      (client.middlewareStack as {add(mw: unknown, o: object): void}).add(
        (next: (a: unknown) => Promise<unknown>, context: {commandName?: string}) => (args: unknown) => {
          serialized.set(context.commandName ?? '', (serialized.get(context.commandName ?? '') ?? 0) + 1);
          return next(args);
        },
        {step: 'serialize', name: 'testSerializeCounter', override: true},
      );
    const discovery = new Discovery({config, clock: systemClock, aws: {credentialProvider: (role) => providers.provider(role), onClient: countSerialized}});
    const registrar = createRegistrar(backend, heartbeat, 'org-moto');
    // moto's cluster CA is not a base64 PEM: each cluster is registered unhealthy (invalid_ca) under
    // Teleport's name; what this checks is which clusters were registered, from which account.
    const seen = (report: {items: readonly {name: string; source: string; action: string}[]}) =>
      report.items.filter((i) => i.action === 'create' || i.action === 'unchanged' || i.action === 'update').map((i) => `${i.name}@${i.source}`).sort();
    const expected = (...accounts: [string, string][]) => accounts.flatMap(([name, id]) => REGIONS.map((r) => `${name}-${r}-eks-${id}@eks:${r}:${id}`)).sort();
    try {
      const first = await discovery.runCycle(registrar);
      expect(first.sources.filter((s) => !s.ok)).toEqual([]);
      // Every member of the included OUs, the management account (in the root) too, and nothing of dev.
      expect(first.sources.map((s) => s.account).sort()).toEqual([...new Set([prod, prodEu, '123456789012'])].sort().flatMap((a) => [a, a]));
      expect(seen(first)).toEqual(expected(['prod1', prod], ['prodeu1', prodEu]));
      expect(seen(first).some((n) => n.includes(dev))).toBe(false);

      const joined = await createAccount('prod2', ou['prod']);
      const second = await discovery.runCycle(registrar);
      expect(seen(second)).toEqual(expected(['prod1', prod], ['prodeu1', prodEu], ['prod2', joined]));

      // Steady state on the short path: moto's own answers read without the SDK's serde; a cluster
      // deleted in moto is deregistered (a good listing), every other one stays.
      const eks = new EKSClient({region: 'eu-west-1', credentials: await asMember(prodEu)});
      await eks.send(new DeleteClusterCommand({name: 'prodeu1-eu-west-1'}));
      eks.destroy();
      const sdkLists = serialized.get('ListClustersCommand') ?? 0;
      const third = await discovery.runCycle(registrar);
      expect(third.sources.filter((s) => !s.ok)).toEqual([]);
      expect(seen(third)).toEqual(expected(['prod1', prod], ['prodeu1', prodEu], ['prod2', joined]).filter((n) => !n.startsWith('prodeu1-eu-west-1')));
      expect(third.counts.delete).toBe(1);
      expect(serialized.get('ListClustersCommand')).toBe(sdkLists);
    } finally {
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  }, 60_000);

  it('an account that leaves the included OUs is kept by the first walk of a restarted discovery and deregistered by the second', async () => {
    const mover = await createAccount('mover1', ou['prod']);
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: org-moto-restart
  aws:
    - types: [eks]
      regions: [${REGIONS.join(', ')}]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${orgId}, organizational_units: {include: ["*"], exclude: ["${ou['dev']}"]}}
storage: {type: memory}
`,
      'moto-restart.yaml',
    );
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'org-moto-restart', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve({accessKeyId: moto.env['AWS_ACCESS_KEY_ID'] ?? '', secretAccessKey: moto.env['AWS_SECRET_ACCESS_KEY'] ?? ''})});
    // Each cycle by a new Discovery: a restart, a leader change or a `once` run.
    const replica = (): Discovery => new Discovery({config, clock: systemClock, aws: {credentialProvider: (role) => providers.provider(role)}});
    const registrar = createRegistrar(backend, heartbeat, 'org-moto-restart');
    const moverNames = async (): Promise<string[]> => (await registrar.current()).map((e) => e.metadata.name).filter((n) => n.endsWith(mover)).sort();
    const deleted = (report: {items: readonly {name: string; action: string}[]}): string[] => report.items.filter((i) => i.action === 'delete').map((i) => i.name).sort();
    try {
      await replica().runCycle(registrar);
      const registered = REGIONS.map((r) => `mover1-${r}-eks-${mover}`).sort();
      expect(await moverNames()).toEqual(registered);

      await orgs.send(new MoveAccountCommand({AccountId: mover, SourceParentId: ou['prod'], DestinationParentId: ou['dev']}));
      const first = await replica().runCycle(registrar);
      expect(deleted(first)).toEqual([]);
      expect(first.items.filter((i) => i.name.endsWith(mover)).map((i) => i.action)).toEqual(['stale', 'stale']);
      const second = await replica().runCycle(registrar);
      expect(deleted(second)).toEqual(registered);
      expect(await moverNames()).toEqual([]);
    } finally {
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  }, 60_000);
});
