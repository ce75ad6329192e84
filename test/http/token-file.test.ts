/**
 * `http.auth.token_file`: a missing file is a config error with its location (config check and
 * start both refuse it); a file that disappears at run time makes requests 401 (not 500) and is
 * logged once, until it is back.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {Writable} from 'node:stream';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {startService} from '../../src/service/service.ts';
import {captureIo} from '../helpers/env.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-tokenfile-'));
});
afterAll(async () => {
  await rm(dir, {recursive: true, force: true});
});

const configText = (tokenFile: string): string => `version: v1
discovery_service:
  enabled: false
  discovery_group: tokens
storage: {type: memory}
http:
  listen_addr: "127.0.0.1:0"
  auth:
    token_file: ${tokenFile}
`;

describe('http.auth.token_file', () => {
  for (const command of [['config', 'check'], ['start']]) {
    it(`a missing file fails \`${command.join(' ')}\` with key, line and column`, async () => {
      const file = path.join(dir, `missing-${command.length}.yaml`);
      const missing = path.join(dir, 'no-such-tokens');
      await writeFile(file, configText(missing));
      const io = captureIo();
      expect(await main([...command, '-c', file], io.io)).toBe(2);
      expect(io.stderr()).toContain(`${file}:9:17: http.auth.token_file: expected an existing, readable file, found "${missing}", which does not exist`);
    });
  }

  it('a file that disappears at run time answers 401 and is logged once; it works again when back', async () => {
    const tokens = path.join(dir, 'tokens');
    await writeFile(tokens, 'run-time-token-123456\n');
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    const svc = await startService({
      config: parseConfig(configText(tokens), 'tokens.yaml'),
      io: captureIo().io,
      clock: systemClock,
      logger: createLogger({level: 'info', format: 'json', destination: sink}),
    });
    const status = async (): Promise<number> => (await fetch(`${svc.url}/v1/status`, {headers: {authorization: 'Bearer run-time-token-123456'}})).status;
    try {
      expect(await status()).toBe(200);
      await rm(tokens);
      expect(await status()).toBe(401);
      expect(await status()).toBe(401);
      const events = (): string[] => lines.map((l) => (JSON.parse(l) as {event?: string}).event ?? '').filter((e) => e.startsWith('token_file'));
      expect(events()).toEqual(['token_file_unreadable']);
      await writeFile(tokens, 'run-time-token-123456\n');
      expect(await status()).toBe(200);
      expect(events()).toEqual(['token_file_unreadable', 'token_file_readable']);
      expect(lines.join('\n')).not.toContain('run-time-token-123456');
    } finally {
      await svc.stop({deregister: false});
    }
  });
});
