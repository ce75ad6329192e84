/**
 * Adversarial: the service serves its SQLite registry read-only (the volume was mounted read-only)
 * for longer than the heartbeat TTL, then the volume becomes writable again. Nobody could renew a
 * lease meanwhile ("nothing can expire in a store nobody can write"), and readers were served every
 * entry throughout. The first write that finds the file writable must not turn those entries into
 * lapsed ones and purge them before the heartbeat re-puts them: the group's read that follows
 * (reannounce, the inventory's re-list) still has every entry, and no delete reaches a watcher.
 * Runs in its own mount namespace (a tmpfs remounted ro and rw), as the registry fault rows do.
 */
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {afterAll, expect, it} from 'vitest';
import {runInMountNamespace} from '../helpers/tmpfs.ts';

const WORKER = path.resolve(import.meta.dirname, 'sqlite-readonly-lapse-worker.ts');
const dir = mkdtempSync(path.join(tmpdir(), 'kd-ro-lapse-'));
afterAll(() => rmSync(dir, {recursive: true, force: true}));

it('a registry served read-only for longer than the TTL keeps every entry once it is writable again', () => {
  const seen = runInMountNamespace<{readOnly: string[]; readOnlyLater: string[]; writeRefused: boolean; writable: string[]; deletes: number}>(WORKER, [dir]);
  expect(seen.readOnly).toEqual(['kube_servers/g/a']);
  expect(seen.readOnlyLater).toEqual(['kube_servers/g/a']);
  expect(seen.writeRefused).toBe(true);
  expect(seen.writable).toEqual(['kube_servers/g/a']);
  expect(seen.deletes).toBe(0);
}, 90_000);
