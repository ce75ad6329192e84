/**
 * The etcd backend's security options against a real etcd: TLS with client-certificate auth, and
 * username/password auth for a user whose role covers only its prefix. Built the way the service
 * builds it (`etcdBackendFromConfig`); every refusal must name the endpoint and the setting to fix,
 * and no error or log line may carry a private key or a password.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {inspect} from 'node:util';
import pino from 'pino';
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {LeaderElection} from '../../src/ha/election.ts';
import type {WatchEvent} from '../../src/registry/backend.ts';
import {etcdBackendFromConfig, type EtcdBackend, type EtcdConnectionConfig} from '../../src/registry/etcd.ts';
import {createTestCa} from '../fakes/tls-ca.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {eventually} from './contract.ts';

const USER = 'kube-discovery';
const PASSWORD = 'pw-Correct-Horse-7c1e';
const WRONG_PASSWORD = 'pw-Wrong-Battery-93ab';
const ROOT_PASSWORD = 'pw-Root-Staple-51d0';
/** The only key range USER's role may read and write. */
const USER_PREFIX = '/kd-auth/';

describeWithEtcd('etcd backend security options', () => {
  let dir: string;
  let tlsEtcd: TestEtcd;
  let authEtcd: TestEtcd;
  /** Lines of the base64 body of every private key a client holds. */
  let keyLines: string[];
  const opened: EtcdBackend[] = [];
  const logs: string[] = [];
  const logger = pino({level: 'trace'}, {write: (line: string) => void logs.push(line)});
  const file = (name: string): string => path.join(dir, name);

  /** Opens a backend from a storage config, as the service does, logging into `logs`. */
  async function open(config: Partial<EtcdConnectionConfig> & Pick<EtcdConnectionConfig, 'endpoints'>, env: NodeJS.ProcessEnv = {}): Promise<EtcdBackend> {
    const backend = await etcdBackendFromConfig({type: 'etcd', prefix: '/kd-tls/', dial_timeout: 1_000, ...config}, {clock: systemClock, logger}, env);
    opened.push(backend);
    return backend;
  }

  /** Everything an error exposes to a log or a terminal: message, cause chain and properties. */
  function exposed(err: unknown): string {
    return `${String(err)}\n${inspect(err, {depth: 10})}`;
  }

  function expectNoSecrets(text: string): void {
    expect(text).not.toContain('PRIVATE KEY');
    for (const line of keyLines) expect(text).not.toContain(line);
    for (const secret of [PASSWORD, WRONG_PASSWORD, ROOT_PASSWORD]) expect(text).not.toContain(secret);
  }

  async function failure(promise: Promise<unknown>): Promise<Error> {
    const err = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expectNoSecrets(exposed(err));
    return err as Error;
  }

  /** put, get, list, a leased entry kept alive, and a watch that sees a change. */
  async function exercise(backend: EtcdBackend): Promise<void> {
    const put = await backend.put('kube_servers/g/a', '{"a":1}');
    expect(await backend.get('kube_servers/g/a')).toEqual(put);
    const lease = await backend.grantLease(5_000);
    const leased = await backend.put('kube_servers/g/b', '{"b":1}', {lease});
    await backend.keepAlive(lease);
    expect((await backend.list('kube_servers/g/')).map((i) => [i.key, i.lease])).toEqual([
      ['kube_servers/g/a', undefined],
      ['kube_servers/g/b', lease.id],
    ]);
    const events: WatchEvent[] = [];
    await backend.watch('kube_servers/g/', (e) => events.push(e), {fromRevision: leased.revision});
    expect(await backend.delete('kube_servers/g/a')).toBe(true);
    await eventually(() => expect(events).toEqual([{type: 'delete', key: 'kube_servers/g/a', revision: expect.any(String)}]));
    await backend.revokeLease(lease);
  }

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kd-etcd-security-'));
    const [ca, otherCa] = await Promise.all([createTestCa('etcd test CA'), createTestCa('unrelated CA')]);
    const [server, client, stranger] = await Promise.all([
      ca.issueServerCert({hosts: ['127.0.0.1']}),
      ca.issueClientCert({commonName: USER}),
      otherCa.issueClientCert({commonName: USER}),
    ]);
    keyLines = [client.keyPem, stranger.keyPem].flatMap((pem) => pem.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----')));
    await Promise.all([
      writeFile(file('ca.pem'), ca.caPem),
      writeFile(file('other-ca.pem'), otherCa.caPem),
      writeFile(file('server.pem'), server.certPem),
      writeFile(file('server-key.pem'), server.keyPem, {mode: 0o600}),
      writeFile(file('client.pem'), client.certPem),
      writeFile(file('client-key.pem'), client.keyPem, {mode: 0o600}),
      writeFile(file('stranger.pem'), stranger.certPem),
      writeFile(file('stranger-key.pem'), stranger.keyPem, {mode: 0o600}),
      // Secrets mounted from Kubernetes or written by `echo` end with a newline; it is not part of the password.
      writeFile(file('password'), `${PASSWORD}\n`, {mode: 0o600}),
      writeFile(file('wrong-password'), WRONG_PASSWORD, {mode: 0o600}),
    ]);
    [tlsEtcd, authEtcd] = await Promise.all([
      startEtcd({
        tls: {
          certFile: file('server.pem'),
          keyFile: file('server-key.pem'),
          clientCaFile: file('ca.pem'),
          client: {caFile: file('ca.pem'), certFile: file('client.pem'), keyFile: file('client-key.pem')},
        },
      }),
      startEtcd({auth: {rootPassword: ROOT_PASSWORD, users: [{name: USER, password: PASSWORD, prefix: USER_PREFIX}]}}),
    ]);
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((b) => b.close().catch(() => undefined)));
    expectNoSecrets(logs.join(''));
  });
  afterAll(async () => {
    await Promise.all([tlsEtcd?.stop(), authEtcd?.stop()]);
    if (dir) await rm(dir, {recursive: true, force: true});
  });

  describe('TLS with client certificates', () => {
    const tls = () => ({ca: file('ca.pem'), cert: file('client.pem'), key: file('client-key.pem')});

    it('serves entries, leases, keepalives and watches over https with the client certificate', async () => {
      expect(tlsEtcd.endpoint).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      await exercise(await open({endpoints: [tlsEtcd.endpoint], tls: tls()}));
    });

    it('without a client certificate, etcd refuses and the error names the endpoint and the missing setting', async () => {
      const backend = await open({endpoints: [tlsEtcd.endpoint], tls: {ca: file('ca.pem')}});
      const where = tlsEtcd.endpoint.replaceAll('.', '\\.');
      const missing = /expected storage\.tls\.cert and storage\.tls\.key, found none/;
      const put = await failure(backend.put('k', 'v'));
      expect(put.message).toMatch(new RegExp(`^etcd put at ${where} failed: .*bad certificate`));
      expect(put.message).toMatch(missing);
      // A watch retries refused streams quietly; its error must still say why, not just "no answer".
      const watch = await failure(backend.watch('', () => undefined));
      expect(watch.message).toMatch(new RegExp(`^etcd watch at ${where} failed: `));
      expect(watch.message).toMatch(missing);
    });

    it('a client certificate from a CA etcd does not trust is refused, naming the certificate file', async () => {
      const backend = await open({endpoints: [tlsEtcd.endpoint], tls: {ca: file('ca.pem'), cert: file('stranger.pem'), key: file('stranger-key.pem')}});
      const err = await failure(backend.grantLease(5_000));
      expect(err.message).toContain(`etcd grant lease at ${tlsEtcd.endpoint} failed:`);
      expect(err.message).toContain(`etcd rejected the client certificate in storage.tls.cert ${file('stranger.pem')}`);
    });

    it("with a CA that did not sign etcd's server certificate, TLS verification fails and says which CA file", async () => {
      const backend = await open({endpoints: [tlsEtcd.endpoint], tls: {...tls(), ca: file('other-ca.pem')}});
      const err = await failure(backend.get('k'));
      expect(err.message).toContain(`etcd get at ${tlsEtcd.endpoint} failed:`);
      expect(err.message).toContain(`could not verify etcd's server certificate: expected it to be valid and issued by the CA in storage.tls.ca ${file('other-ca.pem')}`);
    });

    it('a leader election over TLS elects this replica, and its fenced writes go through', async () => {
      const backend = await open({endpoints: [tlsEtcd.endpoint], tls: tls()});
      // A session longer than the test: with 2 s, an event-loop stall of a loaded machine stepped
      // the replica down before its fenced write, which etcd then refused.
      const election = new LeaderElection({backend, group: 'tls', replicaId: 'replica-tls', sessionTtlMs: 120_000, retryDelayMs: 200, logger});
      try {
        await election.start();
        expect(election.state()).toMatchObject({role: 'leader', leader: 'replica-tls'});
        const fence = election.fence();
        expect(fence).toBeDefined();
        if (fence) await backend.withFence(fence).put('kube_servers/tls/a', 'x');
        expect(await backend.get('kube_servers/tls/a')).toMatchObject({value: 'x'});
      } finally {
        await election.stop();
      }
    });
  });

  describe('username and password', () => {
    const auth = (config: Partial<EtcdConnectionConfig> = {}, env: NodeJS.ProcessEnv = {}) =>
      open({endpoints: [authEtcd.endpoint], prefix: USER_PREFIX, username: USER, ...config}, env);

    it('a user limited to its prefix works with the password from password_file', async () => {
      const backend = await auth({password_file: file('password')});
      await exercise(backend);
      expectNoSecrets(`${inspect(backend, {depth: 10})}${JSON.stringify(backend)}`);
    });

    it(`works with the password from $KUBE_DISCOVERY_ETCD_PASSWORD`, async () => {
      const backend = await auth({}, {KUBE_DISCOVERY_ETCD_PASSWORD: PASSWORD});
      await backend.put('env/a', 'x');
      expect(await backend.get('env/a')).toMatchObject({value: 'x'});
    });

    it('a wrong password fails with an error naming the user and where the password came from, never the password', async () => {
      const fromFile = await auth({password_file: file('wrong-password')});
      const put = await failure(fromFile.put('k', 'v'));
      expect(put.message).toContain(`etcd put at ${authEtcd.endpoint} failed:`);
      expect(put.message).toContain('authentication failed');
      expect(put.message).toContain(`etcd did not accept user "${USER}" with the password from storage.password_file ${file('wrong-password')}`);
      // A watch fails as fast and as clearly, instead of retrying until "no answer".
      expect((await failure(fromFile.watch('', () => undefined))).message).toContain(`did not accept user "${USER}"`);
      // The service logs such failures: the election's warning names the user, and (afterEach) no password.
      const election = new LeaderElection({backend: fromFile, group: 'auth', replicaId: 'replica-auth', retryDelayMs: 60_000, logger});
      await election.start();
      await election.stop();
      expect(election.isLeader()).toBe(false);
      expect(logs.join('')).toContain(`did not accept user \\"${USER}\\"`);

      const fromEnv = await auth({}, {KUBE_DISCOVERY_ETCD_PASSWORD: WRONG_PASSWORD});
      expect((await failure(fromEnv.list(''))).message).toContain(`with the password from $KUBE_DISCOVERY_ETCD_PASSWORD`);
    });

    it('a username without any password is refused at start, before contacting etcd', async () => {
      const err = await failure(auth());
      expect(err.message).toBe('etcd: storage.username is set, expected its password in storage.password_file or $KUBE_DISCOVERY_ETCD_PASSWORD, found neither');
    });

    it("the role's prefix is enforced: another prefix is denied, and no username is refused", async () => {
      const outside = await auth({prefix: '/elsewhere/', password_file: file('password')});
      const denied = await failure(outside.put('k', 'v'));
      expect(denied.message).toContain('permission denied');
      expect(denied.message).toContain(`expected user "${USER}" to have a role granting readwrite on the key prefix /elsewhere/`);

      const anonymous = await open({endpoints: [authEtcd.endpoint], prefix: USER_PREFIX});
      expect((await failure(anonymous.get('k'))).message).toContain('etcd has authentication enabled: expected storage.username and its password');
    });
  });
});
