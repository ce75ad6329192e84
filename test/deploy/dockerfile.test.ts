// deploy/Dockerfile, checked without a container engine: statically (stages, user, exec-form
// entry point, ports, what is copied and what .dockerignore lets through), then by building
// the image's /app the way the Dockerfile does — the same COPYs, the same `npm ci` flags — in
// a temporary directory and running its entry point with Node 24. SLOW (one `npm ci`, ~10-60 s).
import {execFile} from 'node:child_process';
import {cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {promisify} from 'node:util';
import {afterAll, describe, expect, it} from 'vitest';
import {parse} from 'yaml';
import {execForm, isIgnored, parseCopy, parseDockerfile, type Stage} from './dockerfile-model.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');
const run = promisify(execFile);

const stages = parseDockerfile(read('deploy/Dockerfile'));
const dockerignore = read('.dockerignore');
const final = stages.at(-1) as Stage;
const finalArgs = (keyword: string): string[] => final.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);
const workdir = finalArgs('WORKDIR').at(-1) ?? '/';
const entrypoint = execForm(finalArgs('ENTRYPOINT').at(-1) ?? '') ?? [];
const cmd = execForm(finalArgs('CMD').at(-1) ?? '') ?? [];

/** Context path → path inside the image, for every COPY of the build context into the final stage. */
function contextCopies(stage: Stage): {source: string; target: string}[] {
  return stage.instructions
    .filter((i) => i.keyword === 'COPY')
    .map((i) => parseCopy(i.args))
    .filter((c) => c.from === undefined)
    .flatMap((c) => c.sources.map((source) => ({source, target: path.posix.resolve(workdir, c.destination, c.destination.endsWith('/') ? source : '')})));
}

/** Files reached by static imports from the entry point (relative `.ts` and `.json` imports). */
function reachableFiles(entry: string): Set<string> {
  const seen = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = read(file);
    for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|new URL\(\s*)'(\.{1,2}\/[^']+)'/g)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), m[1] ?? ''));
      if (/\.(ts|json)$/.test(target) && existsSync(path.join(ROOT, target))) queue.push(target);
    }
  }
  return seen;
}

/** The base config the manifests mount, and every overlay's replacement. */
const deployConfigs = ['deploy/kubernetes/base/discovery.yaml', ...readdirSync(path.join(ROOT, 'deploy/kubernetes/overlays'))
  .map((o) => `deploy/kubernetes/overlays/${o}/discovery.yaml`)
  .filter((f) => existsSync(path.join(ROOT, f)))];

describe('Dockerfile, statically', () => {
  it('is multi-stage: production dependencies installed in a Node 24 stage, run on a Node 24 runtime', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const install = stages.slice(0, -1).flatMap((s) => s.instructions).find((i) => i.keyword === 'RUN' && /\bnpm ci\b/.test(i.args));
    expect(install?.args).toMatch(/--omit=dev\b/);
    expect(stages[0]?.from).toMatch(/^node:24\b/);
    expect(final.from).toMatch(/^(node:24\b|gcr\.io\/distroless\/nodejs24-)/);
    expect(final.instructions.some((i) => i.keyword === 'RUN'), 'the runtime stage runs nothing at build time (distroless has no shell)').toBe(false);
  });

  it('runs as a numeric non-root user, the one the Kubernetes manifests ask for', () => {
    const user = finalArgs('USER').at(-1) ?? '';
    expect(user).toMatch(/^\d+(:\d+)?$/);
    const uid = Number(user.split(':')[0]);
    expect(uid).toBeGreaterThan(0);
    const statefulSet = parse(read('deploy/kubernetes/base/statefulset.yaml')) as {spec: {template: {spec: {securityContext: {runAsUser: number}}}}};
    expect(statefulSet.spec.template.spec.securityContext.runAsUser).toBe(uid);
  });

  it('starts node directly on src/cli/main.ts in exec form (node is PID 1 and gets SIGTERM), no shell wrapper', () => {
    expect(path.posix.basename(entrypoint[0] ?? '')).toBe('node');
    expect(entrypoint.at(-1)).toBe(path.posix.join(workdir, 'src/cli/main.ts'));
    expect(entrypoint.concat(cmd).some((a) => /^(\/bin\/)?(ba)?sh$/.test(a))).toBe(false);
    expect(cmd).toEqual(['start', '-c', '/etc/kube-discovery/discovery.yaml']);
  });

  it('runs node with exactly the Node flags and the environment of `npm start` (the memory sizing was measured with them)', () => {
    const start = (JSON.parse(read('package.json')) as {scripts: {start: string}}).scripts.start.split(/\s+/);
    const node = start.indexOf('node');
    const startFlags = start.slice(node + 1, start.indexOf('src/cli/main.ts'));
    expect(startFlags.length).toBeGreaterThan(0);
    expect(entrypoint.slice(1, -1)).toEqual(startFlags);
    // glibc's allocator settings: one arena, so memory freed by one thread serves the others
    // instead of staying resident in per-thread arenas (W4's peak RSS, issue 17).
    const startEnv = start.slice(0, node);
    expect(startEnv).toContain('MALLOC_ARENA_MAX=1');
    const imageEnv = finalArgs('ENV').filter((e) => /^MALLOC_/.test(e));
    expect(imageEnv).toEqual(startEnv);
  });

  it('ships a Node compile cache filled by the runtime image\'s Node with the entry point\'s flags (the cache is keyed by them)', () => {
    const cacheStage = stages.find((s) => s.name === 'compile-cache');
    expect(cacheStage?.from).toBe(final.from);
    const warm = execForm(cacheStage?.instructions.find((i) => i.keyword === 'RUN')?.args ?? '') ?? [];
    expect(warm[0]).toBe(entrypoint[0]);
    expect(warm.slice(1, 1 + entrypoint.length - 2)).toEqual(entrypoint.slice(1, -1));
    const cacheEnv = (stage: Stage | undefined): string | undefined =>
      stage?.instructions.filter((i) => i.keyword === 'ENV').map((i) => /^NODE_COMPILE_CACHE=(\S+)$/.exec(i.args)?.[1]).find((v) => v !== undefined);
    const dir = cacheEnv(final);
    expect(dir).toBeDefined();
    expect(cacheEnv(cacheStage)).toBe(dir);
    expect(finalArgs('COPY')).toContain(`--from=compile-cache ${dir} ./${path.posix.relative(workdir, dir ?? '')}`);
  });

  it('the Kubernetes container runs the image CMD and exposes the EXPOSEd port, which the config listens on', () => {
    const statefulSet = parse(read('deploy/kubernetes/base/statefulset.yaml')) as {spec: {template: {spec: {containers: {args: string[]; ports: {containerPort: number}[]}[]}}}};
    const container = statefulSet.spec.template.spec.containers[0];
    expect(container?.args).toEqual(cmd);
    const exposed = finalArgs('EXPOSE').map((p) => Number(p.split('/')[0]));
    const listen = (parse(read('deploy/kubernetes/base/discovery.yaml')) as {http: {listen_addr: string}}).http.listen_addr;
    expect(exposed).toEqual([Number(listen.split(':').at(-1))]);
    expect(container?.ports.map((p) => p.containerPort)).toEqual(exposed);
  });

  it('copies every file the entry point imports, and .dockerignore lets each of them through', () => {
    const copies = contextCopies(final);
    const copied = (file: string): boolean => copies.some((c) => file === c.source || file.startsWith(`${c.source.replace(/\/$/, '')}/`));
    const needed = [...reachableFiles('src/cli/main.ts'), 'package.json'];
    expect(needed.length).toBeGreaterThan(20);
    for (const file of needed) {
      expect(copied(file), `${file} is imported but not copied into the image`).toBe(true);
      expect(isIgnored(dockerignore, file), `${file} is excluded by .dockerignore`).toBe(false);
    }
    for (const {source} of copies) expect(existsSync(path.join(ROOT, source)), `COPY ${source}: no such path in the context`).toBe(true);
  });

  it('.dockerignore keeps local state, dev tooling and tests out of the build context', () => {
    for (const file of ['node_modules/yaml/package.json', 'data/registry.db', '.git/config', 'test/cli/configure.test.ts', 'matchers/glob.test.ts', 'discovery.yaml']) {
      expect(isIgnored(dockerignore, file), file).toBe(true);
    }
    for (const file of ['package.json', 'package-lock.json', 'src/cli/main.ts', 'heartbeats/kube-server.ts']) {
      expect(isIgnored(dockerignore, file), file).toBe(false);
    }
  });
});

describe('the image contents, built in a temporary directory (SLOW: npm ci)', () => {
  const app = mkdtempSync(path.join(tmpdir(), 'kd-image-'));
  afterAll(() => rmSync(app, {recursive: true, force: true}));
  // The project's own Node 24 (vitest runs on it); the image's base provides the same major.
  const node = Number(process.versions.node.split('.')[0]) >= 24 ? process.execPath : path.join(ROOT, 'node_modules/node/bin/node');
  const env = {PATH: process.env['PATH'] ?? '', HOME: app, npm_config_cache: process.env['npm_config_cache'] ?? path.join(process.env['HOME'] ?? app, '.npm')};

  /** Copies a context path the way COPY does, leaving out what .dockerignore excludes. */
  const copyContext = (source: string, target: string): void => {
    cpSync(path.join(ROOT, source), target, {
      recursive: true,
      filter: (from) => {
        const rel = path.relative(ROOT, from).split(path.sep).join('/');
        return rel === '' || statSync(from).isDirectory() || !isIgnored(dockerignore, rel);
      },
    });
  };

  it('installs production dependencies with the Dockerfile\'s npm ci flags', async (ctx) => {
    const npm = await run('npm', ['--version'], {env}).then(() => true, () => false);
    if (!npm && process.env['CI'] === undefined) ctx.skip('npm is not installed');
    // The deps stage: its context COPYs (package.json, package-lock.json) and its `npm ci ...` command.
    const deps = stages[0] as Stage;
    for (const {source} of contextCopies(deps)) copyContext(source, path.join(app, path.basename(source)));
    const install = deps.instructions.find((i) => i.keyword === 'RUN' && /\bnpm ci\b/.test(i.args))?.args ?? '';
    const flags = (/\bnpm ci\b([^&;]*)/.exec(install)?.[1] ?? '').trim().split(/\s+/).filter((f) => f !== '');
    await run('npm', ['ci', ...flags, '--prefer-offline', '--loglevel=error'], {cwd: app, env: {...env, npm_config_engine_strict: 'false'}, timeout: 110_000});
    expect(existsSync(path.join(app, 'node_modules/yaml/package.json'))).toBe(true);
    expect(existsSync(path.join(app, 'node_modules/vitest')), 'dev dependencies must not be installed').toBe(false);
    expect(existsSync(path.join(app, 'node_modules/node')), 'the pinned Node dev dependency must not be installed').toBe(false);
    // The runtime stage: its context COPYs into WORKDIR.
    for (const {source, target} of contextCopies(final)) copyContext(source, path.join(app, path.posix.relative(workdir, target)));
  }, 120_000);

  it('runs the entry point with production dependencies only: --version and config check of every shipped config', async () => {
    expect(existsSync(path.join(app, 'src/cli/main.ts')), 'the install step above must have run').toBe(true);
    const main = path.join(app, path.posix.relative(workdir, entrypoint.at(-1) ?? ''));
    const version = await run(node, [main, '--version'], {cwd: app, env});
    expect(version.stdout.trim()).toBe((JSON.parse(read('package.json')) as {version: string}).version);
    for (const config of deployConfigs) {
      const file = path.join(app, 'etc', config.replaceAll('/', '_'));
      mkdirSync(path.dirname(file), {recursive: true});
      writeFileSync(file, read(config));
      const checked = await run(node, [main, 'config', 'check', '-c', file], {cwd: app, env});
      expect(checked.stdout, config).toContain('version: v1');
    }
  });

  it('every source file in the image loads with production dependencies only', async () => {
    const files = readdirSync(path.join(app, 'src'), {recursive: true, encoding: 'utf8'}).filter((f) => f.endsWith('.ts')).map((f) => path.join(app, 'src', f));
    expect(files.length).toBeGreaterThan(20);
    const script = `for (const f of ${JSON.stringify(files)}) await import(f).catch((e) => { console.error(f + ': ' + e.message); process.exitCode = 1; });`;
    const result = await run(node, ['--input-type=module', '-e', script], {cwd: app, env}).then((r) => ({code: 0, stderr: r.stderr}), (e: {code: number; stderr: string}) => ({code: e.code, stderr: e.stderr}));
    expect(result).toEqual({code: 0, stderr: ''});
  });
});
