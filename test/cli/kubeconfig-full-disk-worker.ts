/**
 * Worker of kubeconfig-full-disk.test.ts, in its own mount namespace: a kubeconfig on a small
 * tmpfs, the volume then filled, then `writePrivateFile` (what `kubeconfig -o` writes with) asked
 * to replace it. Prints `RESULT {json}`: the error, and the file's content afterwards.
 */
import {readFileSync, rmSync, writeFileSync} from 'node:fs';
import path from 'node:path';
import {writePrivateFile} from '../../src/cli/kubeconfig.ts';
import {fillDisk, mountWorkerTmpfs} from '../helpers/tmpfs.ts';

const {dir} = mountWorkerTmpfs(process.argv[2], '1m', 'kubeconfig-full-disk-worker.ts DIR');
const file = path.join(dir, 'kubeconfig.yaml');
const before = `apiVersion: v1\nkind: Config\ncontexts:\n${'- name: existing-context\n'.repeat(200)}`;
writeFileSync(file, before, {mode: 0o600});
fillDisk(path.join(dir, 'filler'), 4096);
let error: string | undefined;
try {
  await writePrivateFile(file, `apiVersion: v1\nkind: Config\ncontexts:\n${'- name: new-context\n'.repeat(20_000)}`);
} catch (e) {
  error = (e as NodeJS.ErrnoException).code ?? String(e);
}
const after = readFileSync(file, 'utf8');
const leftovers = (await import('node:fs')).readdirSync(dir).filter((f) => f !== 'kubeconfig.yaml' && f !== 'filler');
rmSync(path.join(dir, 'filler'));
process.stdout.write(`RESULT ${JSON.stringify({error, kept: after === before, afterBytes: after.length, leftovers})}\n`);
