/**
 * The DiscoveryConfig list as a source of every cycle (`storage: kubernetes`). The leader's
 * controller reports each list's outcome here; a failing list (403 because the Role lacks
 * `list discoveryconfigs`, 5xx, a malformed answer, a hang) fails this source only, and cycles of
 * the config file's matchers go on. Until a list has succeeded in the current term the matchers
 * DiscoveryConfigs add are unknown, so the failed source covers every entry of every cloud
 * (nothing is deleted; clusters only a DiscoveryConfig found stay, stale). After a good list the
 * last good matchers stay applied and the failure covers nothing: it is only shown, in
 * /v1/status and `kube_discovery_source_errors_total`.
 */
import {everySource, type Clouds} from '../clouds/cloud.ts';
import type {PlannedSources} from '../clouds/fetcher.ts';
import {errorMessage} from '../core/errors.ts';
import type {FailureReason, SourceFailure, SourceResult} from '../core/types.ts';
import type {SourcePlanner} from '../discovery/cycle.ts';
import {redactText} from '../observability/redact.ts';

/** Outcome of the leader's DiscoveryConfig lists, planned into each cycle as a failed source while they fail. */
export class DiscoveryConfigSource implements SourcePlanner {
  readonly #clouds: Clouds;
  #id = 'discoveryconfigs';
  #failure: SourceFailure | undefined;
  #confirmed = false;

  constructor(clouds: Clouds) {
    this.#clouds = clouds;
  }

  /** A new leadership term: nothing is known about the DiscoveryConfigs until its first list. */
  termStarted(namespace: string): void {
    this.#id = `discoveryconfigs:${namespace}`;
    this.#confirmed = false;
    this.#failure = undefined;
  }

  /** A list succeeded and its matchers are applied. */
  listed(): void {
    this.#confirmed = true;
    this.#failure = undefined;
  }

  /** A list (or applying it) failed; the matchers applied before stay. */
  failed(error: unknown): void {
    this.#failure = listFailure(error);
  }

  /** The failed source(s) of this cycle; none while the lists succeed. */
  async plan(): Promise<PlannedSources> {
    const error = this.#failure;
    if (!error) return {fetchers: [], failed: []};
    const failed = (source: SourceResult['source']): SourceResult => ({source, ok: false, clusters: [], malformed: [], error});
    if (this.#confirmed) {
      // Type `discoveryconfig` is no cloud's: this source covers no entry.
      return {fetchers: [], failed: [failed({id: this.#id, cloud: 'Kubernetes', type: 'discoveryconfig', region: '*', account: '', matcherIndex: 0})]};
    }
    return {fetchers: [], failed: this.#clouds.all.map((cloud) => failed({...everySource(cloud), id: `${this.#id}:${cloud.type}`}))};
  }
}

function listFailure(error: unknown): SourceFailure {
  const operation = 'list discoveryconfigs';
  const message = redactText(errorMessage(error));
  // A KubeApiError, read by shape: importing the Kubernetes client here would load it for every storage.
  const api = error as {name?: unknown; status?: unknown; reason?: unknown};
  if (api.name === 'KubeApiError' && typeof api.status === 'number') {
    const status = api.status;
    const reason: FailureReason = status === 401 || status === 403 ? 'access_denied' : status === 429 ? 'throttled' : status === 404 ? 'not_found' : status === 504 ? 'timeout' : 'other';
    return {reason, code: typeof api.reason === 'string' && api.reason !== '' ? api.reason : String(status), message, operation};
  }
  const name = error instanceof Error ? error.name : '';
  if (name === 'TimeoutError' || name === 'AbortError') return {reason: 'timeout', code: name, message, operation};
  if (/malformed/i.test(message)) return {reason: 'invalid_response', code: 'InvalidResponse', message, operation};
  return {reason: 'other', code: name || 'Error', message, operation};
}
