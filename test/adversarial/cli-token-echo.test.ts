/**
 * Adversarial: `ls` and `kubeconfig` against a server (a proxy in front of the API, another
 * service at that address) whose error answer quotes the bearer token it was sent, in words no
 * pattern knows ("the token abc... is not valid"). The CLI printed the answer's message as it
 * came: the API token from $KUBE_DISCOVERY_TOKEN or --token-file reached stderr (a terminal, a CI
 * log). The token the CLI sends is a secret it holds, so it must be redacted by value.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import {createServer, type Server} from 'node:http';
import type {AddressInfo} from 'node:net';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {runKubeconfig} from '../../src/cli/kubeconfig.ts';
import {lsCommand} from '../../src/cli/ls.ts';
import {clearRegisteredSecrets} from '../../src/observability/redact.ts';
import {captureIo} from '../helpers/env.ts';

let server: Server;
let url: string;
let dir: string;
const TOKEN = 'kd-api-7f3c91e2b4d8a6015c2e9f47';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kd-token-echo-'));
  server = createServer((req, res) => {
    const sent = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    const body = JSON.stringify({message: `the credential ${sent} is not valid for this proxy`});
    res.writeHead(401, {'content-type': 'application/json'});
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, {recursive: true, force: true});
  clearRegisteredSecrets();
});

describe('a server answer quoting the bearer token the CLI sent', () => {
  it('ls (token from $KUBE_DISCOVERY_TOKEN) prints the error without the token', async () => {
    const out = captureIo({KUBE_DISCOVERY_TOKEN: TOKEN});
    const code = await lsCommand()(['--server', url, '-o', 'json'], out.io);
    expect(code).toBe(1);
    // The answer's words reached stderr (else the check below proves nothing).
    expect(out.stderr()).toContain('is not valid for this proxy');
    expect(out.stderr()).not.toContain(TOKEN);
  });

  it('kubeconfig (token from --token-file) prints the error without the token', async () => {
    const file = join(dir, 'token');
    await writeFile(file, `${TOKEN}\n`);
    const out = captureIo({});
    const code = await runKubeconfig(['--server', url, '--token-file', file], out.io);
    expect(code).toBe(1);
    expect(out.stderr()).toContain('is not valid for this proxy');
    expect(out.stderr()).not.toContain(TOKEN);
  });
});
