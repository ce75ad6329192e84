/**
 * Security: an etcd endpoint written with a user name and password in it
 * (`https://root:<password>@etcd:2379`) was accepted, printed whole by `config check`, and echoed
 * in every etcd error — the CLI's one-line error, the log, `/v1/status` (`backend.faults`) —
 * though the client never even used it (the name fails to resolve). The password must never be
 * printed: the config is refused, naming the key, line and column and where credentials go, and
 * any URL with credentials in a message is redacted.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {redactText} from '../../src/observability/redact.ts';
import {captureIo} from '../helpers/env.ts';

const PASSWORD = 'hunter2-etcd-secret';
let dir: string;
let file: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-etcd-userinfo-'));
  file = path.join(dir, 'c.yaml');
  await writeFile(
    file,
    `version: v1
discovery_service:
  discovery_group: g
  aws:
    - types: [eks]
      regions: [us-east-1]
storage:
  type: etcd
  endpoints: ["http://root:${PASSWORD}@127.0.0.1:1"]
`,
  );
});
afterAll(() => rm(dir, {recursive: true, force: true}));

describe('an etcd endpoint URL carrying a password', () => {
  for (const command of [['config', 'check'], ['once'], ['start']]) {
    it(`\`${command.join(' ')}\` refuses it (exit 2) with the key and line, never printing the password`, async () => {
      const {io, stdout, stderr} = captureIo({PATH: process.env['PATH'], AWS_EC2_METADATA_DISABLED: 'true'});
      const code = await main([...command, '-c', file], io);
      const printed = stdout() + stderr();
      expect(printed).not.toContain(PASSWORD);
      expect(code).toBe(2);
      expect(stderr()).toMatch(/c\.yaml:9:\d+: storage\.endpoints\[0\]: .*storage\.username.*storage\.password_file/);
    });
  }

  // Other checks on the same value quoted it too (found by review): a scheme that is not http(s),
  // a URL without a host, the same URL twice.
  for (const [what, endpoints] of [
    ['a scheme other than http(s)', `["grpc://root:${PASSWORD}@etcd-0:2379"]`],
    ['no host', `["https://root:${PASSWORD}@:2379"]`],
    ['the same URL twice', `["https://root:${PASSWORD}@etcd-0:2379", "https://root:${PASSWORD}@etcd-0:2379"]`],
  ] as const) {
    it(`\`config check\` never prints the password of an endpoint with ${what}`, async () => {
      const other = path.join(dir, `other-${what.replaceAll(' ', '-')}.yaml`);
      await writeFile(other, `version: v1\ndiscovery_service:\n  discovery_group: g\n  aws:\n    - types: [eks]\n      regions: [us-east-1]\nstorage:\n  type: etcd\n  endpoints: ${endpoints}\n`);
      const {io, stdout, stderr} = captureIo({PATH: process.env['PATH'], AWS_EC2_METADATA_DISABLED: 'true'});
      const code = await main(['config', 'check', '-c', other], io);
      expect(code).toBe(2);
      expect(stderr()).toMatch(/:9:\d+: storage\.endpoints\[\d\]/);
      expect(stdout() + stderr()).not.toContain(PASSWORD);
    });
  }

  it('is redacted wherever a message quotes one', () => {
    const text = `etcd get at http://root:${PASSWORD}@etcd-0.etcd:2379,https://u:${PASSWORD}%21@10.0.0.1:2379 failed`;
    const out = redactText(text);
    expect(out).not.toContain(PASSWORD);
    expect(out).toContain('etcd-0.etcd:2379');
    expect(out).toContain('10.0.0.1:2379');
  });
});
