/**
 * Security: an Azure matcher's `resource_manager_endpoint` written with a user name and password
 * in it (`https://admin:<password>@arm.example`, as for an endpoint behind a basic-auth proxy) was
 * accepted and printed whole by `config check` — ARM takes bearer tokens only, so the password
 * never served — and a password with a comma escaped the redactor's URL pattern as well. Like an
 * etcd endpoint with credentials (etcd-endpoint-credentials.test.ts), such a config is refused,
 * naming the key, line and column, never printing the password.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {captureIo} from '../helpers/env.ts';

const PASSWORDS = ['hunter2-arm-secret', 'pa,ss-arm-secret'];
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-arm-userinfo-'));
});
afterAll(() => rm(dir, {recursive: true, force: true}));

async function configWith(endpoint: string, name: string): Promise<string> {
  const file = path.join(dir, `${name}.yaml`);
  await writeFile(
    file,
    `version: v1
discovery_service:
  discovery_group: g
  azure:
    - types: [aks]
      subscriptions: ["00000000-0000-0000-0000-000000000001"]
      resource_manager_endpoint: "${endpoint}"
storage: {type: memory}
`,
  );
  return file;
}

describe('an ARM endpoint URL carrying a password', () => {
  for (const [i, password] of PASSWORDS.entries()) {
    for (const command of [['config', 'check'], ['once'], ['start']]) {
      it(`\`${command.join(' ')}\` refuses it (exit 2) with the key and line, never printing the password (${password})`, async () => {
        const file = await configWith(`https://admin:${password}@arm.example.com/`, `c${i}`);
        const {io, stdout, stderr} = captureIo({PATH: process.env['PATH'], AWS_EC2_METADATA_DISABLED: 'true'});
        const code = await main([...command, '-c', file], io);
        const printed = stdout() + stderr();
        expect(printed).not.toContain(password);
        expect(code).toBe(2);
        expect(stderr()).toMatch(/c\d\.yaml:7:\d+: discovery_service\.azure\[0\]\.resource_manager_endpoint: .*without credentials/);
      });
    }
  }

  it('`config check` never prints the password of an endpoint whose scheme is not https either', async () => {
    const file = await configWith(`ftp://admin:${PASSWORDS[1]}@arm.example.com/`, 'ftp');
    const {io, stdout, stderr} = captureIo({PATH: process.env['PATH'], AWS_EC2_METADATA_DISABLED: 'true'});
    const code = await main(['config', 'check', '-c', file], io);
    expect(stdout() + stderr()).not.toContain('ss-arm-secret');
    expect(code).toBe(2);
  });
});
