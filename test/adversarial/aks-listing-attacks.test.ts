/**
 * Adversarial: ARM managed-cluster listings that are 200s, well-formed as pages, yet must not
 * deregister a cluster that still exists, nor send the bearer token anywhere but ARM. Each runs
 * `once` and `start` in-process on a registry holding every cluster of the clean world, with the
 * real Azure SDK pipeline talking to the ARM fake through the fault proxy.
 */
import {createServer, type Server} from 'node:https';
import type {AddressInfo} from 'node:net';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {FAKE_ARM_TOKEN} from '../fakes/arm-server.ts';
import {mutateJson, when, type ProxyFaultRule} from '../fakes/faults.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';
import {ALL_NAMES, goldenRegistry, once, start, SUBSCRIPTION, startHarness, type Harness} from '../reliability/cloud-fault-harness.ts';

const A1 = `a1-aks-eastus-rg-a-${SUBSCRIPTION}`;
const AKS = `aks:${SUBSCRIPTION}`;
const firstPage = {operation: 'managedClusters.list', page: 'first' as const};

/** Rewrites the record of cluster a1 on the first managedClusters page. */
const editA1 = (edit: (record: Record<string, unknown>) => Record<string, unknown>): ProxyFaultRule =>
  when(firstPage, mutateJson((body) => ({...body, value: (body['value'] as Record<string, unknown>[]).map((r) => (r['name'] === 'a1' ? edit(r) : r))})));

let h: Harness;
/** A fresh registry holding every cluster of the clean world: the config file and its text. */
let filledRegistry: () => Promise<{file: string; text: string}>;
/** An HTTPS server on another origin that records every Authorization header it is sent. */
let foreign: Server;
let foreignUrl: string;
const foreignAuth: string[] = [];

beforeAll(async () => {
  h = await startHarness();
  filledRegistry = await goldenRegistry(h, 'attack');
  const tls = await sharedServerTls();
  foreign = createServer({cert: tls.certPem, key: tls.keyPem}, (req, res) => {
    foreignAuth.push(req.headers.authorization ?? '');
    res.writeHead(200, {'content-type': 'application/json'}).end('{"value":[]}');
  });
  await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve));
  foreignUrl = `https://localhost:${(foreign.address() as AddressInfo).port}`;
}, 60_000);
afterAll(async () => {
  await new Promise((resolve) => foreign.close(resolve));
  await h.close();
});

const kept = (json: Awaited<ReturnType<typeof once>>['json']): string[] =>
  json.clusters.filter((c) => c.action !== 'delete' && c.action !== 'skip').map((c) => c.name).sort();

describe('an ARM managedClusters page that cannot be trusted', () => {
  it('a record with neither a name nor an id fails the source: it may be any cluster, so none is deleted', async () => {
    const {file, text} = await filledRegistry();
    h.armProxy.fault = editA1(({name: _name, id: _id, ...rest}) => rest);
    try {
      const {code, json} = await once(file);
      expect(json.counts['delete']).toBe(0);
      expect(kept(json)).toEqual(ALL_NAMES);
      expect(code).toBe(1);
      expect(json.sources.find((s) => s.id === AKS)?.error?.reason).toBe('invalid_response');

      const service = await start(file, text);
      try {
        expect((await service.servers()).map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
        expect((await service.status()).sources.find((s) => s.id === AKS)).toMatchObject({ok: false, last_error: {reason: 'invalid_response'}});
      } finally {
        await service.stop();
      }
    } finally {
      h.armProxy.fault = undefined;
    }
  }, 90_000);

  it('a nextLink to another origin fails the source and never carries the bearer token there', async () => {
    const {file} = await filledRegistry();
    foreignAuth.length = 0;
    h.armProxy.fault = when(firstPage, mutateJson((body) => ({
      ...body,
      nextLink: `${foreignUrl}/subscriptions/${SUBSCRIPTION}/providers/Microsoft.ContainerService/managedClusters?api-version=2026-04-01&$skipToken=x`,
    })));
    try {
      const {code, json} = await once(file);
      expect(foreignAuth.filter((a) => a.includes(FAKE_ARM_TOKEN))).toEqual([]);
      expect(foreignAuth).toEqual([]);
      expect(json.counts['delete']).toBe(0);
      expect(kept(json)).toEqual(ALL_NAMES);
      expect(code).toBe(1);
      expect(json.sources.find((s) => s.id === AKS)?.error?.reason).toBe('invalid_response');
    } finally {
      h.armProxy.fault = undefined;
    }
  }, 90_000);
});

describe('a running AKS cluster in the middle of an operation', () => {
  // AKS sets these while an operation runs on (or just ended on) a cluster that exists and
  // serves: a node pool scale, a network migration, a cancelled or failed upgrade.
  for (const state of ['Scaling', 'Migrating', 'Canceling', 'Canceled', 'Failed']) {
    it(`provisioningState ${state} with power Running keeps its entry`, async () => {
      const {file, text} = await filledRegistry();
      h.armProxy.fault = editA1((r) => ({...r, properties: {...(r['properties'] as object), provisioningState: state}}));
      try {
        const {code, json} = await once(file);
        expect(json.clusters.filter((c) => c.action === 'delete')).toEqual([]);
        expect(kept(json)).toEqual(ALL_NAMES);
        expect(code).toBe(0);

        const service = await start(file, text);
        try {
          expect((await service.servers()).map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
          expect((await service.servers()).find((s) => s.metadata.name === A1)?.status?.stale).toBeFalsy();
        } finally {
          await service.stop();
        }
      } finally {
        h.armProxy.fault = undefined;
      }
    }, 90_000);
  }
});
