/**
 * An organization on the wire-level AWS fake whose walk can be held: the tests of early listings
 * (src/clouds/early-listings.ts) hold the walk's account pages, watch which EKS listings the next
 * cycle starts meanwhile in the fake's request log, then let the walk finish.
 */
import {OrganizationsClient} from '@aws-sdk/client-organizations';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import {awsCloud} from '../../src/clouds/aws/cloud-module.ts';
import {azureCloud} from '../../src/clouds/azure/cloud-module.ts';
import {Clouds} from '../../src/clouds/cloud.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import type {AwsCredentialProvider} from '../../src/credentials/aws-credentials.ts';
import type {OrganizationsApi} from '../../src/clouds/aws/organization.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import type {FakeClock} from './fake-clock.ts';
import {ROUND_TRIP} from './wait.ts';

/** Holds the walk's ListAccountsForParent calls (before they are sent) until released. */
export interface WalkGate {
  hold(): void;
  release(): void;
  /** Calls waiting at the gate now. */
  held(): number;
}

/** A real Organizations client whose account pages wait at `gate` while it is held. */
function gatedClient(credentials: AwsCredentialProvider, gate: {closed: Promise<void> | undefined; waiting: number}): OrganizationsApi {
  const client = new OrganizationsClient({region: 'us-east-1', credentials, maxAttempts: 1});
  const send = client.send.bind(client) as (command: unknown, options?: unknown) => Promise<unknown>;
  const gated = async (command: {constructor: {name: string}}, options?: unknown): Promise<unknown> => {
    if (command.constructor.name === 'ListAccountsForParentCommand' && gate.closed) {
      gate.waiting++;
      try {
        await gate.closed;
      } finally {
        gate.waiting--;
      }
    }
    return send(command, options);
  };
  return {send: gated as unknown as OrganizationsApi['send']};
}

/** Discovery of one organization matcher (group `early`, memory registry) whose walk can be held. */
export interface EarlyHarness {
  readonly gate: WalkGate;
  cycle(signal?: AbortSignal): Promise<CycleReport>;
  names(): Promise<string[]>;
  /** The same registry and planner state, with another matcher config (a config reload keeping the process). */
  reconfigure(matcherYaml: string): void;
  close(): Promise<void>;
}

/** The `aws:` matcher of an organization, as YAML lines under `aws:`. */
export function orgMatcherYaml(options: {orgId: string; role: string; externalId?: string; regions: readonly string[]; include?: readonly string[]}): string {
  return `    - types: [eks]
      regions: [${options.regions.map((r) => JSON.stringify(r)).join(', ')}]
      assume_role_name: ${options.role}
${options.externalId ? `      external_id: ${options.externalId}\n` : ''}      organization: {organization_id: ${options.orgId}, organizational_units: {include: [${(options.include ?? ['*']).map((u) => JSON.stringify(u)).join(', ')}], exclude: []}}
`;
}

/** Starts discovery of `matcherYaml` against the fake the environment points at; credentials and region lists follow `clock`. */
export async function earlyHarness(
  clock: FakeClock,
  matcherYaml: string,
  key: {accessKeyId: string; secretAccessKey: string},
  options: {regionRefreshMs?: number; requestTimeoutMs?: number} = {},
): Promise<EarlyHarness> {
  const gateState: {closed: Promise<void> | undefined; waiting: number; open: () => void} = {closed: undefined, waiting: 0, open: () => undefined};
  const gate: WalkGate = {
    hold() {
      gateState.closed = new Promise<void>((resolve) => (gateState.open = resolve));
    },
    release() {
      gateState.closed = undefined;
      gateState.open();
    },
    held: () => gateState.waiting,
  };
  const backend = new MemoryBackend({clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'early', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  const registrar = createRegistrar(backend, heartbeat, 'early');
  const providers = new AwsCredentialProviders({env: process.env, clock, base: () => Promise.resolve(key)});
  // A reload builds a new Discovery; the AWS planner (last plans, credentials) is kept across it
  // here, so the tests that change a matcher see what the planner does with the last plan's listings.
  let organizationsClient: OrganizationsApi | undefined;
  const sources = new AwsSources({
    // Short only where a call is made to hang: a good call on a loaded machine can take seconds.
    requestTimeoutMs: options.requestTimeoutMs ?? ROUND_TRIP.timeout,
    credentialProvider: (role) => providers.provider(role),
    organizations: {organizationsTimeoutMs: 5000, clock, ...(options.regionRefreshMs === undefined ? {} : {regionRefreshMs: options.regionRefreshMs}), makeOrganizationsClient: (credentials) => (organizationsClient ??= gatedClient(credentials, gateState))},
  });
  const clouds = new Clouds([{...awsCloud, planner: (options) => ({plan: (context) => sources.plan(options.config.discovery_service.aws, context)})}, azureCloud]);
  const build = (yaml: string): Discovery =>
    new Discovery({
      config: parseConfig(`version: v1\ndiscovery_service:\n  discovery_group: early\n  aws:\n${yaml}storage: {type: memory}\n`, 'early.yaml'),
      clock: systemClock,
      clouds,
    });
  let discovery = build(matcherYaml);
  return {
    gate,
    cycle: (signal) => discovery.runCycle(registrar, signal),
    names: async () => (await registrar.current()).map((s) => s.metadata.name).sort(),
    reconfigure(yaml) {
      discovery = build(yaml);
    },
    close: async () => {
      gate.release();
      await heartbeat.stop({deregister: false});
      await backend.close();
    },
  };
}
