/**
 * Starts moto (`moto_server`, the AWS emulator LocalStack builds on) on loopback for tests
 * that check our reading of the AWS APIs against an implementation we did not write.
 */
import {spawn, spawnSync, type ChildProcess} from 'node:child_process';
import {describe, it} from 'vitest';

/** A running moto server. */
export interface Moto {
  /** `http://127.0.0.1:<port>`: one endpoint for every AWS service moto emulates. */
  readonly endpoint: string;
  /** Environment for a process (or SDK client) that should reach moto and nothing else. */
  readonly env: Readonly<Record<string, string>>;
  /** Clears every emulated resource (moto's `/moto-api/reset`). */
  reset(): Promise<void>;
  /** Stops the server. */
  stop(): Promise<void>;
}

/** Whether `moto_server` is on PATH. CI installs nothing for it: it comes with the machine image. */
export function motoAvailable(): boolean {
  return spawnSync('sh', ['-c', 'command -v moto_server'], {stdio: 'ignore'}).status === 0;
}

/**
 * Starts `moto_server` on loopback port 0 and waits until it answers where it says it runs: a port
 * picked for it and freed before it binds could be taken by another process in between.
 */
export async function startMoto(timeoutMs = 30_000): Promise<Moto> {
  const child: ChildProcess = spawn('moto_server', ['-H', '127.0.0.1', '-p', '0'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {...process.env, PYTHONUNBUFFERED: '1'},
  });
  let stderr = '';
  let endpoint: string | undefined;
  child.stderr?.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-4000);
    // Werkzeug's banner: ` * Running on http://127.0.0.1:<port>`.
    endpoint ??= /Running on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1];
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`moto_server exited early: ${stderr}`);
    if (endpoint === undefined) {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`moto_server did not say where it runs within ${timeoutMs} ms: ${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    try {
      const res = await fetch(`${endpoint}/moto-api/`, {signal: AbortSignal.timeout(1000)});
      await res.body?.cancel();
      if (res.status < 500) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`moto_server did not answer on ${endpoint} within ${timeoutMs} ms: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const env = {
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: 'AKIAMOTOTESTKEY00001',
    AWS_SECRET_ACCESS_KEY: 'moto-test-secret-key-0000000000000000000',
    AWS_REGION: 'us-east-1',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
  return {
    endpoint,
    env,
    async reset() {
      const res = await fetch(`${endpoint}/moto-api/reset`, {method: 'POST'});
      await res.body?.cancel();
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

/**
 * `describe` for suites that need moto: runs them when `moto_server` exists; otherwise skips them
 * with a message outside CI and registers a failing test in CI, so a missing emulator cannot pass
 * silently.
 */
export function describeWithMoto(name: string, fn: () => void): void {
  if (motoAvailable()) {
    describe(name, fn);
    return;
  }
  const message = 'moto_server not found on PATH (it comes with the Python 3.11 of the machine image: pip install "moto[server]")';
  if (process.env['CI']) {
    describe(name, () => {
      it('needs moto', () => {
        throw new Error(message);
      });
    });
    return;
  }
  console.warn(`skipping "${name}": ${message}`);
  describe.skip(`${name} (skipped: ${message})`, fn);
}
