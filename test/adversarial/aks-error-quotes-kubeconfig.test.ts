/**
 * Adversarial: a `listClusterUserCredential` error whose message quotes a kubeconfig (a gateway
 * or proxy that echoes what it was handed): its `token:` and `client-key-data:` are credentials
 * the process never parsed, so they are not known by value. They must reach neither the log
 * (as the service's logger writes it), `/v1/status`, the served kube_servers nor `once`'s output. Runs `once` and `start` on SQLite
 * with the real Azure SDK pipeline talking to the ARM fake through the fault proxy.
 */
import {randomBytes} from 'node:crypto';
import {copyFile, readFile} from 'node:fs/promises';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {redact} from '../../src/observability/redact.ts';
import {answer, when} from '../fakes/faults.ts';
import {once, start, startHarness, type Harness} from '../reliability/cloud-fault-harness.ts';

let h: Harness;
let golden: string;

beforeAll(async () => {
  h = await startHarness();
  const file = await h.config('golden', true);
  const clean = await once(file);
  expect(clean.code, JSON.stringify(clean.json.sources)).toBe(0);
  golden = h.registryPath('golden');
}, 60_000);
afterAll(() => h.close());

describe('an ARM error message quoting a kubeconfig', () => {
  it('leaks neither its token nor its client key', async () => {
    const token = randomBytes(32).toString('hex');
    const key = Buffer.from(`-----BEGIN RSA PRIVATE KEY-----\n${randomBytes(48).toString('base64')}\n-----END RSA PRIVATE KEY-----\n`).toString('base64');
    const kubeconfig = `apiVersion: v1\nkind: Config\nusers:\n- name: clusterUser_rg-a_a1\n  user:\n    token: ${token}\n    client-key-data: ${key}\n`;
    const file = await h.config('echo');
    await copyFile(golden, h.registryPath('echo'));
    const text = await readFile(file, 'utf8');
    h.armProxy.fault = when(
      {operation: 'managedClusters.listClusterUserCredentials', cluster: 'a1'},
      answer(400, JSON.stringify({error: {code: 'BadRequest', message: `the gateway could not forward the kubeconfig: ${kubeconfig}`}}), {'content-type': 'application/json'}),
    );
    try {
      const run = await once(file);
      const service = await start(file, text);
      let served: string;
      try {
        served = JSON.stringify([await service.status(), await service.servers()]);
      } finally {
        await service.stop();
      }
      // The harness's `start` logs raw; the service's logger passes every logged object through `redact`, as here.
      const logged = JSON.stringify(service.logs);
      const said = [JSON.stringify(run.json), run.stderr, served, JSON.stringify(redact(service.logs))].join('\n');
      // The echo reached the log (else the check below proves nothing).
      expect(logged).toContain('the gateway could not forward the kubeconfig');
      expect(said).not.toContain(token);
      expect(said).not.toContain(key.slice(0, 40));
    } finally {
      h.armProxy.fault = undefined;
    }
  }, 90_000);
});
