/**
 * Throwaway TLS material for the HTTPS fakes (ARM, Kubernetes API), made at runtime with the
 * system `openssl` CLI: Node can generate keys but not sign X.509 certificates, and a real
 * CA-signed chain is what the Azure SDK, Node's `https` and kubectl (Go) all verify.
 */
import {execFile} from 'node:child_process';
import {randomBytes} from 'node:crypto';
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import {isIP} from 'node:net';
import {tmpdir} from 'node:os';
import path from 'node:path';

/** PEM strings an HTTPS server needs, plus the CA a client must trust to talk to it. */
export interface ServerTls {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

/** Options for a server certificate issued by a {@link TestCa}. */
export interface IssueOptions {
  /** DNS names and IP addresses for subjectAltName; default localhost, 127.0.0.1, ::1. */
  readonly hosts?: readonly string[];
  /** Validity in days; default 30. */
  readonly days?: number;
}

/** Options for a client certificate issued by a {@link TestCa}. */
export interface ClientIssueOptions {
  /** Subject common name; servers such as etcd read it as the client's user name. Default `kube-discovery-test-client`. */
  readonly commonName?: string;
  /** Validity in days; default 30. */
  readonly days?: number;
}

/** PEM strings a TLS client presents for client-certificate auth, plus the CA that issued them. */
export interface ClientTls {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

/** A throwaway certificate authority that can issue server and client certificates. */
export interface TestCa {
  readonly caPem: string;
  readonly keyPem: string;
  /** Issues a server certificate for loopback (or `hosts`) signed by this CA. */
  issueServerCert(options?: IssueOptions): Promise<ServerTls>;
  /** Issues a client certificate (extendedKeyUsage clientAuth) signed by this CA. */
  issueClientCert(options?: ClientIssueOptions): Promise<ClientTls>;
}

/** The hosts a fake listening on loopback is reached by. */
export const LOOPBACK_HOSTS: readonly string[] = ['localhost', '127.0.0.1', '::1'];

/** Creates a fresh CA; every call gives a different one, so tests can build a "wrong CA" case. */
export async function createTestCa(commonName = 'kube-discovery test CA'): Promise<TestCa> {
  return withTempDir(async (dir) => {
    const cnf = path.join(dir, 'ca.cnf');
    await writeFile(cnf, [
      '[req]', 'distinguished_name = dn', 'prompt = no',
      '[dn]', `CN = ${commonName} ${randomBytes(4).toString('hex')}`,
      '[v3_ca]',
      'basicConstraints = critical,CA:TRUE',
      'keyUsage = critical,keyCertSign,cRLSign,digitalSignature',
      'subjectKeyIdentifier = hash',
      '',
    ].join('\n'));
    await openssl(dir, [
      'req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '30', '-set_serial', randomSerial(),
      '-config', cnf, '-extensions', 'v3_ca',
    ]);
    const caPem = await readFile(path.join(dir, 'ca.crt'), 'utf8');
    const keyPem = await readFile(path.join(dir, 'ca.key'), 'utf8');
    return {
      caPem,
      keyPem,
      issueServerCert: (options) => issueServerCert(caPem, keyPem, options),
      issueClientCert: (options) => issueClientCert(caPem, keyPem, options),
    };
  });
}

let shared: Promise<ServerTls> | undefined;

/** One CA + loopback server certificate per process, shared by every fake that is not given its own. */
export function sharedServerTls(): Promise<ServerTls> {
  shared ??= createTestCa('kube-discovery shared test CA').then((ca) => ca.issueServerCert());
  // A failure (openssl missing) must not be cached forever for callers that install it meanwhile.
  shared.catch(() => { shared = undefined; });
  return shared;
}

async function issueServerCert(caPem: string, caKeyPem: string, options: IssueOptions = {}): Promise<ServerTls> {
  const hosts = options.hosts ?? LOOPBACK_HOSTS;
  if (hosts.length === 0) throw new Error('issueServerCert: expected at least one host for subjectAltName, got none');
  const san = hosts.map((h) => (isIP(h) === 0 ? `DNS:${h}` : `IP:${h}`)).join(',');
  return issueLeaf(caPem, caKeyPem, hosts[0] ?? 'localhost', ['extendedKeyUsage = serverAuth', `subjectAltName = ${san}`], options.days);
}

async function issueClientCert(caPem: string, caKeyPem: string, options: ClientIssueOptions = {}): Promise<ClientTls> {
  const commonName = options.commonName ?? 'kube-discovery-test-client';
  if (!/^[\w.@-]+$/.test(commonName)) throw new Error(`issueClientCert: expected a common name of letters, digits and ._@-, got ${JSON.stringify(commonName)}`);
  return issueLeaf(caPem, caKeyPem, commonName, ['extendedKeyUsage = clientAuth'], options.days);
}

/** Signs a P-256 leaf certificate for `commonName` with the CA; `extensions` say what it is for. */
async function issueLeaf(caPem: string, caKeyPem: string, commonName: string, extensions: readonly string[], days = 30): Promise<ServerTls> {
  return withTempDir(async (dir) => {
    await writeFile(path.join(dir, 'ca.crt'), caPem);
    await writeFile(path.join(dir, 'ca.key'), caKeyPem, {mode: 0o600});
    const cnf = path.join(dir, 'leaf.cnf');
    await writeFile(cnf, [
      '[req]', 'distinguished_name = dn', 'prompt = no',
      '[dn]', `CN = ${commonName}`,
      '[v3_leaf]',
      'basicConstraints = critical,CA:FALSE',
      'keyUsage = critical,digitalSignature',
      ...extensions,
      'subjectKeyIdentifier = hash',
      'authorityKeyIdentifier = keyid',
      '',
    ].join('\n'));
    await openssl(dir, [
      'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', 'leaf.key', '-out', 'leaf.csr', '-config', cnf,
    ]);
    await openssl(dir, [
      'x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', randomSerial(),
      '-days', String(days), '-extfile', cnf, '-extensions', 'v3_leaf', '-out', 'leaf.crt',
    ]);
    return {
      caPem,
      certPem: await readFile(path.join(dir, 'leaf.crt'), 'utf8'),
      keyPem: await readFile(path.join(dir, 'leaf.key'), 'utf8'),
    };
  });
}

/** A positive 127-bit serial, so two certificates of one CA never share a serial. */
function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x01;
  return `0x${bytes.toString('hex')}`;
}

async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(tmpdir(), 'kd-tls-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, {recursive: true, force: true});
  }
}

function openssl(cwd: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, {cwd, timeout: 30_000}, (error, _stdout, stderr) => {
      if (error === null) {
        resolve();
        return;
      }
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new Error('the test fakes create TLS certificates with the openssl CLI, but `openssl` was not found on PATH; install openssl (Debian/Ubuntu: apt-get install openssl)'));
        return;
      }
      reject(new Error(`openssl ${args[0] ?? ''} failed (expected exit 0, got ${String(error.code)}): ${String(stderr).trim()}`));
    });
  });
}
