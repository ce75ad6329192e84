import {existsSync, mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {InputError} from '../../src/core/errors.ts';
import {backends, createBackend} from '../../src/registry/index.ts';

describe('createBackend', () => {
  it('builds the backend named by storage.type', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kd-index-'));
    try {
      const sqlite = await createBackend({type: 'sqlite', path: join(dir, 'data', 'registry.db')} as {type: string}, {clock: new FakeClock()});
      expect(sqlite.name).toBe('sqlite');
      expect(existsSync(join(dir, 'data', 'registry.db'))).toBe(true);
      await sqlite.close();
      const memory = await createBackend({type: 'memory'}, {clock: new FakeClock()});
      expect(memory.name).toBe('memory');
      await memory.close();
    } finally {
      rmSync(dir, {recursive: true, force: true});
    }
  });

  it('rejects an unknown type, listing the known ones', async () => {
    const known = Object.keys(backends).join(', ');
    const attempt = createBackend({type: 'postgres'}, {clock: new FakeClock()});
    await expect(attempt).rejects.toBeInstanceOf(InputError);
    await expect(attempt).rejects.toThrow(`unknown storage type "postgres"; expected one of: ${known}`);
    await expect(createBackend({type: 'toString'}, {clock: new FakeClock()})).rejects.toThrow(/unknown storage type "toString"/);
  });
});
