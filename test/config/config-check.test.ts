import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {parse} from 'yaml';
import {runConfigCheck} from '../../src/cli/config-check.ts';
import type {CliIo} from '../../src/cli/io.ts';

const examplePath = new URL('../../discovery.example.yaml', import.meta.url).pathname;

function capturingIo(): CliIo & {out: string; err: string} {
  const io = {
    out: '',
    err: '',
    stdout: (text: string) => {
      io.out += text;
    },
    stderr: (text: string) => {
      io.err += text;
    },
    env: {},
    isTty: false,
  };
  return io;
}

describe('config check', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kube-discovery-check-'));
  });
  afterAll(async () => {
    await rm(dir, {recursive: true, force: true});
  });

  it('prints the effective config as YAML and exits 0 for a valid file', async () => {
    const io = capturingIo();
    expect(await runConfigCheck(['-c', examplePath], io)).toBe(0);
    const printed = parse(io.out) as Record<string, Record<string, unknown>>;
    expect(printed['discovery_service']?.['poll_interval']).toBe('5m');
    expect(printed['heartbeat']).toEqual({ttl: '10m', keepalive_interval: '3m20s'});
    expect(printed['probe']).toEqual({enabled: true, timeout: '5s', concurrency: 10});
    expect(io.err).toBe('');
  });

  it('accepts --config too, and warns about a config that discovers nothing', async () => {
    const path = join(dir, 'empty-matchers.yaml');
    await writeFile(path, 'version: v1\ndiscovery_service: {discovery_group: g}\n');
    const io = capturingIo();
    expect(await runConfigCheck(['--config', path], io)).toBe(0);
    expect(io.out).toContain('discovery_group: g\n');
    expect(io.out).toContain('storage:\n  type: sqlite\n  path: ./data/registry.db\n');
    expect(io.err).toContain('warning: discovery_service has no aws or azure matchers');
  });

  it('prints every problem to stderr and exits 2 for a bad file', async () => {
    const path = join(dir, 'bad.yaml');
    await writeFile(path, 'version: v1\ndiscovery_service:\n  discovery_group: g\n  poll_interval: 5\nlog: {level: loud}\n');
    const io = capturingIo();
    expect(await runConfigCheck(['-c', path], io)).toBe(2);
    expect(io.out).toBe('');
    const lines = io.err.trimEnd().split('\n');
    expect(lines).toEqual([
      `${path}:4:18: discovery_service.poll_interval: expected a duration with a unit such as 90s, 5m, 1h30m or 500ms, found a number 5`,
      `${path}:5:14: log.level: expected one of trace, debug, info, warn, error, fatal, found a string "loud"`,
      `${path}: 2 problems`,
    ]);
  });

  it('exits 2 naming the file when it does not exist', async () => {
    const io = capturingIo();
    const path = join(dir, 'missing.yaml');
    expect(await runConfigCheck(['-c', path], io)).toBe(2);
    expect(io.err).toContain(`${path}: expected a readable YAML config file, found no such file`);
  });

  it('prints usage and exits 2 without -c', async () => {
    const io = capturingIo();
    expect(await runConfigCheck([], io)).toBe(2);
    expect(io.err).toContain('usage: kube-discovery config check -c FILE');
  });

  it('prints usage and exits 2 for an unknown flag', async () => {
    const io = capturingIo();
    expect(await runConfigCheck(['-c', examplePath, '--fast'], io)).toBe(2);
    expect(io.err).toMatch(/--fast[\s\S]*usage: kube-discovery config check -c FILE/);
    expect(io.out).toBe('');
  });
});
