/**
 * An AWS organization on the wire-level fake, and discovery of one organization matcher run in
 * process against it (Discovery, registrar, heartbeat, memory registry), for the tests that
 * walk an organization while its accounts move, change state or answer badly.
 */
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import type {Registrar} from '../../src/discovery/cycle.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeAwsWorld, FakeOrganization} from '../fakes/aws-fakes.ts';

/** A fake AWS world whose organization's management account signs in with `key`. */
export function organizationWorld(management: string, key: {readonly accessKeyId: string; readonly secretAccessKey: string}): {
  readonly world: FakeAwsWorld;
  readonly org: FakeOrganization;
  /** Adds a member account under `parent` whose role `role` trusts the management account. */
  addMember(account: string, parent: string, role: string): void;
} {
  const world = new FakeAwsWorld();
  world.addAccount(management, {accessKeys: [key]});
  const org = new FakeOrganization({managementAccount: management});
  world.organization = org;
  return {
    world,
    org,
    addMember(account, parent, role) {
      org.addAccount(account, {parent});
      world.addAccount(account, {roles: [{arn: `arn:aws:iam::${account}:role/${role}`, trust: [management]}]});
    },
  };
}

/** Discovery of one matcher over every OU of `orgId` in us-east-1, assuming `role` in each member. */
export interface OrgDiscovery {
  readonly discovery: Discovery;
  readonly registrar: Registrar;
  /** Names of the registered kube_servers, sorted. */
  names(): Promise<string[]>;
  stop(): Promise<void>;
}

type OrganizationOptions = NonNullable<NonNullable<ConstructorParameters<typeof Discovery>[0]['aws']>['organizations']>;

/** Starts an in-process discovery of one organization matcher (group `g`, memory registry). */
export async function startOrgDiscovery(options: {orgId: string; role: string; file: string; organizations: OrganizationOptions}): Promise<OrgDiscovery> {
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: g
  aws:
    - types: [eks]
      regions: [us-east-1]
      assume_role_name: ${options.role}
      organization: {organization_id: ${options.orgId}, organizational_units: {include: ["*"], exclude: []}}
storage: {type: memory}
`,
    options.file,
  );
  const backend = new MemoryBackend({clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  const discovery = new Discovery({config, clock: systemClock, aws: {organizations: options.organizations}});
  const registrar = createRegistrar(backend, heartbeat, 'g');
  return {
    discovery,
    registrar,
    names: async () => (await registrar.current()).map((s) => s.metadata.name).sort(),
    stop: async () => {
      await heartbeat.stop({deregister: false});
      await backend.close();
    },
  };
}
