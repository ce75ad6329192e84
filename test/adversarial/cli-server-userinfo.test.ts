/**
 * Adversarial: `ls` and `kubeconfig` given a server address with user info
 * (`http://user:password@host`, as one writes for an API behind a basic-auth proxy), by flag or
 * by $KUBE_DISCOVERY_SERVER. Node's fetch refuses such a URL, and the CLI's error quoted the
 * address (and fetch's message the URL again) on stderr, password and all: a terminal or CI log
 * then holds it. A password with a comma is not even caught by the redactor's URL pattern.
 * The address must be refused without the password reaching stderr or stdout.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {runKubeconfig} from '../../src/cli/kubeconfig.ts';
import {lsCommand} from '../../src/cli/ls.ts';
import {captureIo} from '../helpers/env.ts';
import {eksKubeServer} from '../probe/eks-fixtures.ts';
import {startKubeServersApi, type FakeKubeServersApi} from '../cli/kube-servers-api.ts';

let api: FakeKubeServersApi;
beforeAll(async () => {
  api = await startKubeServersApi([eksKubeServer('prod-eks-us-east-1-111111111111')]);
});
afterAll(() => api?.close());

const PASSWORDS = ['Sup3rSecretPassw0rd', 'pa,ss-w0rd!x'];

function withUserInfo(url: string, password: string): string {
  return url.replace('http://', `http://admin:${password}@`);
}

describe('a --server address with user info', () => {
  for (const password of PASSWORDS) {
    it(`ls neither prints the password nor lists (${password.length} characters)`, async () => {
      for (const [argv, env] of [
        [['--server', withUserInfo(api.url, password)], {}],
        [[], {KUBE_DISCOVERY_SERVER: withUserInfo(api.url, password)}],
      ] as const) {
        const out = captureIo({...env});
        const code = await lsCommand()([...argv, '-o', 'json'], {...out.io, isTty: false});
        expect(code).not.toBe(0);
        expect(out.stderr()).toContain('user info');
        expect(out.stderr() + out.stdout()).not.toContain(password);
      }
    });

    it(`kubeconfig neither prints the password nor writes a kubeconfig (${password.length} characters)`, async () => {
      const out = captureIo({});
      const code = await runKubeconfig(['--server', withUserInfo(api.url, password)], out.io);
      expect(code).not.toBe(0);
      expect(out.stderr()).toContain('user info');
      expect(out.stderr() + out.stdout()).not.toContain(password);
    });
  }

  it('an address that is not http(s) is quoted without its user info', async () => {
    const out = captureIo({});
    const code = await lsCommand()(['--server', 'ftp://admin:pa,ss-w0rd!x@127.0.0.1:21'], {...out.io, isTty: false});
    expect(code).toBe(2);
    expect(out.stderr()).toContain('127.0.0.1:21');
    expect(out.stderr()).not.toContain('pa,ss-w0rd!x');
  });
});
