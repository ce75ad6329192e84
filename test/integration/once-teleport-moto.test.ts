/**
 * The Teleport drop-in against moto, an AWS emulator we did not write: clusters created with the
 * real EKS CreateCluster, then `once` with the pasted teleport.yaml of Teleport's EKS guide
 * registers them under Teleport's names.
 *
 * moto answers DescribeCluster with a random string as the cluster CA, which this release skips
 * as a malformed record. Until unusable CAs register the cluster as unhealthy instead, a loopback
 * relay in front of moto puts a well-formed test CA into DescribeCluster answers and changes
 * nothing else; every other byte, every list, tag and ARN is moto's.
 */
import {CreateClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import http from 'node:http';
import type {AddressInfo} from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {CA} from '../discovery/builders.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {describeWithMoto, startMoto, type Moto} from '../helpers/moto.ts';

/** moto's default account. */
const ACCOUNT = '123456789012';

/** Relays every request to moto; DescribeCluster answers get a well-formed CA (see the module comment). */
async function startCaRelay(target: string): Promise<{url: string; close: () => Promise<void>}> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        const headers = Object.fromEntries(Object.entries(req.headers).filter((e): e is [string, string] => typeof e[1] === 'string'));
        const upstream = await fetch(`${target}${req.url ?? '/'}`, {method: req.method ?? 'GET', headers, ...(body.length > 0 ? {body} : {})});
        let text = await upstream.text();
        if (req.method === 'GET' && /^\/clusters\/[^/?]+$/.test(req.url ?? '') && upstream.ok) {
          const json = JSON.parse(text) as {cluster: {certificateAuthority?: {data?: string}}};
          json.cluster.certificateAuthority = {data: CA};
          text = JSON.stringify(json);
        }
        res.writeHead(upstream.status, {'content-type': upstream.headers.get('content-type') ?? 'application/json'});
        res.end(text);
      })().catch((error: unknown) => {
        res.writeHead(502);
        res.end(String(error));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const {port} = server.address() as AddressInfo;
  return {url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve()))};
}

describeWithMoto("once with Teleport's EKS guide config, against moto", () => {
  let moto: Moto;
  let relay: {url: string; close: () => Promise<void>};
  let dir: string;
  let restoreEnv: () => void;

  beforeAll(async () => {
    moto = await startMoto();
    relay = await startCaRelay(moto.endpoint);
    dir = await mkdtemp(path.join(os.tmpdir(), 'kd-teleport-moto-'));
    const create = async (region: string, name: string, tags: Record<string, string>): Promise<void> => {
      const eks = new EKSClient({region, endpoint: moto.endpoint, credentials: {accessKeyId: moto.env['AWS_ACCESS_KEY_ID'] ?? '', secretAccessKey: moto.env['AWS_SECRET_ACCESS_KEY'] ?? ''}});
      await eks.send(
        new CreateClusterCommand({name, roleArn: `arn:aws:iam::${ACCOUNT}:role/eks`, resourcesVpcConfig: {subnetIds: ['subnet-1']}, tags}),
      );
      eks.destroy();
    };
    await create('us-west-2', 'myeks', {env: 'prod'});
    await create('us-west-2', 'prod-us-west-2', {env: 'prod'});
    await create('us-east-1', 'payments', {env: 'prod', 'teleport.dev/kubernetes-name': 'pay'});
    await create('eu-west-1', 'dev1', {env: 'dev'});
    restoreEnv = setEnv({...moto.env, AWS_ENDPOINT_URL_EKS: relay.url, AWS_MAX_ATTEMPTS: '2'});
  }, 60_000);

  afterAll(async () => {
    restoreEnv();
    await relay.close();
    await moto.stop();
    await rm(dir, {recursive: true, force: true});
  });

  it("registers moto's matching clusters under Teleport's names", async () => {
    const guide = await readFile(new URL('../config/teleport/eks-teleport.yaml', import.meta.url), 'utf8');
    const file = path.join(dir, 'teleport.yaml');
    await writeFile(file, `${guide}storage: {type: memory}\nprobe: {enabled: false}\n`);
    const cap = captureIo();
    const code = await main(['once', '-c', file, '--output', 'json'], cap.io);
    expect(code, cap.stderr()).toBe(0);
    const json = JSON.parse(cap.stdout()) as {clusters: {name: string; action: string; reason: string; labels: Record<string, string>}[]};
    const created = json.clusters.filter((c) => c.action === 'create');
    expect(created.map((c) => c.name).sort()).toEqual([`myeks-us-west-2-${ACCOUNT}`, 'pay', `prod-us-west-2-eks-${ACCOUNT}`]);
    expect(created.find((c) => c.name === `myeks-us-west-2-${ACCOUNT}`)?.labels).toMatchObject({
      'teleport.dev/cloud': 'AWS',
      'account-id': ACCOUNT,
      region: 'us-west-2',
      'teleport.internal/discovered-name': 'myeks',
    });
    expect(json.clusters.find((c) => c.name === `dev1-eks-eu-west-1-${ACCOUNT}`)).toMatchObject({action: 'skip', reason: expect.stringContaining('filtered')});
  }, 60_000);
});
