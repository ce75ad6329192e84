/** Helpers of the observability tests: the Prometheus text format read back, and the real promtool/prometheus binaries. */
import {spawn} from 'node:child_process';
import {accessSync, constants} from 'node:fs';
import path from 'node:path';
import {describe, it} from 'vitest';

/** One sample of the text exposition format. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Parses the samples of a /metrics body (comments skipped, label values unescaped). */
export function parseSamples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!m) throw new Error(`expected a sample line "name{labels} value", found ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1] ?? ''] = (l[2] ?? '').replace(/\\n/g, '\n').replace(/\\(.)/g, '$1');
    }
    out.push({name: m[1] ?? '', labels, value: Number(m[3])});
  }
  return out;
}

/** The samples of `name` whose labels include `labels`. */
export function samples(text: string, name: string, labels: Readonly<Record<string, string>> = {}): Sample[] {
  return parseSamples(text).filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The value of the one sample of `name` with `labels`; throws when there is none or several. */
export function value(text: string, name: string, labels: Readonly<Record<string, string>> = {}): number {
  const found = samples(text, name, labels);
  if (found.length !== 1) throw new Error(`expected one sample ${name}${JSON.stringify(labels)}, found ${found.length}`);
  return found[0]?.value ?? Number.NaN;
}

/** Path of an executable, from $PATH or /usr/bin; undefined when missing. */
export function findBinary(name: string): string | undefined {
  for (const dir of [...(process.env['PATH'] ?? '').split(path.delimiter), '/usr/bin']) {
    if (dir === '') continue;
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/**
 * `describe` for suites that need a Prometheus binary (Debian package `prometheus`): skipped with
 * a message outside CI, a failing test in CI so a missing install cannot pass silently.
 */
export function describeWithBinary(binary: string, name: string, fn: (file: string) => void): void {
  const file = findBinary(binary);
  if (file !== undefined) {
    describe(name, () => fn(file));
    return;
  }
  const message = `${binary} not found on $PATH or in /usr/bin: install the Debian package "prometheus"`;
  if (process.env['CI']) {
    describe(name, () => {
      it(`needs ${binary}`, () => {
        throw new Error(message);
      });
    });
    return;
  }
  console.warn(`skipping "${name}": ${message}`);
  describe.skip(`${name} (skipped: ${message})`, () => fn(binary));
}

/** Runs a command to completion, feeding `stdin`; resolves with its exit code and output. */
export function run(file: string, args: readonly string[], stdin = ''): Promise<{code: number | null; stdout: string; stderr: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {stdio: ['pipe', 'pipe', 'pipe']});
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({code, stdout, stderr}));
    child.stdin.end(stdin);
  });
}
