/**
 * The running service for end-to-end EKS attacks: Discovery, registrar and heartbeat on a real
 * SQLite registry, the real EKS client of one single-account matcher (`tags: {env: prod}`, one
 * region) on its short path, against the wire-level fake behind the fault proxy. The world holds
 * a1, a2 (named `payments` by its TeleportKubernetesName tag) and b1, registered as {@link NAMES}.
 */
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import type {Registrar} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {awsClassifier, startFaultProxy, type FaultProxy} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';

export const ACCOUNT = '111111111111';
export const REGION = 'us-east-1';
/** The entries a clean cycle registers, sorted. */
export const NAMES = ['a1-eks-us-east-1-111111111111', 'b1-eks-us-east-1-111111111111', 'payments'];

/** A started service; `close` stops and removes everything. */
export interface EksService {
  readonly fake: FakeAws;
  readonly proxy: FaultProxy;
  readonly registrar: Registrar;
  readonly discovery: Discovery;
  /** The group's entries, by name, with whether each is stale. */
  entries(): Promise<{name: string; stale: boolean}[]>;
  close(): Promise<void>;
}

/** Starts the service; `refreshInterval` is the config's `refresh_interval` (unset: the default, 1 h). */
export async function startEksService(options: {readonly key: {accessKeyId: string; secretAccessKey: string}; readonly tmpPrefix: string; readonly refreshInterval?: string}): Promise<EksService> {
  const {key} = options;
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [key]});
  world.addCluster(ACCOUNT, REGION, {name: 'a1', tags: {env: 'prod'}});
  world.addCluster(ACCOUNT, REGION, {name: 'a2', tags: {env: 'prod', TeleportKubernetesName: 'payments'}});
  world.addCluster(ACCOUNT, REGION, {name: 'b1', tags: {env: 'prod'}});
  const fake = await startFakeAws({world});
  const proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  const viaProxy = Object.fromEntries(Object.entries(fake.env).map(([k, v]) => [k, v === fake.url ? proxy.url : v]));
  const restoreEnv = setEnv({...viaProxy, AWS_MAX_ATTEMPTS: '1', AWS_RETRY_MODE: 'standard', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: REGION});
  const dir = mkdtempSync(path.join(tmpdir(), options.tmpPrefix));
  const backend = await SqliteBackend.open({path: path.join(dir, 'registry.db'), clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: g1
${options.refreshInterval === undefined ? '' : `  refresh_interval: ${options.refreshInterval}\n`}  aws:
    - types: [eks]
      regions: [${REGION}]
      tags: {env: prod}
storage: {type: sqlite, path: ${path.join(dir, 'registry.db')}}
`,
    `${options.tmpPrefix}config.yaml`,
  );
  const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve(key)});
  const discovery = new Discovery({config, clock: systemClock, aws: {credentialProvider: (role) => providers.provider(role), requestTimeoutMs: 2_000}});
  const registrar = createRegistrar(backend, heartbeat, 'g1');
  return {
    fake,
    proxy,
    registrar,
    discovery,
    entries: async () => (await registrar.current()).map((s) => ({name: s.metadata.name, stale: s.status?.stale === true})).sort((a, b) => a.name.localeCompare(b.name)),
    close: async () => {
      await heartbeat.stop({deregister: false});
      await backend.close();
      restoreEnv();
      await proxy.close();
      await fake.close();
      rmSync(dir, {recursive: true, force: true});
    },
  };
}
