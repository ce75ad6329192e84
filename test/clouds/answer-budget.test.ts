/**
 * Each AWS answer is capped (8 MiB) and each ARM answer too (32 MiB), but the caps bound one
 * answer, not the answers being read at once: 64 AWS answers just under the cap, read together
 * over one capped pool, took the process from ~100 MiB to ~890 MiB of RSS, and the pools allow
 * hundreds of calls in flight — an endpoint (or a proxy) answering every call with a near-cap
 * body could take the process, and the heartbeats of every entry, down. The handlers now share
 * one process-wide budget of bytes being read (src/core/answer-budget.ts); an answer that would
 * pass it fails as malformed (its source fails, nothing is deleted), the others are read whole.
 * A small budget is given here so the test moves a few MiB, not hundreds.
 */
import http from 'node:http';
import type {AddressInfo} from 'node:net';
import {createDefaultHttpClient, createPipelineRequest} from '@azure/core-rest-pipeline';
import {HttpRequest} from '@smithy/protocol-http';
import {Agent} from 'undici';
import {afterEach, describe, expect, it} from 'vitest';
import {awsFailure} from '../../src/clouds/aws/errors.ts';
import {AwsDispatcher, UndiciHttpHandler} from '../../src/clouds/aws/undici-handler.ts';
import {classifyAzureError} from '../../src/clouds/azure/errors.ts';
import {UndiciArmHttpClient} from '../../src/clouds/azure/undici-client.ts';
import {AnswerBudget} from '../../src/core/answer-budget.ts';

const MiB = 1024 * 1024;
const FIRST = 3 * MiB;
const REST = 1 * MiB;

const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close();
});

/**
 * A server that answers each request with its first 3 MiB at once, and the last 1 MiB of every
 * answer only when the test calls `release`. The test releases once every first part is held by
 * the client together (the budget holds them all) or once a call has settled — which, before any
 * answer can end, only a dropped one can. Handing the first parts to the kernel is no sign the
 * client read them (loopback buffers hold several MiB), so the server does not decide this itself.
 */
async function burstServer(): Promise<{port: number; release: () => void}> {
  const pending: http.ServerResponse[] = [];
  const server = http.createServer((_req, res) => {
    pending.push(res);
    res.writeHead(200, {'content-type': 'application/json', 'content-length': String(FIRST + REST)});
    res.write(Buffer.alloc(FIRST, 0x20));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closing.push(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  const release = (): void => {
    for (const each of pending) if (!each.destroyed) each.end(Buffer.alloc(REST, 0x20));
  };
  return {port: (server.address() as AddressInfo).port, release};
}

/** Sends `calls` requests at once, releases the last parts as `burstServer` says, and sorts the outcomes. */
async function settleBurst<T>(calls: number, budget: AnswerBudget, send: () => Promise<T>, release: () => void, bytesOf: (value: T) => number): Promise<{answered: number[]; failed: unknown[]}> {
  let settledOne = false;
  const sent = Array.from({length: calls}, () => send().finally(() => {
    settledOne = true;
  }));
  const all = Promise.allSettled(sent);
  while (!settledOne && budget.used < calls * FIRST) await new Promise((resolve) => setTimeout(resolve, 5));
  release();
  const answered: number[] = [];
  const failed: unknown[] = [];
  for (const s of await all) {
    if (s.status === 'fulfilled') answered.push(bytesOf(s.value));
    else failed.push(s.reason);
  }
  return {answered, failed};
}

async function burst(calls: number, budget: AnswerBudget): Promise<{answered: number[]; failed: unknown[]}> {
  const {port, release} = await burstServer();
  const handler = new UndiciHttpHandler(new AwsDispatcher({connectTimeoutMs: 5_000, answerTimeoutMs: 30_000, connections: calls}), {owned: true, budget});
  closing.push(async () => handler.destroy());
  const request = (): HttpRequest => new HttpRequest({protocol: 'http:', hostname: '127.0.0.1', port, method: 'GET', path: '/clusters', headers: {host: `127.0.0.1:${port}`}});
  return settleBurst(calls, budget, () => handler.handle(request()), release, (value) => (value.response.body as Uint8Array).byteLength);
}

describe('the answers being read at once share one budget', () => {
  it('answers that fit the budget together are all read whole', async () => {
    const budget = new AnswerBudget(16 * MiB);
    const {answered, failed} = await burst(3, budget);
    expect(failed).toEqual([]);
    expect(answered).toEqual([FIRST + REST, FIRST + REST, FIRST + REST]);
    expect(budget.used).toBe(0);
  });

  it('answers that together pass it: those past it fail as malformed (the source fails, nothing deleted), the rest are read whole, and the budget is given back', async () => {
    const budget = new AnswerBudget(16 * MiB);
    const {answered, failed} = await burst(8, budget);
    // 8 × 3 MiB of first parts cannot be read together within 16 MiB.
    expect(failed.length).toBeGreaterThan(0);
    for (const error of failed) expect(awsFailure(error, 'ListClusters')).toMatchObject({reason: 'invalid_response', code: 'InvalidResponse'});
    for (const bytes of answered) expect(bytes).toBe(FIRST + REST);
    expect(budget.used).toBe(0);
  });
});

/** The same burst through the ARM clients' undici transport (src/clouds/azure/undici-client.ts). */
async function armBurst(calls: number, budget: AnswerBudget): Promise<{answered: number[]; failed: unknown[]}> {
  const {port, release} = await burstServer();
  const pool = new Agent({connections: calls, pipelining: 1});
  closing.push(() => pool.destroy());
  // The third argument is the budget; the SDK's client would only be asked for requests undici does not model.
  const client = new UndiciArmHttpClient(() => pool, createDefaultHttpClient(), budget);
  const request = () => createPipelineRequest({url: `http://127.0.0.1:${port}/subscriptions/s/providers/Microsoft.ContainerService/managedClusters`, allowInsecureConnection: true, timeout: 30_000});
  return settleBurst(calls, budget, () => client.sendRequest(request()), release, (value) => Buffer.byteLength(value.bodyAsText ?? ''));
}

describe('ARM answers read at once share the budget too', () => {
  it('answers that fit are read whole; past it they fail as malformed and the budget is given back', async () => {
    const fits = new AnswerBudget(16 * MiB);
    const whole = await armBurst(3, fits);
    expect(whole.failed).toEqual([]);
    expect(whole.answered).toEqual([FIRST + REST, FIRST + REST, FIRST + REST]);

    const budget = new AnswerBudget(16 * MiB);
    const {answered, failed} = await armBurst(8, budget);
    expect(failed.length).toBeGreaterThan(0);
    for (const error of failed) expect(classifyAzureError(error)).toBe('invalid_response');
    for (const bytes of answered) expect(bytes).toBe(FIRST + REST);
    expect(budget.used).toBe(0);
  });
});
