import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {createAuthenticator} from '../../src/http/auth.ts';
import {startHttpServer, type HttpServer} from '../../src/http/server.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {context, eksCluster, okResult} from '../discovery/builders.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';

let backend: MemoryBackend;
let heartbeat: Heartbeat;
let inventory: Inventory;
let server: HttpServer;
let dir: string;

async function announce(name: string, tags: Record<string, string>): Promise<void> {
  const evaluation = evaluate([okResult('us-east-1', '111111111111', [eksCluster(name, 'us-east-1', '111111111111', {tags})])], context('g1'));
  for (const c of evaluation.candidates.values()) await heartbeat.announce(c.server);
}

async function start(auth?: {tokenFile?: string}): Promise<void> {
  server = await startHttpServer({
    listenAddr: '127.0.0.1:0',
    inventory,
    readiness: async () => ({ready: true, status: 'ready'}),
    status: () => ({ok: true}),
    trigger: () => ({accepted: true}),
    ...(auth ? {auth: createAuthenticator({clock: systemClock, ...auth})!} : {}),
  });
}

beforeEach(async () => {
  backend = new MemoryBackend({clock: systemClock});
  heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  for (let i = 0; i < 7; i++) await announce(`c${i}`, {env: i % 2 === 0 ? 'prod' : 'dev', team: i < 3 ? 'a' : 'b'});
  inventory = new Inventory({backend, group: 'g1', clock: systemClock});
  await inventory.start();
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-http-'));
});

afterEach(async () => {
  await server?.close();
  await inventory.stop();
  await heartbeat.stop({deregister: false});
  await backend.close();
  await rm(dir, {recursive: true, force: true});
});

describe('HTTP API', () => {
  it.each([
    ['DELETE', '/v1/kube_servers', 'GET'],
    ['PUT', '/v1/kube_servers/c1-eks-us-east-1-111111111111', 'GET'],
    ['POST', '/v1/status', 'GET'],
    ['GET', '/v1/discover', 'POST'],
  ])('answers %s %s with 405 and Allow: %s, and changes nothing', async (method, path, allow) => {
    await start();
    const res = await fetch(`${server.url}${path}`, {method});

    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe(allow);
    expect(await res.json()).toMatchObject({error: 'method_not_allowed'});
    expect(inventory.list()).toHaveLength(7);
  });

  it('still answers 404 for an unknown /v1 path', async () => {
    await start();
    expect((await fetch(`${server.url}/v1/nothing`, {method: 'DELETE'})).status).toBe(404);
  });

  it('lists kube_servers with a label selector and pages through them with next_page_token', async () => {
    await start();
    const filtered = (await (await fetch(`${server.url}/v1/kube_servers?labels=env=prod,team=b`)).json()) as {items: {metadata: {name: string}}[]};
    expect(filtered.items.map((s) => s.metadata.name)).toEqual(['c4-eks-us-east-1-111111111111', 'c6-eks-us-east-1-111111111111']);

    const names: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const res = await fetch(`${server.url}/v1/kube_servers?limit=3${token ? `&next_page_token=${token}` : ''}`);
      const page = (await res.json()) as {items: {metadata: {name: string}}[]; next_page_token?: string};
      names.push(...page.items.map((s) => s.metadata.name));
      token = page.next_page_token;
      pages++;
    } while (token);
    expect(pages).toBe(3);
    expect(names).toHaveLength(7);
    expect(new Set(names).size).toBe(7);
  });

  it('pages through names that sort differently by locale without losing any', async () => {
    for (const name of ['a_b', 'a-b', 'a.c', 'B-x', 'zz']) await announce(name, {team: 'odd'});
    await start();
    const names: string[] = [];
    let token: string | undefined;
    do {
      const page = (await (await fetch(`${server.url}/v1/kube_servers?labels=team=odd&limit=1${token ? `&next_page_token=${token}` : ''}`)).json()) as {
        items: {metadata: {name: string}}[];
        next_page_token?: string;
      };
      names.push(...page.items.map((s) => s.metadata.name));
      token = page.next_page_token;
    } while (token);
    expect(names.map((n) => n.split('-eks-')[0])).toEqual(['B-x', 'a-b', 'a.c', 'a_b', 'zz']);
  });

  it('serves only /metrics and health on the separate metrics listener', async () => {
    const metricsOnly = await startHttpServer({
      listenAddr: '127.0.0.1:0',
      inventory,
      readiness: async () => ({ready: true, status: 'ready'}),
      status: () => ({}),
      metrics: async () => ({contentType: 'text/plain', body: 'kube_discovery_leader 1\n'}),
      metricsOnly: true,
    });
    try {
      expect(await (await fetch(`${metricsOnly.url}/metrics`)).text()).toContain('kube_discovery_leader');
      expect((await fetch(`${metricsOnly.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${metricsOnly.url}/v1/kube_servers`)).status).toBe(404);
      expect((await fetch(`${metricsOnly.url}/v1/watch`)).status).toBe(404);
    } finally {
      await metricsOnly.close();
    }
  });

  it('returns one kube_server by name, 404 for an unknown one and 400 for a bad query', async () => {
    await start();
    const one = await fetch(`${server.url}/v1/kube_servers/c1-eks-us-east-1-111111111111`);
    expect(one.status).toBe(200);
    expect(((await one.json()) as {kind: string}).kind).toBe('kube_server');
    expect((await fetch(`${server.url}/v1/kube_servers/nope`)).status).toBe(404);
    expect((await fetch(`${server.url}/v1/kube_servers?limit=0`)).status).toBe(400);
    expect((await fetch(`${server.url}/v1/kube_servers?labels=novalue`)).status).toBe(400);
    expect((await fetch(`${server.url}/v1/kube_servers/%E0%A4%A`)).status).toBe(400);
  });

  it('a Kubernetes-style selector is never taken as "no cluster matches": == selects like =, != and other operators answer 400', async () => {
    await start();
    const names = async (query: string): Promise<string[]> => {
      const res = await fetch(`${server.url}/v1/kube_servers?labels=${encodeURIComponent(query)}`);
      expect(res.status).toBe(200);
      return ((await res.json()) as {items: {metadata: {name: string}}[]}).items.map((s) => s.metadata.name.slice(0, 2));
    };
    // `kubectl get -l env==prod` means env=prod; before, this listed nothing (the value "=prod").
    expect(await names('env==prod')).toEqual(['c0', 'c2', 'c4', 'c6']);
    expect(await names('env==prod,team=a')).toEqual(['c0', 'c2']);
    // `env!=dev` read as the key "env!", which no label can have: a 200 with no items, as if every cluster were gone.
    for (const query of ['env!=dev', 'team=a,env!=dev', '!env=x', 'env in (prod)=x']) {
      for (const path of ['/v1/kube_servers', '/v1/watch']) {
        const res = await fetch(`${server.url}${path}?labels=${encodeURIComponent(query)}`);
        expect(res.status, `${path} ${query}`).toBe(400);
        expect(((await res.json()) as {message: string}).message).toContain('only equality');
      }
    }
  });

  it('streams a snapshot and then put/delete events over SSE', async () => {
    await start();
    const res = await fetch(`${server.url}/v1/watch?labels=team=a`);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = res.body!.getReader();
    let text = '';
    const readUntil = async (needle: string): Promise<void> => {
      while (!text.includes(needle)) {
        const {value, done} = await reader.read();
        if (done) throw new Error(`stream ended before ${needle}`);
        text += Buffer.from(value).toString('utf8');
      }
    };
    await readUntil('event: synced');
    expect(text.match(/event: put/g)).toHaveLength(3);
    await announce('late', {team: 'a'});
    await heartbeat.remove('c0-eks-us-east-1-111111111111');
    await readUntil('c0-eks-us-east-1-111111111111"}');
    expect(text).toContain('late-eks-us-east-1-111111111111');
    expect(text).toMatch(/event: delete\ndata: \{"name":"c0-eks-us-east-1-111111111111"\}/);
    await reader.cancel();
  });

  it('requires a bearer token from the token file for /v1/* but not for health', async () => {
    const tokenFile = path.join(dir, 'tokens');
    await writeFile(tokenFile, '# readers\nreader-token-1\nreader-token-2\n');
    await start({tokenFile});
    expect((await fetch(`${server.url}/v1/kube_servers`)).status).toBe(401);
    expect((await fetch(`${server.url}/v1/kube_servers`, {headers: {authorization: 'Bearer wrong'}})).status).toBe(401);
    const ok = await fetch(`${server.url}/v1/kube_servers`, {headers: {authorization: 'Bearer reader-token-2'}});
    expect(ok.status).toBe(200);
    expect((await fetch(`${server.url}/v1/discover`, {method: 'POST'})).status).toBe(401);
    expect((await fetch(`${server.url}/v1/discover`, {method: 'POST', headers: {authorization: 'Bearer reader-token-1'}})).status).toBe(202);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const denied = await (await fetch(`${server.url}/v1/status`)).text();
    expect(denied).not.toContain('reader-token');
  });
});
