/**
 * The wire-level AWS fake behind the fault proxy, for tests that spoil single answers: one
 * account whose access key is `key`, holding `clusters` in one region. Point clients at
 * `proxy.url`; set `proxy.fault` per test.
 */
import {FakeAwsWorld, startFakeAws, type FakeAws, type FakeClusterInit} from './aws-fakes.ts';
import {awsClassifier, startFaultProxy, type FaultProxy} from './faults.ts';

/** A started fake and its proxy; `close` stops both. */
export interface ProxiedAws {
  readonly fake: FakeAws;
  readonly proxy: FaultProxy;
  close(): Promise<void>;
}

/** Starts the fake with `clusters` in `account`/`region` and the fault proxy in front of it. */
export async function startProxiedAws(options: {
  readonly account: string;
  readonly key: {accessKeyId: string; secretAccessKey: string};
  readonly clusters: readonly FakeClusterInit[];
  readonly region?: string;
}): Promise<ProxiedAws> {
  const world = new FakeAwsWorld();
  world.addAccount(options.account, {accessKeys: [options.key]});
  for (const cluster of options.clusters) world.addCluster(options.account, options.region ?? 'us-east-1', cluster);
  const fake = await startFakeAws({world});
  const proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  return {
    fake,
    proxy,
    close: async () => {
      await proxy.close();
      await fake.close();
    },
  };
}
