/**
 * The control API the cycle driver (bench/cycle-driver.ts) calls between cycles — the subset of
 * bench/sim.ts's it needs — for the benches whose world lives in the bench process (W4, W5):
 * call counts, one churn step, and the check of what the registry holds against the world.
 */
import {createServer, type IncomingMessage, type ServerResponse} from 'node:http';
import type {AddressInfo} from 'node:net';

/** What a bench hands the control server. */
export interface ControlWorld<Step extends object> {
  /** Calls per operation in the shape GET /stats answers. */
  stats(): Record<string, unknown>;
  /** Forgets the counted calls (POST /stats/reset). */
  resetStats(): void;
  /** One churn step between cycles, and the entries it creates and deletes (the answer's counts). */
  churn(): {step: Step; created: number; deleted: number};
  /** The registry keys a correct inventory holds now. */
  expectedKeys(): ReadonlySet<string>;
  /**
   * Keys a correct inventory may still hold although they are no longer expected: entries whose
   * deregistration waits for a second successful listing (the two-walk grace). Not counted as unexpected.
   */
  graceKeys?(): ReadonlySet<string>;
  /** Keys whose deregistration is right now (their cluster left the scope); default every key no longer expected. */
  departedKeys?(): ReadonlySet<string>;
}

/** What one POST /verify found beyond its answer, for the bench's false-deregistration count. */
export interface Verification {
  /** Grace keys the inventory still held. */
  readonly graced: number;
  /** Keys the previous verification found that are gone now and rightly so (see ControlWorld.departedKeys). */
  readonly departed: number;
}

/** A running control server: its URL and the churn steps taken so far. */
export interface ControlServer<Step> {
  readonly url: string;
  readonly steps: Step[];
  /** One per POST /verify, in order. */
  readonly verifications: Verification[];
  close(): Promise<void>;
}

/** Starts the control server on a free loopback port. */
export async function startControl<Step extends object>(world: ControlWorld<Step>): Promise<ControlServer<Step>> {
  const steps: Step[] = [];
  const verifications: Verification[] = [];
  let previous: ReadonlySet<string> | undefined;
  const reply = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, {'content-type': 'application/json'});
    res.end(JSON.stringify(body));
  };
  const read = async (req: IncomingMessage): Promise<string> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  const server = createServer((req, res) => {
    const route = `${req.method} ${(req.url ?? '/').split('?')[0]}`;
    void (async () => {
      switch (route) {
        case 'GET /stats': return reply(res, 200, world.stats());
        case 'POST /stats/reset': world.resetStats(); return reply(res, 200, {reset: true});
        case 'POST /limits/refill': return reply(res, 200, {refilled: true});
        case 'POST /churn': {
          const {step, created, deleted} = world.churn();
          steps.push(step);
          return reply(res, 200, {created, deleted, retagged: 0, ...step});
        }
        case 'POST /verify': {
          const {keys} = JSON.parse(await read(req)) as {keys: string[]};
          const expected = world.expectedKeys();
          const got = new Set(keys);
          const missing = [...expected].filter((k) => !got.has(k));
          const grace = world.graceKeys?.() ?? new Set<string>();
          const unexpected = [...got].filter((k) => !expected.has(k) && !grace.has(k));
          const graced = [...got].filter((k) => !expected.has(k) && grace.has(k)).length;
          const gone = world.departedKeys?.();
          const departed = previous === undefined ? 0 : [...previous].filter((k) => !got.has(k) && (gone ? gone.has(k) : !expected.has(k))).length;
          previous = got;
          verifications.push({graced, departed});
          return reply(res, 200, {expected: expected.size, found: expected.size - missing.length, missing: missing.length, unexpected: unexpected.length, graced, missing_sample: missing.slice(0, 5)});
        }
        default: return reply(res, 404, {error: `no route ${route}`});
      }
    })().catch((error: unknown) => reply(res, 500, {error: String(error)}));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    steps,
    verifications,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
