/**
 * Adversarial: the SQLite registry's volume is full when the service starts (it filled up while
 * the process was restarting). A full disk while running is a documented fault row (everything
 * served and kept alive in memory); at start it must be no worse: the stored inventory is served
 * (read-only, as on a read-only volume) instead of the service failing to open its registry and
 * exiting, and once there is room again writes work and every entry is still there.
 * Runs in its own mount namespace (a small tmpfs filled to ENOSPC), as the registry fault rows do.
 */
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {afterAll, expect, it} from 'vitest';
import {runInMountNamespace} from '../helpers/tmpfs.ts';

const WORKER = path.resolve(import.meta.dirname, 'sqlite-full-at-open-worker.ts');
const dir = mkdtempSync(path.join(tmpdir(), 'kd-full-open-'));
afterAll(() => rmSync(dir, {recursive: true, force: true}));

it('a registry whose volume is full at start is served, and written once there is room', () => {
  const seen = runInMountNamespace<{keys: string[]; openError?: string; served: string[]; writable: string[]}>(WORKER, [dir]);
  expect(seen.openError).toBeUndefined();
  expect(seen.served).toEqual(seen.keys);
  expect(seen.writable).toEqual(seen.keys);
}, 90_000);
