/**
 * Adversarial: `ls` and `kubeconfig` against a server that answers every page alike, its
 * `next_page_token` included (a caching proxy that ignores the query string, a broken replica).
 * The CLI followed the token for ever: it never ended, holding every copy of the page. It must stop
 * with a clear error and write nothing.
 */
import {createServer, type Server} from 'node:http';
import type {AddressInfo} from 'node:net';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {runKubeconfig} from '../../src/cli/kubeconfig.ts';
import {lsCommand} from '../../src/cli/ls.ts';
import {captureIo} from '../helpers/env.ts';
import {eksKubeServer} from '../probe/eks-fixtures.ts';

let server: Server;
let url: string;
let pages = 0;

beforeAll(async () => {
  const page = JSON.stringify({items: [eksKubeServer('prod-eks-us-east-1-111111111111')], next_page_token: 'cHJvZA'});
  server = createServer((_req, res) => {
    pages++;
    res.writeHead(200, {'content-type': 'application/json'});
    res.end(page);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

/** Runs `command`, failing the test if it is still paging after 200 pages. */
async function bounded(run: () => Promise<number>): Promise<number> {
  pages = 0;
  let timer: NodeJS.Timeout | undefined;
  const runaway = new Promise<never>((_, reject) => {
    timer = setInterval(() => {
      if (pages > 200) reject(new Error(`still paging after ${pages} pages`));
    }, 20);
  });
  try {
    return await Promise.race([run(), runaway]);
  } finally {
    clearInterval(timer);
  }
}

describe('a server answering the same next_page_token again', () => {
  it('ls stops with an error', async () => {
    const out = captureIo({});
    const code = await bounded(() => lsCommand()(['--server', url, '-o', 'json'], out.io));
    expect(code).toBe(1);
    expect(out.stderr()).toContain('next_page_token');
    expect(out.stdout()).toBe('');
  });

  it('kubeconfig stops with an error and prints no kubeconfig', async () => {
    const out = captureIo({});
    const code = await bounded(() => runKubeconfig(['--server', url], out.io));
    expect(code).toBe(1);
    expect(out.stderr()).toContain('next_page_token');
    expect(out.stdout()).toBe('');
  });
});
