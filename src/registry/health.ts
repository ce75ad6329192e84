/**
 * Whether the registry backend can be read and written right now, as /readyz, /v1/status, the
 * metrics and the log see it. A failing backend never empties the served inventory (the cache
 * keeps the last one read, entries keep their lease in memory); this is how the failure shows.
 * The log gets one JSON line per change of state, not one per failed call.
 */
import {Counter, Gauge, type Registry} from 'prom-client';
import type {Clock} from '../core/clock.ts';
import {errorMessage} from '../core/errors.ts';

/** Which side of the registry failed: reading (list, watch, ping) or writing (keepalive, put, delete, purge). */
export type RegistryOperation = 'read' | 'write';

/** Bounded reason classes: what /readyz shows without authentication, and the metric label. */
export const REGISTRY_FAULT_REASONS = ['disk_full', 'read_only', 'file_deleted', 'io_error', 'unreachable', 'malformed', 'other'] as const;

/** One of REGISTRY_FAULT_REASONS. */
export type RegistryFaultReason = (typeof REGISTRY_FAULT_REASONS)[number];

/** The current failure of one operation. */
export interface RegistryFault {
  readonly operation: RegistryOperation;
  readonly reason: RegistryFaultReason;
  /** The (already redacted) error text: for /v1/status and the log only, never for /readyz. */
  readonly message: string;
  /** RFC 3339 of the first failure of this streak. */
  readonly since: string;
  readonly failures: number;
}

type LogFn = (fields: Record<string, unknown>, message: string) => void;

/** Options of RegistryHealth. */
export interface RegistryHealthOptions {
  readonly backend: string;
  readonly clock: Clock;
  readonly logger: {readonly error: LogFn; readonly info: LogFn};
  /** Where the two metrics are registered (the service's registry). */
  readonly registry?: Registry;
}

/** SQLite primary result codes (the low byte of an extended code). */
const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_CORRUPT = 11;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

/** Maps a backend error (its cause chain included) to a reason class. */
export function classifyRegistryError(error: unknown): RegistryFaultReason {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as {cause?: unknown}).cause, depth++) {
    const err = e as {name?: unknown; code?: unknown; errcode?: unknown; message?: unknown};
    const text = `${String(err.code ?? '')} ${String(err.message ?? e)}`;
    if (err.name === 'RegistryFileDeletedError' || /deleted registry database|was deleted or replaced/.test(text)) return 'file_deleted';
    const primary = typeof err.errcode === 'number' ? err.errcode & 0xff : undefined;
    if (primary === SQLITE_FULL || /\bENOSPC\b|disk is full/i.test(text)) return 'disk_full';
    if (primary === SQLITE_READONLY || /\bEROFS\b|readonly database|read-only file system/i.test(text)) return 'read_only';
    if (primary === SQLITE_IOERR || primary === SQLITE_CANTOPEN || /\bEIO\b|disk I\/O error/i.test(text)) return 'io_error';
    if (primary === SQLITE_CORRUPT || primary === SQLITE_NOTADB || /not valid JSON|expected kind|malformed/i.test(text)) return 'malformed';
    // The Kubernetes API: an answer against the protocol, or a server that is not serving (5xx, 429).
    if (err.name === 'MalformedAnswerError') return 'malformed';
    const status = (e as {status?: unknown}).status;
    if (err.name === 'KubeApiError' && typeof status === 'number' && (status >= 500 || status === 429)) return 'unreachable';
    if (/unavailable|ECONNREFUSED|ECONNRESET|ETIMEDOUT|deadline|timed out|timeout|GRPC|connect|No connection/i.test(text)) return 'unreachable';
  }
  return 'other';
}

/** The failure state of the registry backend; see the file comment. */
export class RegistryHealth {
  readonly #options: RegistryHealthOptions;
  readonly #faults = new Map<RegistryOperation, RegistryFault>();
  readonly #errors: Counter<'operation' | 'reason'>;
  readonly #degraded: Gauge<'operation'>;

  constructor(options: RegistryHealthOptions) {
    this.#options = options;
    const registers = options.registry ? [options.registry] : [];
    this.#errors = new Counter({
      name: 'kube_discovery_registry_errors_total',
      help: 'Failed registry backend calls by operation (read, write) and reason class; the served inventory is kept.',
      labelNames: ['operation', 'reason'],
      registers,
    });
    this.#degraded = new Gauge({
      name: 'kube_discovery_registry_degraded',
      help: '1 while registry reads or writes (by operation) are failing and the last known inventory is served from memory.',
      labelNames: ['operation'],
      registers,
    });
    for (const operation of ['read', 'write'] as const) {
      this.#degraded.set({operation}, 0);
      for (const reason of REGISTRY_FAULT_REASONS) this.#errors.inc({operation, reason}, 0);
    }
  }

  /** Records a failed call; logs when the operation starts failing or its reason changes. */
  failed(operation: RegistryOperation, error: unknown): void {
    const reason = classifyRegistryError(error);
    const message = errorMessage(error);
    this.#errors.inc({operation, reason});
    const previous = this.#faults.get(operation);
    const since = previous?.since ?? new Date(this.#options.clock.now()).toISOString();
    this.#faults.set(operation, {operation, reason, message, since, failures: (previous?.failures ?? 0) + 1});
    this.#degraded.set({operation}, 1);
    if (previous?.reason === reason) return;
    this.#options.logger.error(
      {event: 'registry_degraded', backend: this.#options.backend, operation, reason, err: error},
      `registry ${operation}s failing (${reason}); serving the last known inventory from memory`,
    );
  }

  /** Records a successful call; logs the recovery once. */
  succeeded(operation: RegistryOperation): void {
    const previous = this.#faults.get(operation);
    if (!previous) return;
    this.#faults.delete(operation);
    this.#degraded.set({operation}, 0);
    this.#options.logger.info(
      {event: 'registry_recovered', backend: this.#options.backend, operation, reason: previous.reason, failures: previous.failures, since: previous.since},
      `registry ${operation}s work again`,
    );
  }

  /** Current failures, reads first. */
  faults(): RegistryFault[] {
    return (['read', 'write'] as const).flatMap((op) => {
      const fault = this.#faults.get(op);
      return fault ? [fault] : [];
    });
  }
}
