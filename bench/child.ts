/** Runs one of the bench's measured processes and reads the `BENCH_RESULT {json}` line it prints. */
import {spawn} from 'node:child_process';

/** A measured process's result, or why there is none. */
export type ChildOutcome<T> = {readonly ok: true; readonly result: T} | {readonly ok: false; readonly reason: string};

/**
 * Spawns `node [nodeArgs] script -- request` on the project's Node with exactly `env` (plus
 * PATH and HOME). Lines starting with `[` on stderr are progress (to `onProgress`, default stderr); the rest is kept
 * for the error message.
 */
export function runChild<T>(
  script: string,
  request: unknown,
  options: {env: Readonly<Record<string, string>>; nodeArgs?: readonly string[]; timeoutMs?: number; onProgress?: (line: string) => void},
): Promise<ChildOutcome<T>> {
  const progress = options.onProgress ?? ((line: string) => process.stderr.write(`  ${line}\n`));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--expose-gc', ...(options.nodeArgs ?? []), script, '--', JSON.stringify(request)], {
      env: {PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...options.env},
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let tail = '';
    let partial = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString('utf8');
    });
    child.stderr.on('data', (c: Buffer) => {
      const lines = (partial + c.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (line.startsWith('[')) progress(line);
        else tail = `${tail}${line}\n`.slice(-4000);
      }
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30 * 60_000);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
      if (code === 0 && line) {
        resolve({ok: true, result: JSON.parse(line.slice('BENCH_RESULT '.length)) as T});
        return;
      }
      resolve({ok: false, reason: `${script} exited with ${code ?? signal} and no result; last output: ${(tail + partial).trim().split('\n').slice(-8).join(' | ')}`});
    });
  });
}
