/**
 * The set-up the service tests share: a fake AWS world with one account and its access key, the
 * process environment pointing the SDK at the fake with that key (one attempt per call), and a
 * temporary directory for registries and config files. `close()` undoes all three. Tests that
 * spawn `kube-discovery start` give each process `childEnv()` instead of touching process.env.
 */
import {mkdtemp, rm} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {FakeAwsWorld, startFakeAws, type FakeAws, type FakeAwsOptions} from '../fakes/aws-fakes.ts';
import {setEnv} from './env.ts';

/** An access key of the account (a session token and an ARN when the test needs them). */
export interface ServiceTestKey {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  readonly arn?: string;
}

/** Options of {@link startAwsServiceWorld}. */
export interface AwsServiceWorldOptions extends Omit<FakeAwsOptions, 'world'> {
  readonly key: ServiceTestKey;
  /** More keys of the same account (one per spawned replica, so the fake can tell who called). */
  readonly extraKeys?: readonly ServiceTestKey[];
  /** Point process.env at the fake (in-process services). Default true; false for tests that only spawn processes. */
  readonly setProcessEnv?: boolean;
  /** Default 111111111111. */
  readonly account?: string;
  /** Prefix of the temporary directory's name. Default `kd-svc-`. */
  readonly tmpPrefix?: string;
  /** More environment, on top of the fake's endpoints and the key. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Adds accounts, roles and clusters before the fake starts. */
  readonly populate?: (world: FakeAwsWorld) => void;
}

/** A running fake AWS world, the environment it needs, and a temporary directory. */
export interface AwsServiceWorld {
  readonly world: FakeAwsWorld;
  readonly fake: FakeAws;
  readonly account: string;
  readonly dir: string;
  /** A path inside the temporary directory. */
  file(name: string): string;
  /** The whole environment of a spawned CLI process: PATH, the fake's endpoints, `key` and no other credential source. */
  childEnv(extra?: Readonly<Record<string, string | undefined>>, key?: ServiceTestKey): Record<string, string | undefined>;
  /** Restores the environment, stops the fake and removes the directory. */
  close(): Promise<void>;
}

/** Starts the fake, sets the environment and makes the directory. */
export async function startAwsServiceWorld(options: AwsServiceWorldOptions): Promise<AwsServiceWorld> {
  const {key, extraKeys, setProcessEnv, populate, tmpPrefix, env, account: accountOption, ...fakeOptions} = options;
  const account = accountOption ?? '111111111111';
  const world = new FakeAwsWorld();
  world.addAccount(account, {accessKeys: [key, ...(extraKeys ?? [])]});
  populate?.(world);
  const fake = await startFakeAws({world, ...fakeOptions});
  const restoreEnv =
    setProcessEnv === false
      ? () => undefined
      : setEnv({
          ...fake.env,
          AWS_ACCESS_KEY_ID: key.accessKeyId,
          AWS_SECRET_ACCESS_KEY: key.secretAccessKey,
          ...(key.sessionToken ? {AWS_SESSION_TOKEN: key.sessionToken} : {}),
          AWS_MAX_ATTEMPTS: '1',
          ...env,
        });
  const dir = await mkdtemp(path.join(os.tmpdir(), tmpPrefix ?? 'kd-svc-'));
  return {
    world,
    fake,
    account,
    dir,
    file: (name) => path.join(dir, name),
    childEnv: (extra = {}, signer = key) => ({
      PATH: process.env['PATH'],
      ...fake.env,
      AWS_ACCESS_KEY_ID: signer.accessKeyId,
      AWS_SECRET_ACCESS_KEY: signer.secretAccessKey,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: '/nonexistent',
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
      ...extra,
    }),
    async close() {
      restoreEnv();
      await fake.close();
      await rm(dir, {recursive: true, force: true});
    },
  };
}
