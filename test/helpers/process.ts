/** Runs the CLI as a child process, the way operators and kubectl run it. */
import {spawn, type ChildProcess} from 'node:child_process';
import path from 'node:path';

/** Absolute path of the CLI entry point. */
export const CLI = path.resolve(import.meta.dirname, '../../src/cli/main.ts');

/** A running CLI process with its captured output. */
export interface CliProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or the signal name). */
  readonly exited: Promise<number | string>;
  /** Resolves when stdout or stderr contains `text` (rejects after `timeoutMs`). */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
}

/** Spawns `node src/cli/main.ts ...args` on the project's Node with `env`. */
export function spawnCli(args: readonly string[], env: Readonly<Record<string, string | undefined>>): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], {env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe']});
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString('utf8');
    for (const l of listeners) l();
  });
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString('utf8');
    for (const l of listeners) l();
  });
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor(text, timeoutMs = 15_000) {
      const seen = (): boolean => (typeof text === 'string' ? (out + err).includes(text) : text.test(out + err));
      if (seen()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${String(text)}; output so far:\n${out}\n${err}`));
        }, timeoutMs);
        const check = (): void => {
          if (seen()) {
            clearTimeout(timer);
            listeners.delete(check);
            resolve();
          }
        };
        listeners.add(check);
        void exited.then(() => {
          if (!seen()) {
            clearTimeout(timer);
            listeners.delete(check);
            reject(new Error(`process exited before ${String(text)}; output:\n${out}\n${err}`));
          }
        });
      });
    },
  };
}

const SERVING = /serving on http:\/\/127\.0\.0\.1:(\d+)/g;

/**
 * The port a `start` process serves its API on, from its last `serving on` log line (undefined
 * before it). Give it `listen_addr: "127.0.0.1:0"`: a port picked for it and freed before it binds
 * it could be taken by another process in between.
 */
export function servedPort(proc: CliProcess): number | undefined {
  const said = [...(proc.stdout() + proc.stderr()).matchAll(SERVING)].at(-1);
  return said?.[1] === undefined ? undefined : Number(said[1]);
}

/** Waits for the `serving on` line of a `start` process bound to port 0 and returns its port. */
export async function servingPort(proc: CliProcess, timeoutMs?: number): Promise<number> {
  await proc.waitFor(/serving on http:\/\/127\.0\.0\.1:\d+/, timeoutMs);
  return servedPort(proc) as number;
}
