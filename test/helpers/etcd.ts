/**
 * Starts a real, single-member etcd on loopback with free ports for tests, optionally serving TLS
 * (with client-certificate auth) and with authentication enabled for given users. When the binary is
 * missing the suite is skipped outside CI (with a message) and fails loudly in CI, where
 * `.ci/run` installs `etcd-server`.
 */
import {spawn, type ChildProcess} from 'node:child_process';
import {accessSync, constants, existsSync} from 'node:fs';
import {mkdir, mkdtemp, readFile, rm} from 'node:fs/promises';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {Etcd3, Range, type IOptions} from 'etcd3';
import {afterAll, beforeAll, describe, it} from 'vitest';

/** TLS on etcd's client URLs (which then are `https://`); PEM file paths, as etcd's flags take them. */
export interface EtcdTlsOptions {
  /** Server certificate (`--cert-file`); must name 127.0.0.1. */
  readonly certFile: string;
  /** Its key (`--key-file`). */
  readonly keyFile: string;
  /** `--trusted-ca-file` with `--client-cert-auth`: clients must present a certificate this CA signed. */
  readonly clientCaFile?: string;
  /** What the helper itself trusts and presents for its readiness check and auth setup. */
  readonly client: {readonly caFile: string; readonly certFile?: string; readonly keyFile?: string};
}

/** A non-root etcd user whose only role grants read-write on one key prefix. */
export interface EtcdTestUser {
  readonly name: string;
  readonly password: string;
  readonly prefix: string;
}

/** Users to create before turning on etcd's authentication (done once, on first start). */
export interface EtcdAuthOptions {
  /** Password of `root`, which gets the `root` role (etcd refuses to enable auth without it). */
  readonly rootPassword: string;
  readonly users?: readonly EtcdTestUser[];
}

/** How `startEtcd` runs etcd; everything optional, the default is plain HTTP without auth. */
export interface StartEtcdOptions {
  /** Data dir to use (and keep); default a fresh temp dir removed by `stop()`. */
  readonly dataDir?: string;
  readonly tls?: EtcdTlsOptions;
  readonly auth?: EtcdAuthOptions;
}

/** A running etcd started by a test. */
export interface TestEtcd {
  /** Client URL, e.g. `http://127.0.0.1:40123` (`https://` with `tls`). */
  readonly endpoint: string;
  /** Teardown: graceful stop (SIGTERM), wait for exit, remove the data dir unless the caller gave one. */
  stop(): Promise<void>;
  /** SIGKILL without waiting: simulates a crash; `restart()` brings it back on the same ports and data. */
  kill(): void;
  /** Starts it again (after `stop`/`kill`, or stops first) on the same ports and data dir. */
  restart(): Promise<void>;
}

/** Drops etcd's history up to `revision`. */
export async function compact(endpoint: string, revision: string): Promise<void> {
  const client = new Etcd3({hosts: endpoint});
  try {
    await client.kv.compact({revision, physical: true});
  } finally {
    client.close();
  }
}

/** Path of the etcd binary (`ETCD_BIN`, `/usr/bin/etcd`, or on PATH), or undefined when not installed. */
export const etcdBinary: string | undefined = findEtcd();

function findEtcd(): string | undefined {
  const candidates = [process.env['ETCD_BIN'], '/usr/bin/etcd', ...(process.env['PATH'] ?? '').split(':').map((d) => path.join(d, 'etcd'))];
  for (const c of candidates) {
    if (!c) continue;
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // not here; try the next candidate
    }
  }
  return undefined;
}

/**
 * `describe` for suites that need etcd: runs them when the binary exists; otherwise skips them with
 * a message outside CI and registers a failing test in CI so a missing install cannot pass silently.
 */
export function describeWithEtcd(name: string, fn: () => void): void {
  if (etcdBinary !== undefined) {
    describe(name, fn);
    return;
  }
  const message = 'etcd binary not found (looked at $ETCD_BIN, /usr/bin/etcd and $PATH): install etcd-server';
  if (process.env['CI']) {
    describe(name, () => {
      it('needs etcd', () => {
        throw new Error(message);
      });
    });
    return;
  }
  console.warn(`skipping "${name}": ${message}`);
  describe.skip(`${name} (skipped: ${message})`, fn);
}

/**
 * describeWithEtcd around one etcd of its own, started before the suite's tests and stopped after
 * them. `fn` gets that etcd at once (its tests read it once it runs): it stands for the one started.
 */
export function describeOnEtcd(name: string, fn: (etcd: TestEtcd) => void): void {
  describeWithEtcd(name, () => {
    let started: TestEtcd | undefined;
    beforeAll(async () => {
      started = await startEtcd();
    });
    afterAll(() => started?.stop());
    const running = (): TestEtcd => {
      if (!started) throw new Error('etcd is not running: it starts before the suite\'s tests');
      return started;
    };
    fn({
      get endpoint() {
        return running().endpoint;
      },
      stop: () => running().stop(),
      kill: () => running().kill(),
      restart: () => running().restart(),
    });
  });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Spawns etcd on 127.0.0.1 with free client and peer ports and resolves once it serves requests. */
export async function startEtcd(options: StartEtcdOptions = {}): Promise<TestEtcd> {
  const binary = etcdBinary;
  if (binary === undefined) throw new Error('etcd binary not found: install etcd-server');
  const ownDir = options.dataDir === undefined;
  // tmpfs when there is one: etcd fsyncs every write, which dominates test time on a disk.
  const base = existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(base, 'kube-discovery-etcd-')));
  // etcd cannot report ports it chose itself (its gateway dials the listen URL, port 0 included), so
  // it gets ports that were free a moment ago; another process can take one first, and the start is
  // then retried on new ones (below).
  let clientPort = await freePort();
  let peerPort = await freePort();
  let endpoint = `${options.tls ? 'https' : 'http'}://127.0.0.1:${clientPort}`;
  const clientTls = options.tls ? await readClientTls(options.tls.client) : undefined;
  const tlsFlags = options.tls
    ? [
        `--cert-file=${options.tls.certFile}`,
        `--key-file=${options.tls.keyFile}`,
        ...(options.tls.clientCaFile !== undefined ? [`--trusted-ca-file=${options.tls.clientCaFile}`, '--client-cert-auth'] : []),
      ]
    : [];
  let peer = `http://127.0.0.1:${peerPort}`;
  let name = `test-${clientPort}`;
  let child: ChildProcess | undefined;
  // Resolves when the last spawned process has exited, so a restart after kill() reuses free ports.
  let gone: Promise<void> = Promise.resolve();
  let stderrTail = '';

  const spawnOnce = async (): Promise<void> => {
    stderrTail = '';
    const proc = spawn(
      binary,
      [
        `--name=${name}`,
        `--data-dir=${dataDir}`,
        `--listen-client-urls=${endpoint}`,
        `--advertise-client-urls=${endpoint}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=${name}=${peer}`,
        '--initial-cluster-state=new',
        // Short raft timers: a single member on loopback, and etcd's minimum lease TTL drops to 1 s.
        '--heartbeat-interval=10',
        '--election-timeout=100',
        '--logger=zap',
        '--log-outputs=stderr',
        '--log-level=error',
        ...tlsFlags,
      ],
      {stdio: ['ignore', 'ignore', 'pipe']},
    );
    child = proc;
    gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.stderr?.on('data', (chunk: Buffer) => {
      stderrTail = (stderrTail + chunk.toString()).slice(-4000);
    });
    const exited = new Promise<never>((_, reject) => {
      proc.once('exit', (code, signal) => reject(new Error(`etcd exited during start (code ${code}, signal ${signal}): ${stderrTail}`)));
    });
    exited.catch(() => undefined);
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const ready = await Promise.race([healthy(endpoint, clientTls), exited]);
      if (ready) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    proc.kill('SIGKILL');
    throw new Error(`etcd at ${endpoint} did not become healthy within 15 s: ${stderrTail}`);
  };

  const stopChild = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      await gone;
      clearTimeout(timer);
    }
    await gone;
  };

  for (let attempt = 1; ; attempt++) {
    try {
      await spawnOnce();
      break;
    } catch (err) {
      // A port taken between freePort() and etcd's bind: new ports, in a fresh data dir (the failed
      // start may have written its member there). A directory the caller gave is not ours to wipe.
      await gone;
      // 'exit' can come before the last of stderr: give it a moment.
      await new Promise((r) => setTimeout(r, 50));
      if (attempt >= 5 || !ownDir || !/address already in use/i.test(`${stderrTail} ${String(err)}`)) throw err;
      await rm(dataDir, {recursive: true, force: true});
      await mkdir(dataDir, {recursive: true});
      clientPort = await freePort();
      peerPort = await freePort();
      endpoint = `${options.tls ? 'https' : 'http'}://127.0.0.1:${clientPort}`;
      peer = `http://127.0.0.1:${peerPort}`;
      name = `test-${clientPort}`;
    }
  }
  if (options.auth) {
    try {
      await enableAuth(endpoint, clientTls, options.auth);
    } catch (err) {
      await stopChild();
      if (ownDir) await rm(dataDir, {recursive: true, force: true});
      throw err;
    }
  }
  return {
    endpoint,
    async stop() {
      await stopChild();
      if (ownDir) await rm(dataDir, {recursive: true, force: true});
    },
    kill() {
      const proc = child;
      child = undefined;
      proc?.kill('SIGKILL');
    },
    async restart() {
      await stopChild();
      await spawnOnce();
    },
  };
}

/** PEM contents of the helper's own client TLS settings. */
interface ClientTlsPem {
  readonly ca: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
}

async function readClientTls(files: EtcdTlsOptions['client']): Promise<ClientTlsPem> {
  return {
    ca: await readFile(files.caFile),
    ...(files.certFile !== undefined ? {cert: await readFile(files.certFile)} : {}),
    ...(files.keyFile !== undefined ? {key: await readFile(files.keyFile)} : {}),
  };
}

/** Creates root (and the prefix-limited users), then turns on authentication; the data dir keeps it across restarts. */
async function enableAuth(endpoint: string, tls: ClientTlsPem | undefined, auth: EtcdAuthOptions): Promise<void> {
  const options: IOptions = {hosts: [endpoint]};
  if (tls) options.credentials = {rootCertificate: tls.ca, ...(tls.cert ? {certChain: tls.cert} : {}), ...(tls.key ? {privateKey: tls.key} : {})};
  const client = new Etcd3(options);
  try {
    await (await client.user('root').create(auth.rootPassword)).addRole('root');
    for (const user of auth.users ?? []) {
      const role = await client.role(`${user.name}-prefix`).create();
      await role.grant({permission: 'Readwrite', range: Range.prefix(user.prefix)});
      await (await client.user(user.name).create(user.password)).addRole(role);
    }
    await client.auth.authEnable();
  } finally {
    client.close();
  }
}

/** True once etcd answers its health endpoint (which runs a read through raft). */
async function healthy(endpoint: string, tls: ClientTlsPem | undefined): Promise<boolean> {
  try {
    if (tls === undefined) {
      const res = await fetch(`${endpoint}/health`, {signal: AbortSignal.timeout(1_000)});
      const body = (await res.json()) as {health?: string};
      return res.ok && body.health === 'true';
    }
    // fetch cannot be given a private CA or a client certificate; node:https can.
    const {status, body} = await new Promise<{status: number; body: string}>((resolve, reject) => {
      const req = https.get(`${endpoint}/health`, {ca: tls.ca, cert: tls.cert, key: tls.key, timeout: 1_000}, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({status: res.statusCode ?? 0, body: text}));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('health check timed out')));
      req.on('error', reject);
    });
    return status === 200 && (JSON.parse(body) as {health?: string}).health === 'true';
  } catch {
    return false;
  }
}
