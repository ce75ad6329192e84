// /v1/watch against a client that follows the documented protocol and is cut off at random
// points (mid-snapshot, mid-replay, right after `synced`) while entries are added, relabelled
// and deleted between its connections, with a history short enough to expire. Whenever it reads
// up to `synced`, it must hold exactly the inventory its filter selects: no entry missing (told
// gone while the inventory has it) and none extra (a ghost it was never told to delete).
import {request, type IncomingMessage} from 'node:http';
import {afterEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {startHttpServer, type HttpServer} from '../../src/http/server.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {context, eksCluster, okResult} from '../discovery/builders.ts';

const suffix = '-eks-us-east-1-111111111111';
const cleanup: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** A small seeded generator: the same seed plays the same story. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

interface SseEvent {
  readonly id?: string;
  readonly event: string;
  readonly data: string;
}

/** Reads events until `synced` or until `max` events were read, then drops the connection. */
async function session(url: string, lastEventId: string | undefined, max: number): Promise<SseEvent[]> {
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    request(url, {headers: lastEventId === undefined ? {} : {'last-event-id': lastEventId}}, resolve).on('error', reject).end();
  });
  res.setEncoding('utf8');
  const events: SseEvent[] = [];
  let text = '';
  await new Promise<void>((resolve) => {
    const done = (): void => {
      res.destroy();
      resolve();
    };
    res.on('data', (chunk: string) => {
      text += chunk;
      let end: number;
      while ((end = text.indexOf('\n\n')) >= 0 && events.length < max) {
        const lines = text.slice(0, end).split('\n').filter((l) => l !== '' && !l.startsWith(':'));
        text = text.slice(end + 2);
        if (lines.length === 0) continue;
        const field = (name: string): string | undefined => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
        const id = field('id');
        events.push({...(id === undefined ? {} : {id}), event: field('event') ?? 'message', data: field('data') ?? ''});
        if (events.at(-1)?.event === 'synced') break;
      }
      if (events.length >= max || events.at(-1)?.event === 'synced') done();
    });
    res.on('close', done);
  });
  return events;
}

describe('/v1/watch resumption, cut off anywhere', () => {
  it.each(Array.from({length: 8}, (_, i) => ({seed: i + 1, history: i % 3 === 0 ? 5 : 4096, filter: i % 2 === 0 ? 'team=a' : ''})))(
    'ends each complete read with exactly the selected inventory (seed $seed, history $history, labels "$filter")',
    async ({seed, history, filter}) => {
      const random = seeded(seed);
      const backend = new MemoryBackend({clock: systemClock});
      const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
      await heartbeat.start();
      const inventory = new Inventory({backend, group: 'g1', clock: systemClock, historySize: history});
      await inventory.start();
      const server: HttpServer = await startHttpServer({listenAddr: '127.0.0.1:0', inventory, readiness: async () => ({ready: true, status: 'ready'}), status: () => ({})});
      cleanup.push(() => backend.close(), () => heartbeat.stop({deregister: false}), () => inventory.stop(), () => server.close());
      const url = `${server.url}/v1/watch${filter ? `?labels=${filter}` : ''}`;
      const selected = (labels: Record<string, string>): boolean => filter === '' || labels['team'] === 'a';

      const held = new Map<string, string>();
      let lastEventId: string | undefined;
      const wrong: string[] = [];
      for (let round = 0; round < 40; round++) {
        for (let k = Math.floor(random() * 6); k > 0; k--) {
          const name = `c${Math.floor(random() * 4)}`;
          if (random() < 0.3) {
            await heartbeat.remove(`${name}${suffix}`);
            continue;
          }
          // A new tag value each time: every announce is a change, relabelled or not.
          const tags = {team: random() < 0.5 ? 'a' : 'b', round: String(round)};
          const evaluation = evaluate([okResult('us-east-1', '111111111111', [eksCluster(name, 'us-east-1', '111111111111', {tags})])], context('g1'));
          for (const c of evaluation.candidates.values()) await heartbeat.announce(c.server);
        }
        const max = 1 + Math.floor(random() * 5);
        const events = await session(url, lastEventId, max);
        // As the protocol says: a stream without Last-Event-ID, or one that begins with `reset`, replaces what is held.
        if (lastEventId === undefined) held.clear();
        for (const e of events) {
          if (e.event === 'reset') held.clear();
          if (e.event === 'put') {
            const server = JSON.parse(e.data) as {metadata: {name: string}; spec: {cluster: {metadata: {labels: Record<string, string>}}}};
            held.set(server.metadata.name, server.spec.cluster.metadata.labels['round'] ?? '');
          }
          if (e.event === 'delete') held.delete((JSON.parse(e.data) as {name: string}).name);
          if (e.id !== undefined) lastEventId = e.id;
        }
        if (events.at(-1)?.event !== 'synced') continue;
        const want = new Map(inventory.list().filter((s) => selected(s.spec.cluster.metadata.labels)).map((s) => [s.metadata.name, s.spec.cluster.metadata.labels['round'] ?? '']));
        const names = (list: Iterable<string>): string => [...list].map((n) => n.replace(suffix, '')).sort().join(',');
        const missing = [...want.keys()].filter((n) => !held.has(n));
        const extra = [...held.keys()].filter((n) => !want.has(n));
        const stale = [...want].filter(([n, r]) => held.has(n) && held.get(n) !== r).map(([n]) => n);
        if (missing.length + extra.length + stale.length > 0) wrong.push(`round ${round}: missing [${names(missing)}] extra [${names(extra)}] outdated [${names(stale)}]`);
      }
      expect(wrong).toEqual([]);
    },
    60_000,
  );
});
