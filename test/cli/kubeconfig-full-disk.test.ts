/**
 * `kube-discovery kubeconfig -o FILE` on a full volume: the write fails, and the kubeconfig that
 * was there stays whole (its contexts are the user's way into every cluster). Runs in its own
 * mount namespace on a small tmpfs filled to ENOSPC, as the registry's full-disk rows do.
 */
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {afterAll, expect, it} from 'vitest';
import {runInMountNamespace} from '../helpers/tmpfs.ts';

const WORKER = path.resolve(import.meta.dirname, 'kubeconfig-full-disk-worker.ts');
const dir = mkdtempSync(path.join(tmpdir(), 'kd-kubeconfig-full-'));
afterAll(() => rmSync(dir, {recursive: true, force: true}));

it('a kubeconfig that cannot be written for want of room leaves the previous file whole, and no scratch file behind', () => {
  const seen = runInMountNamespace<{error?: string; kept: boolean; afterBytes: number; leftovers: string[]}>(WORKER, [dir]);
  expect(seen.error).toBe('ENOSPC');
  expect(seen, JSON.stringify(seen)).toMatchObject({kept: true, leftovers: []});
}, 90_000);
