/** What the fake ARM server saw: one record per request, counters, and the api-versions used. */

/** Operations the fake ARM server answers, named like the SDK methods that call them. */
export type ArmOperation =
  | 'subscriptions.list'
  | 'subscriptions.get'
  | 'managedClusters.list'
  | 'managedClusters.listByResourceGroup'
  | 'managedClusters.get'
  | 'managedClusters.listClusterUserCredentials'
  | 'roleAssignments.list'
  | 'roleAssignments.get'
  | 'roleAssignments.create'
  | 'roleAssignments.delete'
  | 'managementGroups.descendants';

/** One request as the fake answered it. */
export interface ArmRequestRecord {
  readonly method: string;
  readonly path: string;
  /** `unknown` for paths the fake has no route for. */
  readonly operation: ArmOperation | 'unknown';
  readonly subscription?: string;
  readonly resourceGroup?: string;
  readonly clusterName?: string;
  readonly apiVersion?: string;
  /** HTTP status sent; 0 when the fault hook made the fake hang or reset the connection. */
  readonly status: number;
  /** ARM error code of an error answer (`AuthorizationFailed`, `TooManyRequests`...). */
  readonly errorCode?: string;
  /** Which injected fault shaped the answer, if any. */
  readonly fault?: 'status' | 'malformed' | 'hang' | 'reset';
  readonly requestId: string;
}

/** Selects records in {@link ArmStats.count}; subscription and resource group compare case-insensitively. */
export interface ArmCountFilter {
  readonly operation?: ArmOperation | 'unknown';
  readonly subscription?: string;
  readonly resourceGroup?: string;
  readonly status?: number;
}

/** One counter of {@link ArmStats.counters}. */
export interface ArmCounter {
  readonly operation: ArmOperation | 'unknown';
  readonly subscription: string;
  readonly status: number;
  readonly count: number;
}

/** Request log of one fake ARM server. */
export class ArmStats {
  readonly #records: ArmRequestRecord[] = [];
  readonly #attempts = new Map<string, number>();

  /** Every request so far, oldest first. */
  get requests(): readonly ArmRequestRecord[] {
    return this.#records;
  }

  /** Distinct api-versions clients sent, optionally for one operation, sorted. */
  apiVersionsSeen(operation?: ArmOperation): string[] {
    const seen = new Set<string>();
    for (const r of this.#records) {
      if (r.apiVersion !== undefined && (operation === undefined || r.operation === operation)) seen.add(r.apiVersion);
    }
    return [...seen].sort();
  }

  /** Number of requests matching every given field of the filter. */
  count(filter: ArmCountFilter = {}): number {
    return this.#records.filter((r) => matches(r, filter)).length;
  }

  /** Request counts per (operation, subscription, status). */
  counters(): ArmCounter[] {
    const counts = new Map<string, ArmCounter>();
    for (const r of this.#records) {
      const subscription = r.subscription ?? '';
      const key = `${r.operation}\u0000${subscription.toLowerCase()}\u0000${r.status}`;
      const prev = counts.get(key);
      counts.set(key, {operation: r.operation, subscription, status: r.status, count: (prev?.count ?? 0) + 1});
    }
    return [...counts.values()];
  }

  /** Forgets every record and attempt counter. */
  reset(): void {
    this.#records.length = 0;
    this.#attempts.clear();
  }

  /** Used by the server: appends one record. */
  record(record: ArmRequestRecord): void {
    this.#records.push(record);
  }

  /** Used by the server: 1 for the first request with this key, 2 for its first retry, ... */
  nextAttempt(key: string): number {
    const n = (this.#attempts.get(key) ?? 0) + 1;
    this.#attempts.set(key, n);
    return n;
  }
}

function matches(r: ArmRequestRecord, f: ArmCountFilter): boolean {
  return (f.operation === undefined || r.operation === f.operation)
    && (f.status === undefined || r.status === f.status)
    && (f.subscription === undefined || r.subscription?.toLowerCase() === f.subscription.toLowerCase())
    && (f.resourceGroup === undefined || r.resourceGroup?.toLowerCase() === f.resourceGroup.toLowerCase());
}
