/**
 * The distributed registry on etcd: entries are keys under a prefix, leases are real etcd leases
 * (one keepalive per lease whatever the number of entries), watches resume from a revision, and a
 * fenced view refuses writes from a replica that is no longer the leader.
 */
import {readFile} from 'node:fs/promises';
import {
  Etcd3,
  EtcdAuthenticationFailedError,
  EtcdLeaseInvalidError,
  EtcdPermissionDeniedError,
  Range,
  type IKeyValue,
  type IOptions,
  type IRangeResponse,
  type IRequestOp,
} from 'etcd3';
import type {Logger} from 'pino';
import {systemClock, type Clock} from '../core/clock.ts';
import type {EtcdStorageConfig} from '../config/schema.ts';
import {errorMessage, FencedError} from '../core/errors.ts';
import {LeaseNotFoundError, type Lease, type PutOptions, type RegistryBackend, type RegistryItem, type WatchEvent, type Watcher, type WatchOptions} from './backend.ts';
import {ResumableWatch} from './etcd-watch.ts';
import type {Fence} from './fence.ts';
import {registerSecret} from '../observability/redact.ts';

/** Connection settings of the etcd backend (`storage.type: etcd`). */
export interface EtcdBackendConfig {
  /** Client URLs, e.g. `https://etcd-0:2379`. */
  readonly endpoints: readonly string[];
  /** Every key lives under this prefix; the interface's keys are relative to it. Default `/kube-discovery/`. */
  readonly prefix?: string;
  /** PEM file paths for TLS; `ca` is needed to verify a private CA, `cert`+`key` for client auth. */
  readonly tls?: {readonly ca?: string; readonly cert?: string; readonly key?: string};
  readonly username?: string;
  /** Read by the caller from `password_file` or `KUBE_DISCOVERY_ETCD_PASSWORD`; never logged. */
  readonly password?: string;
  /** Where the password came from (e.g. `storage.password_file /run/secrets/etcd`), named when etcd rejects it. */
  readonly passwordSource?: string;
  /**
   * `storage.dial_timeout`. The etcd3 client has no separate connect timeout (its `dialTimeout`
   * option is unused), so this bounds every call, connecting included. Default 5 s.
   */
  readonly dialTimeoutMs?: number;
  /** Deadline of each unary call (get, put, keepalive ...) when it should differ from `dialTimeoutMs`. */
  readonly requestTimeoutMs?: number;
  /** Used to compute `expires`; etcd itself keeps real time. */
  readonly clock?: Clock;
  readonly logger?: Logger;
}

/** Counters a test or the benchmark reads to check keepalive cost. */
export interface EtcdBackendStats {
  /** Keepalive round trips sent (one per `keepAlive` call, whatever the number of entries on the lease). */
  readonly keepAliveCalls: number;
}

/** Default key prefix. */
export const DEFAULT_ETCD_PREFIX = '/kube-discovery/';

const PAGE_SIZE = 500;
/** Listings read in a row while a lease of their entries lapses during each (see list). */
const LAPSED_LIST_ATTEMPTS = 3;

/** Listings started again after etcd compacted the revision they read at, before one fails. */
const COMPACTED_LIST_ATTEMPTS = 5;

/** A paged listing's revision was compacted before its last page was read. */
class CompactedDuringListing extends Error {
  override readonly name = 'CompactedDuringListing';
  /** The revision the listing read at. */
  readonly revision: string;

  constructor(revision: string, cause: unknown) {
    super(`revision ${revision} was compacted during a paged listing`, {cause});
    this.revision = revision;
  }
}

/** Builds the etcd backend, reading TLS files first so a bad path fails at start. */
export async function openEtcdBackend(config: EtcdBackendConfig): Promise<EtcdBackend> {
  if (config.endpoints.length === 0) throw new Error('etcd: expected at least one endpoint in storage.endpoints, got none');
  const options: IOptions = {hosts: [...config.endpoints]};
  const tls = config.tls;
  if (tls?.ca !== undefined || tls?.cert !== undefined || tls?.key !== undefined) {
    if ((tls.cert === undefined) !== (tls.key === undefined)) {
      throw new Error('etcd: expected both storage.tls.cert and storage.tls.key for client certificates, got only one');
    }
    if (tls.ca === undefined && tls.cert !== undefined) {
      throw new Error('etcd: expected storage.tls.ca along with a client certificate, got none');
    }
    if (tls.ca !== undefined) {
      options.credentials = {
        rootCertificate: await readPem(tls.ca, 'storage.tls.ca'),
        ...(tls.cert !== undefined ? {certChain: await readPem(tls.cert, 'storage.tls.cert')} : {}),
        ...(tls.key !== undefined ? {privateKey: await readPem(tls.key, 'storage.tls.key')} : {}),
      };
    }
  }
  if (config.username !== undefined) {
    options.auth = {username: config.username, password: config.password ?? ''};
  }
  return new EtcdBackend(new Etcd3(options), config);
}

/** What the backend reads of `storage: {type: etcd}` (the session TTL belongs to leader election). */
export type EtcdConnectionConfig = Omit<EtcdStorageConfig, 'session_ttl'>;

/** Environment variable holding the etcd password when `storage.password_file` is not set. */
export const ETCD_PASSWORD_ENV = 'KUBE_DISCOVERY_ETCD_PASSWORD';

/** The registered factory: reads the password from `password_file` or `$KUBE_DISCOVERY_ETCD_PASSWORD`. */
export async function etcdBackendFromConfig(
  config: EtcdConnectionConfig,
  deps: {readonly clock: Clock; readonly logger?: Logger},
  env: NodeJS.ProcessEnv = process.env,
): Promise<EtcdBackend> {
  let password: string | undefined;
  let passwordSource: string | undefined;
  if (config.password_file !== undefined) {
    passwordSource = `storage.password_file ${config.password_file}`;
    try {
      password = (await readFile(config.password_file, 'utf8')).replace(/\r?\n$/, '');
    } catch (err) {
      throw new Error(`etcd: cannot read storage.password_file ${config.password_file}: ${errorMessage(err)}`, {cause: err});
    }
    if (password === '') throw new Error(`etcd: expected the password of storage.username in storage.password_file ${config.password_file}, found an empty file`);
    registerSecret(password);
  } else if (config.username !== undefined) {
    passwordSource = `$${ETCD_PASSWORD_ENV}`;
    password = env[ETCD_PASSWORD_ENV];
    registerSecret(password);
    // Without this check the first call fails with etcd's generic "invalid user ID or password".
    if (password === undefined || password === '') {
      throw new Error(
        `etcd: storage.username is set, expected its password in storage.password_file or $${ETCD_PASSWORD_ENV}, found ${password === undefined ? 'neither' : `$${ETCD_PASSWORD_ENV} empty`}`,
      );
    }
  }
  return openEtcdBackend({
    endpoints: config.endpoints,
    prefix: config.prefix,
    dialTimeoutMs: config.dial_timeout,
    clock: deps.clock,
    ...(config.tls ? {tls: config.tls} : {}),
    ...(config.username !== undefined ? {username: config.username} : {}),
    ...(password !== undefined ? {password} : {}),
    ...(passwordSource !== undefined ? {passwordSource} : {}),
    ...(deps.logger ? {logger: deps.logger} : {}),
  });
}

async function readPem(file: string, key: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new Error(`etcd: cannot read ${key} file ${file}: ${errorMessage(err)}`, {cause: err});
  }
}

/** Registry backend on etcd; build it with `openEtcdBackend`. */
export class EtcdBackend implements RegistryBackend {
  readonly name = 'etcd';
  /** Absolute key prefix in etcd. */
  readonly prefix: string;
  // Private so a logged or serialised backend never exposes the client's credentials.
  readonly #client: Etcd3;
  readonly #where: string;
  readonly #clock: Clock;
  readonly #requestTimeoutMs: number;
  readonly #logger: Logger | undefined;
  /**
   * Expiry (conservative) of leases this process granted or kept alive, on the clock's elapsed
   * time: etcd counts a lease down on its own clock, so a step of this host's wall clock must not
   * make a live lease of ours look lapsed (and its entries drop out of our listings). `wall` is the
   * same expiry in epoch ms as of the call, what `#expiryOf` reports while the wall clock agrees.
   */
  readonly #leaseExpiry = new Map<string, {readonly elapsed: number; readonly wall: number}>();
  readonly #watchers = new Set<Watcher>();
  readonly #security: SecuritySettings;
  /** The last error etcd or the connection gave, to explain calls the client's circuit breaker then refuses unsent. */
  #lastFailure: {readonly error: Error; readonly at: number} | undefined;
  #keepAliveCalls = 0;

  /** Wraps an existing client (tests, or callers that share one); `openEtcdBackend` is the usual entry. */
  constructor(client: Etcd3, config: EtcdBackendConfig) {
    this.#client = client;
    this.prefix = config.prefix ?? DEFAULT_ETCD_PREFIX;
    this.#where = config.endpoints.join(',');
    this.#clock = config.clock ?? systemClock;
    this.#requestTimeoutMs = config.requestTimeoutMs ?? config.dialTimeoutMs ?? 5_000;
    this.#logger = config.logger;
    this.#security = {
      prefix: this.prefix,
      ...(config.username !== undefined ? {username: config.username} : {}),
      ...(config.passwordSource !== undefined ? {passwordSource: config.passwordSource} : {}),
      ...(config.tls?.ca !== undefined ? {ca: config.tls.ca} : {}),
      ...(config.tls?.cert !== undefined ? {cert: config.tls.cert} : {}),
    };
  }

  /** Keepalive counters. */
  get stats(): EtcdBackendStats {
    return {keepAliveCalls: this.#keepAliveCalls};
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`Expected lease ttlMs to be a positive number, got ${ttlMs}`);
    const sentAt = this.#elapsed();
    const wallAt = this.#clock.now();
    for (const [id, expiry] of this.#leaseExpiry) if (expiry.elapsed < sentAt) this.#leaseExpiry.delete(id); // lapsed, never revoked
    // etcd counts TTLs in whole seconds; round up so an entry never lives shorter than asked.
    const res = await this.#call('grant lease', () => this.#client.leaseClient.leaseGrant({TTL: Math.ceil(ttlMs / 1000)}, this.#opts()));
    const granted = Number(res.TTL) * 1000;
    this.#leaseExpiry.set(res.ID, {elapsed: sentAt + granted, wall: wallAt + granted});
    return {id: res.ID, ttlMs: granted};
  }

  /** Reuses a lease granted before a restart when it is still alive (so entries keep their lease); undefined when gone. */
  async resumeLease(id: string): Promise<Lease | undefined> {
    const sentAt = this.#elapsed();
    const wallAt = this.#clock.now();
    const res = await this.#call('look up lease', () => this.#client.leaseClient.leaseTimeToLive({ID: id}, this.#opts()));
    // etcd answers -1 for an unknown or expired lease, and the remaining whole seconds otherwise (0 = under a second left).
    const remaining = Number(res.TTL);
    if (remaining < 0) return undefined;
    if (remaining > 0) this.#leaseExpiry.set(id, {elapsed: sentAt + remaining * 1000, wall: wallAt + remaining * 1000});
    return {id, ttlMs: Number(res.grantedTTL) * 1000};
  }

  async keepAlive(lease: Lease): Promise<void> {
    this.#keepAliveCalls++;
    const sentAt = this.#elapsed();
    const wallAt = this.#clock.now();
    const ttl = await this.#call('keep lease alive', () => this.#keepAliveOnce(lease.id));
    if (ttl <= 0) {
      this.#leaseExpiry.delete(lease.id);
      throw new LeaseNotFoundError(`etcd lease ${lease.id} has expired or was revoked (keepalive at ${this.#where} returned TTL 0); grant a new lease`);
    }
    this.#leaseExpiry.set(lease.id, {elapsed: sentAt + ttl * 1000, wall: wallAt + ttl * 1000});
  }

  async revokeLease(lease: Lease): Promise<void> {
    this.#leaseExpiry.delete(lease.id);
    try {
      await this.#client.leaseClient.leaseRevoke({ID: lease.id}, this.#opts());
    } catch (err) {
      // Revoking a lease that already expired is what the caller wanted anyway.
      if (err instanceof EtcdLeaseInvalidError) return;
      throw this.#error('revoke lease', err);
    }
  }

  async put(key: string, value: string, options?: PutOptions): Promise<RegistryItem> {
    const res = await this.#call('put', () => this.#client.kv.put(this.#putRequest(key, value, options), this.#opts()), options?.lease);
    return this.#written(key, value, res.header.revision, options?.lease);
  }

  async get(key: string): Promise<RegistryItem | undefined> {
    const res = await this.#call('get', () => this.#client.kv.range({key: this.#abs(key)}, this.#opts()));
    const items = await this.#items(res.kvs);
    return items[0];
  }

  async list(prefix: string): Promise<RegistryItem[]> {
    // A listing is read at one revision, but the leases on it are judged afterwards, by etcd's answer
    // of now: a lease found gone may have lapsed after that revision, its entries moved onto another
    // lease meanwhile (a new leader's take-over). They are left out only when a listing read after
    // etcd said so still has them on a lapsed lease (impossible: etcd deletes a lease's keys with it),
    // so the group is listed again, and a lease lapsing during every listing is given up on at last.
    for (let attempt = 1; ; attempt++) {
      const gone = new Set<string>();
      const items = await this.#items(await this.#range(prefix), gone);
      if (gone.size === 0 || attempt >= LAPSED_LIST_ATTEMPTS) return items;
      this.#logger?.debug({where: this.#where, prefix, leases: [...gone]}, 'etcd: a lease lapsed while the registry was listed; listing again');
    }
  }

  /** Every key-value under `prefix`, as one snapshot (see #listPages). */
  async #range(prefix: string): Promise<IKeyValue[]> {
    // etcd may compact the revision a paged listing reads at before its last page (a short
    // --auto-compaction-retention on a large registry): start again at the newest revision, a few
    // times, rather than fail every listing while compaction keeps pace with it.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#listPages(prefix);
      } catch (err) {
        if (!(err instanceof CompactedDuringListing) || attempt >= COMPACTED_LIST_ATTEMPTS) throw this.#error('list', err instanceof CompactedDuringListing ? err.cause : err);
        this.#logger?.warn(
          {where: this.#where, prefix, revision: err.revision, attempt},
          'etcd compacted the revision of a paged listing before its last page; listing again at the newest revision',
        );
      }
    }
  }

  /** Every key-value under `prefix`, paged at the first page's revision: a consistent snapshot within the gRPC message limit. */
  async #listPages(prefix: string): Promise<IKeyValue[]> {
    const range = Range.prefix(this.#abs(prefix));
    const kvs: IKeyValue[] = [];
    let start = range.start;
    let revision: string | undefined;
    for (;;) {
      const from = start;
      let res: IRangeResponse;
      try {
        res = await this.#client.kv.range({key: from, range_end: range.end, limit: PAGE_SIZE, ...(revision !== undefined ? {revision} : {})}, this.#opts());
      } catch (err) {
        if (revision !== undefined && errorMessage(err).includes('required revision has been compacted')) throw new CompactedDuringListing(revision, err);
        throw err;
      }
      revision ??= res.header.revision;
      kvs.push(...res.kvs);
      const last = res.kvs.at(-1);
      if (!res.more || last === undefined) break;
      start = Buffer.concat([last.key, Buffer.from([0])]);
    }
    return kvs;
  }

  async delete(key: string): Promise<boolean> {
    const res = await this.#call('delete', () => this.#client.kv.deleteRange({key: this.#abs(key)}, this.#opts()));
    return Number(res.deleted) > 0;
  }

  async watch(prefix: string, onEvent: (event: WatchEvent) => void, options?: WatchOptions): Promise<Watcher> {
    if (options?.fromRevision !== undefined) await this.#checkHistory(prefix, options.fromRevision);
    // A watch stream refused for TLS or auth retries quietly and ends in "no answer"; a one-key read
    // first fails fast with etcd's actual refusal, so the error says what to fix.
    else await this.#call('watch', () => this.#client.kv.range({key: this.#abs(prefix), limit: 1, keys_only: true}, this.#opts()));
    const watch = new ResumableWatch(this.#client, this.#abs(prefix), options?.fromRevision, {
      toEvent: (kind, kv) => this.#toEvent(kind, kv),
      onEvent,
      logger: this.#logger,
      where: this.#where,
      timeoutMs: this.#requestTimeoutMs,
      ...(options?.onGap ? {onGap: options.onGap} : {}),
    });
    await watch.start();
    const handle: Watcher = {
      close: async () => {
        this.#watchers.delete(handle);
        await watch.close();
      },
    };
    this.#watchers.add(handle);
    return handle;
  }

  /**
   * etcd accepts a watch on compacted history and cancels it right after, which would look like a
   * working watch; a read at the first wanted revision tells the two apart before we start.
   */
  async #checkHistory(prefix: string, fromRevision: string): Promise<void> {
    try {
      await this.#client.kv.range({key: this.#abs(prefix), revision: (BigInt(fromRevision) + 1n).toString(), limit: 1, keys_only: true}, this.#opts());
    } catch (err) {
      const reason = errorMessage(err);
      if (reason.includes('future revision')) return; // nothing written since: nothing to replay
      if (reason.includes('compacted')) {
        throw new Error(
          `etcd watch at ${this.#where} failed: revision ${fromRevision} has been compacted; list again and watch from the revision of that list`,
          {cause: err},
        );
      }
      throw this.#error('watch', err);
    }
  }

  async ping(): Promise<void> {
    // A linearizable one-key read: proves a quorum answers, and needs only read permission on our prefix.
    await this.#call('ping', () => this.#client.kv.range({key: Buffer.from(this.prefix), limit: 1, keys_only: true}, this.#opts()));
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#watchers].map((w) => w.close()));
    this.#client.close();
  }

  /**
   * A view whose put, delete and revokeLease succeed only while `fence.key` still has
   * `fence.createRevision`, i.e. while this replica still holds the leadership it won; otherwise
   * they throw FencedError. Reads and lease grants/keepalives go straight through. Closing the
   * view leaves this backend open. `onRefused` is told of every write refused that way.
   */
  withFence(fence: Fence, onRefused?: (fence: Fence) => void): RegistryBackend {
    return new FencedEtcdView(this, fence, onRefused);
  }

  /** @internal Fenced write used by the view: `if createRevision(fence) == rev then op`. */
  async fencedWrite(fence: Fence, op: 'put' | 'delete', key: string, value?: string, options?: PutOptions): Promise<{revision: string; deleted: boolean}> {
    const success: IRequestOp =
      op === 'put' ? {request_put: this.#putRequest(key, value ?? '', options)} : {request_delete_range: {key: this.#abs(key)}};
    const res = await this.#call(
      `fenced ${op}`,
      () =>
        this.#client.kv.txn(
          {compare: [{key: this.#abs(fence.key), target: 'Create', result: 'Equal', create_revision: fence.createRevision}], success: [success]},
          this.#opts(),
        ),
      options?.lease,
    );
    if (!res.succeeded) throw fencedError(fence, `${op} ${key}`);
    const deleted = res.responses[0]?.response_delete_range?.deleted;
    return {revision: res.header.revision, deleted: deleted !== undefined && Number(deleted) > 0};
  }

  /** @internal True while the fence key still has the fence's create revision. */
  async fenceHolds(fence: Fence): Promise<boolean> {
    const res = await this.#call('check fence', () => this.#client.kv.range({key: this.#abs(fence.key)}, this.#opts()));
    return res.kvs[0]?.create_revision === fence.createRevision;
  }

  /** @internal Item returned for a write made through the fenced view. */
  written(key: string, value: string, revision: string, lease?: Lease): RegistryItem {
    return this.#written(key, value, revision, lease);
  }

  #written(key: string, value: string, revision: string, lease?: Lease): RegistryItem {
    const expires = lease ? this.#expiryOf(lease.id) : undefined;
    return {key, value, revision, ...(lease ? {lease: lease.id} : {}), ...(expires !== undefined ? {expires} : {})};
  }

  #putRequest(key: string, value: string, options?: PutOptions): {key: Buffer; value: Buffer; lease?: string} {
    return {key: this.#abs(key), value: Buffer.from(value), ...(options?.lease ? {lease: options.lease.id} : {})};
  }

  /** One keepalive round trip on a short-lived stream; resolves with the remaining TTL in seconds. */
  async #keepAliveOnce(id: string): Promise<number> {
    const stream = await this.#client.leaseClient.leaseKeepAlive({deadline: Date.now() + this.#requestTimeoutMs});
    try {
      const res = await new Promise<{TTL: string}>((resolve, reject) => {
        stream.on('data', resolve);
        stream.on('error', reject);
        stream.on('end', () => reject(new Error('keepalive stream ended without an answer')));
        stream.write({ID: id});
      });
      return Number(res.TTL);
    } finally {
      stream.end();
    }
  }

  /**
   * Converts stored key-values into items, dropping entries whose lease is known to have expired;
   * `gone` collects the leases etcd said were gone although entries of `kvs` hang on them.
   */
  async #items(kvs: readonly IKeyValue[], gone?: Set<string>): Promise<RegistryItem[]> {
    const now = this.#clock.now();
    const expiry = new Map<string, number | undefined>();
    const unknown = new Set<string>();
    for (const kv of kvs) {
      if (kv.lease === '0' || expiry.has(kv.lease) || unknown.has(kv.lease)) continue;
      const known = this.#expiryOf(kv.lease);
      // A lease of ours past the expiry its last answered keepalive gave is not known to be gone:
      // etcd renews every lease by its TTL when it restarts or elects a leader, and a keepalive that
      // timed out may have landed. etcd says, as for another replica's lease.
      if (known !== undefined && known > now) expiry.set(kv.lease, known);
      else unknown.add(kv.lease);
    }
    // Leases of other replicas (and lapsed ones of ours): one TimeToLive call per distinct lease (a handful), not per entry.
    await Promise.all(
      [...unknown].map(async (id) => {
        const sentAt = this.#elapsed();
        try {
          const res = await this.#client.leaseClient.leaseTimeToLive({ID: id}, this.#opts());
          // -1: gone (its keys are being deleted); otherwise whole seconds left, rounded down
          // (0 = under a second left but alive), so `expires` is a lower bound to the second.
          const ttl = Number(res.TTL);
          expiry.set(id, ttl < 0 ? now : now + Math.max(ttl * 1000, 1));
          if (ttl < 0) gone?.add(id);
          // Ours and alive after all: remember what etcd said, so the next listing need not ask.
          if (ttl > 0 && this.#leaseExpiry.has(id)) this.#leaseExpiry.set(id, {elapsed: sentAt + ttl * 1000, wall: now + ttl * 1000});
        } catch {
          expiry.set(id, undefined); // best effort: the entry is served without an expiry
        }
      }),
    );
    const items: RegistryItem[] = [];
    for (const kv of kvs) {
      const expires = kv.lease === '0' ? undefined : expiry.get(kv.lease);
      // etcd deletes a lapsed lease's keys within moments; don't serve them in the meantime.
      if (expires !== undefined && expires <= now) continue;
      items.push(this.#toItem(kv, expires));
    }
    return items;
  }

  #toItem(kv: IKeyValue, expires?: number): RegistryItem {
    return {
      key: this.#rel(kv.key),
      value: kv.value.toString(),
      revision: kv.mod_revision,
      ...(kv.lease !== '0' ? {lease: kv.lease} : {}),
      ...(expires !== undefined ? {expires} : {}),
    };
  }

  #toEvent(kind: 'Put' | 'Delete', kv: IKeyValue): WatchEvent {
    if (kind === 'Delete') return {type: 'delete', key: this.#rel(kv.key), revision: kv.mod_revision};
    const expires = kv.lease !== '0' ? this.#expiryOf(kv.lease) : undefined;
    return {type: 'put', item: this.#toItem(kv, expires)};
  }

  /**
   * Epoch ms at which a lease of ours lapses as far as we know (see #leaseExpiry), or undefined. Alive
   * or lapsed is decided on elapsed time; the wall-clock expiry recorded with it is reported unless
   * a step of the wall clock contradicts that (then the remaining elapsed time from now).
   */
  #expiryOf(id: string): number | undefined {
    const expiry = this.#leaseExpiry.get(id);
    if (expiry === undefined) return undefined;
    const now = this.#clock.now();
    const left = expiry.elapsed - this.#elapsed();
    if (left <= 0) return Math.min(expiry.wall, now);
    return expiry.wall > now ? expiry.wall : Math.ceil(now + left);
  }

  #elapsed(): number {
    return this.#clock.elapsed?.() ?? this.#clock.now();
  }

  #abs(key: string): Buffer {
    return Buffer.from(this.prefix + key);
  }

  #rel(key: Buffer): string {
    return key.toString().slice(this.prefix.length);
  }

  #opts(): {deadline: number} {
    return {deadline: Date.now() + this.#requestTimeoutMs};
  }

  async #call<T>(op: string, fn: () => Promise<T>, lease?: Lease): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof EtcdLeaseInvalidError && lease) {
        throw new LeaseNotFoundError(`etcd ${op} at ${this.#where} failed: lease ${lease.id} has expired or was revoked; grant a new lease`, {
          cause: err,
        });
      }
      throw this.#error(op, err);
    }
  }

  #error(op: string, err: unknown): Error {
    // Names the endpoint and the reason; the client's credentials are never part of either.
    let reason = oneLine(errorMessage(err));
    let why = err;
    if (err instanceof Error && 'isBrokenCircuitError' in err) {
      // After three failures in a row the client refuses calls unsent for 5 s; its own message says
      // nothing about what is wrong, the failure that opened the breaker does.
      // Real time, like the breaker's own; an older failure may not be what opened it.
      const recent = this.#lastFailure;
      const last = recent !== undefined && Date.now() - recent.at < 10_000 ? recent.error : undefined;
      reason = `not sent: the last calls failed, so the client pauses this endpoint for up to 5 s${last ? `; last failure: ${oneLine(last.message)}` : ''}`;
      why = last ?? err;
    } else if (err instanceof Error) {
      this.#lastFailure = {error: err, at: Date.now()};
    }
    const hint = securityHint(why, this.#security);
    return new Error(`etcd ${op} at ${this.#where} failed: ${reason}${hint !== undefined ? `; ${hint}` : ''}`, {cause: err});
  }
}

/** gRPC's messages span lines and end in an empty "Resolution note:"; a log line wants neither. */
function oneLine(message: string): string {
  return message.replace(/\s+/g, ' ').replace(/\s*Resolution note:\s*$/, '').trim();
}

/** The TLS and auth settings an error names (file paths and the user name; never the password). */
interface SecuritySettings {
  readonly prefix: string;
  readonly username?: string;
  readonly passwordSource?: string;
  readonly ca?: string;
  readonly cert?: string;
}

/**
 * Turns etcd's and OpenSSL's wording for a refused connection into what the operator should
 * check, naming the setting involved; undefined for errors that are not about TLS or auth.
 */
function securityHint(err: unknown, s: SecuritySettings): string | undefined {
  const reason = errorMessage(err);
  if (err instanceof EtcdAuthenticationFailedError) {
    return `etcd did not accept user ${JSON.stringify(s.username ?? '')}${s.passwordSource !== undefined ? ` with the password from ${s.passwordSource}` : ''}: expected an existing etcd user and its current password`;
  }
  if (reason.includes('user name is empty')) {
    return `etcd has authentication enabled: expected storage.username and its password (storage.password_file or $${ETCD_PASSWORD_ENV}), found no username`;
  }
  if (err instanceof EtcdPermissionDeniedError) {
    const who = s.username !== undefined ? `user ${JSON.stringify(s.username)}` : "the client certificate's user";
    return `expected ${who} to have a role granting readwrite on the key prefix ${s.prefix}, found it lacks that permission`;
  }
  if (/alert (bad certificate|certificate required|unknown ca|certificate unknown)|alert number (42|46|48|116)\b/i.test(reason)) {
    return s.cert !== undefined
      ? `etcd rejected the client certificate in storage.tls.cert ${s.cert}: expected one issued by a CA in etcd's --trusted-ca-file`
      : 'etcd requires a TLS client certificate: expected storage.tls.cert and storage.tls.key, found none';
  }
  if (/does not match certificate|ERR_TLS_CERT_ALTNAME_INVALID/i.test(reason)) {
    return "etcd's server certificate does not name the endpoint's host: expected its subjectAltName to include it";
  }
  if (/unable to verify the first certificate|self[- ]signed certificate|unable to get (local )?issuer certificate|certificate has expired|certificate is not yet valid/i.test(reason)) {
    const trusted = s.ca !== undefined ? `the CA in storage.tls.ca ${s.ca}` : 'a system CA (storage.tls.ca is not set)';
    return `could not verify etcd's server certificate: expected it to be valid and issued by ${trusted}`;
  }
  if (/socket disconnected before secure TLS connection|wrong version number|packet length too long/i.test(reason)) {
    return 'the TLS handshake failed: expected etcd to serve TLS on this port (use http:// for a plain-text etcd)';
  }
  return undefined;
}

function fencedError(fence: Fence, what: string): FencedError {
  return new FencedError(
    `refused ${what}: expected leader key ${fence.key} with create revision ${fence.createRevision}, found it gone or replaced (this replica is no longer the leader)`,
  );
}

/** The fenced view returned by `EtcdBackend.withFence`. */
class FencedEtcdView implements RegistryBackend {
  readonly name = 'etcd';
  readonly #inner: EtcdBackend;
  readonly #fence: Fence;
  readonly #onRefused: ((fence: Fence) => void) | undefined;

  constructor(inner: EtcdBackend, fence: Fence, onRefused?: (fence: Fence) => void) {
    this.#inner = inner;
    this.#fence = fence;
    this.#onRefused = onRefused;
  }

  grantLease(ttlMs: number): Promise<Lease> {
    return this.#inner.grantLease(ttlMs);
  }

  keepAlive(lease: Lease): Promise<void> {
    return this.#inner.keepAlive(lease);
  }

  resumeLease(id: string): Promise<Lease | undefined> {
    return this.#inner.resumeLease(id);
  }

  async revokeLease(lease: Lease): Promise<void> {
    // etcd cannot revoke a lease inside a transaction; check first (best effort, a narrow race remains).
    if (!(await this.#inner.fenceHolds(this.#fence))) throw this.#refused(fencedError(this.#fence, `revoke lease ${lease.id}`));
    await this.#inner.revokeLease(lease);
  }

  async put(key: string, value: string, options?: PutOptions): Promise<RegistryItem> {
    const {revision} = await this.#write(() => this.#inner.fencedWrite(this.#fence, 'put', key, value, options));
    return this.#inner.written(key, value, revision, options?.lease);
  }

  get(key: string): Promise<RegistryItem | undefined> {
    return this.#inner.get(key);
  }

  list(prefix: string): Promise<RegistryItem[]> {
    return this.#inner.list(prefix);
  }

  async delete(key: string): Promise<boolean> {
    return (await this.#write(() => this.#inner.fencedWrite(this.#fence, 'delete', key))).deleted;
  }

  watch(prefix: string, onEvent: (event: WatchEvent) => void, options?: WatchOptions): Promise<Watcher> {
    return this.#inner.watch(prefix, onEvent, options);
  }

  ping(): Promise<void> {
    return this.#inner.ping();
  }

  async close(): Promise<void> {
    // The view borrows the backend's connection; the owner closes it.
  }

  async #write<T>(write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      throw err instanceof FencedError ? this.#refused(err) : err;
    }
  }

  /** Tells the owner (the election) that the fence no longer holds, and returns the error to throw. */
  #refused(err: FencedError): FencedError {
    try {
      this.#onRefused?.(this.#fence);
    } catch {
      // The write's own error is what the caller needs; the listener's is not ours to report.
    }
    return err;
  }
}
