/**
 * `once` on the sqlite file of a running `start`: refused with a clear message (the service's
 * lease and entries stay as they are) unless `--force`; allowed again once the service stopped.
 * Two `start` on one file (a rolling restart): the one stopping leaves the other's record alone.
 */
import {writeFile} from 'node:fs/promises';
import os from 'node:os';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {systemClock} from '../../src/core/clock.ts';
import {loadConfigFile} from '../../src/config/load.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService} from '../../src/service/service.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAONCEVSSTART00001', secretAccessKey: 'once-vs-start-secret'};
let aws: AwsServiceWorld;

beforeAll(async () => {
  aws = await startAwsServiceWorld({key: KEY, account: ACCOUNT, tmpPrefix: 'kd-once-start-', populate: (world) => world.addCluster(ACCOUNT, 'us-east-1', {name: 'a'})});
});

afterAll(() => aws.close());

describe('once next to a running start', () => {
  it('refuses without --force, runs with it, and runs freely after the service stopped', async () => {
    const file = aws.file('cfg.yaml');
    await writeFile(
      file,
      `version: v1\ndiscovery_service:\n  discovery_group: shared\n  poll_interval: 1h\n  aws:\n    - types: [eks]\n      regions: [us-east-1]\nstorage: {type: sqlite, path: ${aws.file('r.db')}}\nhttp: {listen_addr: "127.0.0.1:0"}\n`,
    );
    const svc = await startService({config: await loadConfigFile(file), io: captureIo().io, clock: systemClock, logger: silentLogger});
    try {
      await svc.nextCycle();
      const before = svc.inventory.list().map((s) => `${s.metadata.name}@${s.metadata.revision}`);
      expect(before).toHaveLength(1);

      const refused = captureIo();
      expect(await main(['once', '-c', file, '--output', 'json'], refused.io)).toBe(1);
      expect(refused.stderr()).toContain(`a running \`kube-discovery start\` (pid ${process.pid} on ${os.hostname()}`);
      expect(refused.stderr()).toContain('--force');
      expect(refused.stdout()).toBe('');
      expect(svc.inventory.list().map((s) => `${s.metadata.name}@${s.metadata.revision}`)).toEqual(before);

      const forced = captureIo();
      expect(await main(['once', '-c', file, '--output', 'json', '--force'], forced.io)).toBe(0);
      expect(JSON.parse(forced.stdout())).toMatchObject({result: 'success'});
    } finally {
      await svc.stop({deregister: false});
    }
    const after = captureIo();
    expect(await main(['once', '-c', file, '--output', 'json'], after.io)).toBe(0);
  });

  it('still refuses after a second start on the file outlived the first (rolling restart)', async () => {
    const file = aws.file('rolling.yaml');
    await writeFile(
      file,
      `version: v1\ndiscovery_service:\n  discovery_group: rolling\n  poll_interval: 1h\n  aws:\n    - types: [eks]\n      regions: [us-east-1]\nstorage: {type: sqlite, path: ${aws.file('rolling.db')}}\nhttp: {listen_addr: "127.0.0.1:0"}\n`,
    );
    const config = await loadConfigFile(file);
    // Each first cycle is awaited from the moment its service is up: the old one's may end while the
    // next one starts, and with a poll interval of an hour nothing would follow it.
    const old = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger});
    const oldFirst = old.nextCycle();
    let stopped = false;
    const next = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger});
    const nextFirst = next.nextCycle();
    try {
      await oldFirst;
      await nextFirst;
      // The old process goes away while the new one keeps writing: the new one's record must stay.
      await old.stop({deregister: false});
      stopped = true;
      const refused = captureIo();
      expect(await main(['once', '-c', file, '--output', 'json'], refused.io)).toBe(1);
      expect(refused.stderr()).toContain('a running `kube-discovery start`');
      expect(refused.stdout()).toBe('');
    } finally {
      if (!stopped) await old.stop({deregister: false});
      await next.stop({deregister: false});
    }
    // The survivor's own clean stop removes its record.
    const after = captureIo();
    expect(await main(['once', '-c', file, '--output', 'json'], after.io)).toBe(0);
  });

  it('still refuses after the service replaced a lost lease (its record goes onto the new lease)', async () => {
    const file = aws.file('replaced.yaml');
    const db = aws.file('replaced.db');
    await writeFile(
      file,
      `version: v1\ndiscovery_service:\n  discovery_group: replaced\n  poll_interval: 1h\n  aws:\n    - types: [eks]\n      regions: [us-east-1]\nheartbeat: {ttl: 30s, keepalive_interval: 1s}\nstorage: {type: sqlite, path: ${db}}\nhttp: {listen_addr: "127.0.0.1:0"}\n`,
    );
    const svc = await startService({config: await loadConfigFile(file), io: captureIo().io, clock: systemClock, logger: silentLogger});
    const other = await SqliteBackend.open({path: db, clock: systemClock});
    try {
      await svc.nextCycle();
      const key = 'kube_servers/replaced/a-eks-us-east-1-111111111111';
      const lost = (await other.get('writers/replaced'))?.lease;
      expect(lost).toBeDefined();
      expect((await other.get(key))?.lease).toBe(lost);
      // The lease goes as a process that found it lapsed purges it (the service was paused past its TTL).
      await other.revokeLease({id: lost ?? '', ttlMs: 30_000});
      // The service's next keepalive finds its lease gone, grants another and re-puts its entry.
      for (let i = 0; i < 300 && ((await other.get(key))?.lease ?? lost) === lost; i++) await new Promise((r) => setTimeout(r, 100));
      expect((await other.get(key))?.lease, 'the service never replaced its lost lease').not.toBe(lost);

      const refused = captureIo();
      expect(await main(['once', '-c', file, '--output', 'json'], refused.io)).toBe(1);
      expect(refused.stderr()).toContain('a running `kube-discovery start`');
      expect(refused.stdout()).toBe('');
    } finally {
      await other.close();
      await svc.stop({deregister: false});
    }
  });
});
