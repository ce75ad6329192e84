/** `kube-discovery start` as a real process: serves, answers SIGHUP with a cycle, stops cleanly on SIGTERM. */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {freePort} from '../helpers/net.ts';
import {spawnCli} from '../helpers/process.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAPROCESSTEST00001', secretAccessKey: 'process-secret'};
let fake: FakeAws;
let dir: string;


beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  world.addCluster(ACCOUNT, 'us-east-1', {name: 'a'});
  fake = await startFakeAws({world});
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-proc-'));
});

afterAll(async () => {
  await fake.close();
  await rm(dir, {recursive: true, force: true});
});

describe('start as a process', () => {
  it('serves the inventory, runs a cycle on SIGHUP and exits 0 on SIGTERM leaving entries to expire', async () => {
    const port = await freePort();
    const file = path.join(dir, 'cfg.yaml');
    await writeFile(
      file,
      `version: v1\ndiscovery_service:\n  discovery_group: proc\n  poll_interval: 1h\n  aws:\n    - types: [eks]\n      regions: [us-east-1]\nstorage: {type: sqlite, path: ${path.join(dir, 'r.db')}}\nhttp: {listen_addr: "127.0.0.1:${port}"}\n`,
    );
    const env = {
      PATH: process.env['PATH'],
      ...fake.env,
      AWS_ACCESS_KEY_ID: KEY.accessKeyId,
      AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: '/nonexistent',
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
    };
    const proc = spawnCli(['start', '-c', file], env);
    try {
      await proc.waitFor('"event":"cycle"');
      const body = (await (await fetch(`http://127.0.0.1:${port}/v1/kube_servers`)).json()) as {items: {metadata: {name: string}}[]};
      expect(body.items.map((s) => s.metadata.name)).toEqual(['a-eks-us-east-1-111111111111']);

      fake.world.addCluster(ACCOUNT, 'us-east-1', {name: 'b'});
      proc.child.kill('SIGHUP');
      await proc.waitFor(/"event":"cycle"[\s\S]*"event":"cycle"/);
      const after = (await (await fetch(`http://127.0.0.1:${port}/v1/kube_servers`)).json()) as {items: unknown[]};
      expect(after.items).toHaveLength(2);
    } finally {
      proc.child.kill('SIGTERM');
    }
    expect(await proc.exited).toBe(0);
    expect(proc.stdout()).toContain('entries left to expire');
    expect(proc.stdout()).not.toContain(KEY.secretAccessKey);
  });
});
