/**
 * `npm run demo`: the simulator (about 50 clusters on AWS and Azure, a few unhealthy, one failing
 * region, light throttling, churn every minute) and `kube-discovery start` against it as a child
 * process, on 127.0.0.1:3000 (or a free port), with the registry in ./data/demo.db. Nothing leaves
 * loopback and no cloud credentials are needed. Ctrl-C stops both.
 *
 *   npm run demo [-- --scenario FILE] [--port N] [--data DIR]
 */
import {spawn, type ChildProcess} from 'node:child_process';
import {mkdir, writeFile} from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import {parseArgs} from 'node:util';
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
  if (await portFree(preferred)) return preferred;
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
  if (!Number.isInteger(preferred) || preferred < 1 || preferred > 65535) throw new Error(`expected --port to be a port number, got ${values.port}`);
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
  process.stdout.write(
    [
      '',
      `kube-discovery demo: ${d.clusters.total} simulated clusters (${d.clusters.expected} discoverable),`,
      `  AWS accounts ${d.aws?.accounts.join(', ') ?? '-'} in ${d.aws?.regions.join(', ') ?? '-'} (failing: ${d.aws?.failing_regions.join(', ') || 'none'}),`,
      `  Azure subscriptions ${d.azure?.subscriptions.length ?? 0}, ${d.kube_servers} Kubernetes API servers (some clusters unhealthy on purpose).`,
      `service:   ${url}  (config ${path.relative(process.cwd(), configFile)}, registry ${path.relative(process.cwd(), path.join(values.data, 'demo.db'))})`,
      port === preferred ? '' : `           (port ${preferred} was taken; using ${port})`,
      'look at:',
      `  npx kube-discovery ls --server ${url}`,
      `  curl ${url}/v1/status`,
      `  curl ${url}/metrics`,
      `  curl -X POST ${d.control_url}/churn     # change 5% of the clusters now (also every minute)`,
      `  curl ${d.control_url}/stats             # cloud API calls the simulator answered`,
      'Ctrl-C stops the service and the simulator.',
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

  let stopping = 0;
  const stop = (signal: string): void => {
    // npm forwards the terminal's SIGINT, so one Ctrl-C can arrive twice in a row.
    if (stopping && Date.now() - stopping > 1000) {
      process.stderr.write(`second ${signal}: killing the service\n`);
      child.kill('SIGKILL');
      return;
    }
    if (stopping) return;
    stopping = Date.now();
    process.stderr.write(`\n${signal}: stopping the service and the simulator...\n`);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  const code = await exited;
  await sim.close();
  if (!stopping) {
    process.stderr.write(`kube-discovery exited on its own (${code}); simulator stopped\n`);
    return typeof code === 'number' && code !== 0 ? code : 1;
  }
  process.stderr.write('demo stopped\n');
  return 0;
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
