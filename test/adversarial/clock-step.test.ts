/**
 * Adversarial: the wall clock steps forward by more than the heartbeat TTL (an NTP step, a host
 * whose clock was set by hand) while `start` runs on the SQLite registry. No time passed for
 * the process: its heartbeat is on schedule and its leases are alive (the memory registry too). The step must not
 * deregister anything — no delete reaches /v1/watch readers and the next cycle re-creates
 * nothing. The clock is the real one with its wall reading offset: timers and elapsed time stay real.
 */
import {readFile} from 'node:fs/promises';
import {Writable} from 'node:stream';
import {pino} from 'pino';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {parseConfig} from '../../src/config/load.ts';
import type {InventoryEvent} from '../../src/inventory/inventory.ts';
import {startService} from '../../src/service/service.ts';
import {captureIo} from '../helpers/env.ts';
import {SteppedClock} from '../helpers/stepped-clock.ts';
import {ALL_NAMES, startHarness, type Harness} from '../reliability/cloud-fault-harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
}, 60_000);
afterAll(async () => {
  await h.close();
});

for (const storage of ['sqlite', 'memory'] as const) it(`a forward step of the wall clock past the TTL deregisters nothing on the ${storage} registry`, async () => {
  const file = await h.config(`clock-step-${storage}`, true);
  const text = await readFile(file, 'utf8');
  const config = parseConfig(storage === 'sqlite' ? text : text.replace(/^storage: .*$/m, 'storage: {type: memory}'), file);
  expect(config.storage.type).toBe(storage);
  const clock = new SteppedClock();
  const logger = pino({level: 'silent'}, new Writable({write: (_c, _e, done) => done()}));
  const svc = await startService({
    config,
    io: captureIo().io,
    clock,
    logger,
    discovery: {azure: {logger, clientOptions: {retryOptions: {maxRetries: 1, retryDelayInMs: 5, maxRetryDelayInMs: 10}}}},
  });
  try {
    // Ready = the first cycle's plan is applied (it may end before a waiter could be added).
    await expect.poll(async () => (await fetch(`${svc.url}/readyz`)).status, {timeout: 60_000}).toBe(200);
    expect(svc.inventory.list().map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
    const deletes: string[] = [];
    const unsubscribe = svc.inventory.subscribe((event: InventoryEvent) => {
      if (event.type === 'delete') deletes.push(event.name);
    });

    // Two TTLs (10 min default) ahead, in an instant.
    clock.offsetMs = 2 * config.heartbeat.ttl;
    const done = svc.nextCycle();
    svc.trigger();
    const after = await done;
    unsubscribe();

    expect(deletes).toEqual([]);
    expect(after.counts.create).toBe(0);
    expect(after.counts.delete).toBe(0);
    expect(svc.inventory.list().map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
  } finally {
    await svc.stop({deregister: false, graceMs: 0});
  }
}, 90_000);
