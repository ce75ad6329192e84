/** `kube-discovery start` as a real process: serves, answers SIGHUP with a cycle, stops cleanly on SIGTERM. */
import {writeFile} from 'node:fs/promises';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {servingPort, spawnCli} from '../helpers/process.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAPROCESSTEST00001', secretAccessKey: 'process-secret'};
let aws: AwsServiceWorld;

beforeAll(async () => {
  // The service runs as a child process with its own environment (childEnv): process.env stays as it is.
  aws = await startAwsServiceWorld({key: KEY, account: ACCOUNT, tmpPrefix: 'kd-proc-', setProcessEnv: false, populate: (world) => world.addCluster(ACCOUNT, 'us-east-1', {name: 'a'})});
});

afterAll(() => aws.close());

describe('start as a process', () => {
  it('serves the inventory, runs a cycle on SIGHUP and exits 0 on SIGTERM leaving entries to expire', async () => {
    const file = aws.file('cfg.yaml');
    await writeFile(
      file,
      `version: v1\ndiscovery_service:\n  discovery_group: proc\n  poll_interval: 1h\n  aws:\n    - types: [eks]\n      regions: [us-east-1]\nstorage: {type: sqlite, path: ${aws.file('r.db')}}\nhttp: {listen_addr: "127.0.0.1:0"}\n`,
    );
    const proc = spawnCli(['start', '-c', file], aws.childEnv());
    try {
      // Port 0: the process says where it serves, so no other process can take its port first.
      const port = await servingPort(proc);
      await proc.waitFor('"event":"cycle"');
      const body = (await (await fetch(`http://127.0.0.1:${port}/v1/kube_servers`)).json()) as {items: {metadata: {name: string}}[]};
      expect(body.items.map((s) => s.metadata.name)).toEqual(['a-eks-us-east-1-111111111111']);

      aws.world.addCluster(ACCOUNT, 'us-east-1', {name: 'b'});
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
