// `once` logs to stderr; on a terminal those lines are human-readable like `start`'s, and JSON
// when stderr is a pipe. A pseudo-terminal comes from util-linux `script`.
import {execFile} from 'node:child_process';
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {promisify} from 'node:util';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {CLI} from '../helpers/process.ts';

const execFileAsync = promisify(execFile);
let dir: string;
let config: string;
let script = false;
// The SDK reaches nothing: a refused loopback port fails the source at once.
const ENV = {
  PATH: process.env['PATH'] ?? '',
  HOME: tmpdir(),
  AWS_ACCESS_KEY_ID: 'AKIAONCETERMINAL0001',
  AWS_SECRET_ACCESS_KEY: 'once-terminal-secret',
  AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
  AWS_MAX_ATTEMPTS: '1',
  AWS_EC2_METADATA_DISABLED: 'true',
  AWS_CONFIG_FILE: '/nonexistent/c',
  AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/k',
};

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kd-once-tty-'));
  config = path.join(dir, 'c.yaml');
  await writeFile(config, 'version: v1\ndiscovery_service:\n  discovery_group: t\n  aws: [{types: [eks], regions: [us-east-1]}]\nstorage: {type: memory}\nprobe: {enabled: false}\n');
  script = await execFileAsync('script', ['--version']).then(() => true, () => false);
});
afterAll(() => rm(dir, {recursive: true, force: true}));

describe('once logs', () => {
  it('are human-readable on a terminal, like start', async (ctx) => {
    if (!script) {
      if (process.env['CI']) throw new Error('util-linux `script` is required in CI (Debian: bsdutils)');
      ctx.skip('util-linux `script` is not installed');
    }
    const command = [process.execPath, CLI, 'once', '-c', config, '-o', 'json'].map((a) => `'${a}'`).join(' ');
    const {stdout} = await execFileAsync('script', ['-qec', command, '/dev/null'], {env: ENV, timeout: 60_000}).catch((e: {stdout: string}) => e);

    expect(stdout).toMatch(/INFO.*: .*heartbeat started/);
    expect(stdout).not.toContain('"level":');
  });

  it('are JSON lines when stderr is not a terminal', async () => {
    const {stderr} = await execFileAsync(process.execPath, [CLI, 'once', '-c', config, '-o', 'json'], {env: ENV, timeout: 60_000}).catch((e: {stderr: string}) => e);

    expect(stderr).toMatch(/^\{"level":"info".*"msg":"heartbeat started"/m);
  });
});
