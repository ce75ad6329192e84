/** A cycle cut short (shutdown, lost leadership) writes nothing, not even what its finished sources found. */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {setEnv} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIACYCLEABORT000001', secretAccessKey: 'abort-secret'};
let fake: FakeAws;
let restoreEnv: () => void;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  world.addCluster(ACCOUNT, 'us-east-1', {name: 'fast'});
  world.addCluster(ACCOUNT, 'us-west-2', {name: 'slow'});
  fake = await startFakeAws({world, fault: (ctx) => (ctx.region === 'us-west-2' && ctx.operation === 'ListClusters' ? {hang: true} : undefined)});
  restoreEnv = setEnv({...fake.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_MAX_ATTEMPTS: '1'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

describe('an aborted cycle', () => {
  it('rejects and writes nothing', async () => {
    const config = parseConfig('version: v1\ndiscovery_service:\n  discovery_group: abort\n  aws: [{types: [eks], regions: [us-east-1, us-west-2]}]\nstorage: {type: memory}\n', 'abort.yaml');
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'abort', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    const discovery = new Discovery({config, clock: systemClock});
    const abort = new AbortController();
    const cycle = discovery.runCycle(createRegistrar(backend, heartbeat, 'abort'), abort.signal);
    // Abort once the healthy region has been described and the other hangs: a cycle with a
    // finished source in hand, not one aborted before anything came back (a loaded machine can take
    // seconds to get there, so the wait has a generous bound and fails rather than aborting early).
    const giveUp = Date.now() + 60_000;
    while (fake.stats.count({operation: 'DescribeCluster', region: 'us-east-1', status: 200}) === 0) {
      if (Date.now() > giveUp) throw new Error('the healthy region was never described');
      await new Promise((r) => setTimeout(r, 10));
    }
    abort.abort(new Error('shutting down'));
    await expect(cycle).rejects.toThrow('shutting down');
    expect(await backend.list('kube_servers/')).toEqual([]);
    await heartbeat.stop({deregister: false});
    await backend.close();
  }, 90_000);
});
