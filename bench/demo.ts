/**
 * `npm run demo`: the simulator (about 50 clusters on AWS and Azure, a few unhealthy, one failing
 * region, light throttling, churn every minute) and `kube-discovery start` against it as a child
 * process, on 127.0.0.1:3000 (or a free port), with the registry in ./data/demo.db. Nothing leaves
 * loopback and no cloud credentials are needed. After the first cycle it writes a kubeconfig
 * (./data/demo-kubeconfig.yaml) whose exec plugin carries the simulator's endpoints and fake
 * credentials, so `kubectl` reaches every simulated cluster. Ctrl-C, SIGTERM, SIGHUP (a closed
 * terminal) and its parent going away all stop the service and the simulator.
 *
 *   npm run demo [-- --scenario FILE] [--port N] [--data DIR]
 */
import {spawn, type ChildProcess} from 'node:child_process';
import {mkdir, readFile, writeFile} from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {runKubeconfig} from '../src/cli/kubeconfig.ts';
import {loadScenario} from './scenario.ts';
import {scriptArgs, serviceConfig, startSimulator} from './sim.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const CLI = path.join(ROOT, 'src/cli/main.ts');

/** Whether 127.0.0.1:`port` is free to listen on. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** The preferred port when free, else one the OS picks. */
async function choosePort(preferred: number): Promise<number> {
  if (preferred !== 0 && (await portFree(preferred))) return preferred;
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function waitForExit(child: ChildProcess): Promise<number | string> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode ?? child.signalCode ?? -1);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
}

async function main(argv: readonly string[]): Promise<number> {
  const {values} = parseArgs({
    args: scriptArgs(argv),
    options: {
      scenario: {type: 'string', default: path.join(ROOT, 'bench/scenarios/demo.json')},
      port: {type: 'string', default: '3000'},
      data: {type: 'string', default: path.join(ROOT, 'data')},
    },
    strict: true,
  });
  const preferred = Number(values.port);
  if (!Number.isInteger(preferred) || preferred < 0 || preferred > 65535) throw new Error(`expected --port to be a port number (0: any free one), got ${values.port}`);
  const scenario = await loadScenario(values.scenario);
  await mkdir(values.data, {recursive: true});
  const sim = await startSimulator(scenario, {dir: values.data});
  const port = await choosePort(preferred);
  const url = `http://127.0.0.1:${port}`;
  const configFile = path.join(values.data, 'demo.yaml');
  await writeFile(
    configFile,
    serviceConfig(sim.description, {
      group: 'demo',
      pollInterval: '30s',
      storage: {type: 'sqlite', path: path.join(values.data, 'demo.db')},
      listenAddr: `127.0.0.1:${port}`,
      log: {level: 'info', format: 'text'},
    }),
  );
  await writeFile(path.join(values.data, 'demo-sim.json'), `${JSON.stringify(sim.description, null, 2)}\n`, {mode: 0o600});

  const d = sim.description;
  const kubeconfigFile = path.join(values.data, 'demo-kubeconfig.yaml');
  const rel = (file: string): string => path.relative(process.cwd(), file) || file;
  process.stdout.write(
    [
      '',
      `kube-discovery demo: ${d.clusters.total} simulated clusters (${d.clusters.expected} discoverable),`,
      `  AWS accounts ${d.aws?.accounts.join(', ') ?? '-'} in ${d.aws?.regions.join(', ') ?? '-'} (failing: ${d.aws?.failing_regions.join(', ') || 'none'}),`,
      `  Azure subscriptions ${d.azure?.subscriptions.length ?? 0}, ${d.kube_servers} Kubernetes API servers (some clusters unhealthy on purpose).`,
      `service:   ${url}  (config ${path.relative(process.cwd(), configFile)}, registry ${path.relative(process.cwd(), path.join(values.data, 'demo.db'))})`,
      port === preferred || preferred === 0 ? '' : `           (port ${preferred} was taken; using ${port})`,
      'look at:',
      `  npx kube-discovery ls --server ${url}            # the inventory, like kubectl get`,
      `  curl ${url}/v1/kube_servers         # the kube_server resources (JSON)`,
      `  curl -N ${url}/v1/watch             # live put/delete events`,
      `  curl ${url}/v1/status               # per-source health`,
      `  curl ${url}/metrics`,
      `  kubectl --kubeconfig ${rel(kubeconfigFile)} get --raw /version   # once the first cycle wrote it (below)`,
      `  curl -X POST ${d.control_url}/churn     # change 5% of the clusters now (also every minute)`,
      `  curl ${d.control_url}/stats             # cloud API calls the simulator answered`,
      'Ctrl-C (or SIGTERM, SIGHUP) stops the service and the simulator.',
      '',
    ].filter((l) => l !== '').join('\n') + '\n\n',
  );

  const child = spawn(process.execPath, [CLI, 'start', '-c', configFile], {
    cwd: ROOT,
    // Only what the service needs: no cloud credentials of this machine reach it.
    env: {PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', TERM: process.env['TERM'] ?? 'dumb', ...d.env},
    stdio: ['ignore', 'inherit', 'inherit'],
    // Its own process group: Ctrl-C reaches only the demo, which then stops the service once, with SIGTERM.
    detached: true,
  });
  const exited = waitForExit(child);
  // A closed terminal must not crash the demo with EPIPE before it has stopped the service.
  process.stdout.on('error', () => undefined);
  process.stderr.on('error', () => undefined);

  let stopping = 0;
  const stop = (why: string): void => {
    // npm forwards the terminal's SIGINT, so one Ctrl-C can arrive twice in a row.
    if (stopping && Date.now() - stopping > 1000) {
      process.stderr.write(`second ${why}: killing the service\n`);
      child.kill('SIGKILL');
      return;
    }
    if (stopping) return;
    stopping = Date.now();
    process.stderr.write(`\n${why}: stopping the service and the simulator...\n`);
    // SIGTERM, not the signal we got: SIGHUP means "run a cycle now" to the service.
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => stop(signal));
  // `kill -TERM` on npm or a dead terminal emulator may never reach us as a signal; being
  // re-parented does. (A parent of 1 at start means there is no parent to watch.)
  const parent = process.ppid;
  const watch = parent > 1 ? setInterval(() => {
    if (process.ppid !== parent) stop('parent process exited');
  }, 500) : undefined;
  watch?.unref();

  void writeDemoKubeconfig(url, kubeconfigFile, {...d.env, ...(d.azure ? {KUBE_DISCOVERY_ARM_ENDPOINT: d.azure.endpoint} : {})}, () => stopping > 0 || child.exitCode !== null).then(
    (line) => {
      if (line) process.stdout.write(`${line}\n`);
    },
    (error: unknown) => process.stderr.write(`demo: could not write the kubeconfig: ${(error as Error).message}\n`),
  );

  const code = await exited;
  if (watch) clearInterval(watch);
  await sim.close();
  if (!stopping) {
    process.stderr.write(`kube-discovery exited on its own (${code}); simulator stopped\n`);
    return typeof code === 'number' && code !== 0 ? code : 1;
  }
  process.stderr.write('demo stopped\n');
  return 0;
}

/**
 * Waits until the service answers /readyz (its first cycle is done), then writes a kubeconfig
 * with `kube-discovery kubeconfig`, the plugin's environment reaching the simulator. Returns the
 * line to print, or undefined when the demo stopped first.
 */
async function writeDemoKubeconfig(url: string, file: string, env: Readonly<Record<string, string>>, stopped: () => boolean): Promise<string | undefined> {
  for (;;) {
    if (stopped()) return undefined;
    const ready = await fetch(`${url}/readyz`, {signal: AbortSignal.timeout(5000)}).then((r) => r.ok, () => false);
    if (ready) break;
    await new Promise((resolve) => setTimeout(resolve, 250).unref());
  }
  let messages = '';
  const io = {stdout: (t: string) => (messages += t), stderr: (t: string) => (messages += t), env: {}, isTty: false};
  const args = ['--server', url, '-o', file, ...Object.entries(env).flatMap(([name, value]) => ['--exec-env', `${name}=${value}`])];
  const code = await runKubeconfig(args, io);
  if (code !== 0) throw new Error(messages.trim() || `exit ${code}`);
  const contexts = [...messages.matchAll(/wrote (\d+) context/g)].map((m) => m[1])[0] ?? '0';
  const first = (await readFile(file, 'utf8')).match(/^current-context: (.+)$/m)?.[1];
  const rel = path.relative(process.cwd(), file) || file;
  return `kubeconfig: ${contexts} contexts in ${rel}; try  kubectl --kubeconfig ${rel} ${first ? `--context ${first} ` : ''}get --raw /version`;
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`demo: ${(error as Error).message}\n`);
      process.exitCode = 1;
    },
  );
}
