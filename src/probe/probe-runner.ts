/**
 * Probes many clusters with bounded concurrency: one probe per kube_server, tokens from a
 * shared (cached) source, results by name. A failing cluster only affects its own entry;
 * nothing thrown by a probe escapes `probeAll`.
 */
import PQueue from 'p-queue';
import type {KubeAccess, KubeServer, KubeServerDraft, TargetHealth} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import type {CloudModule} from '../clouds/cloud.ts';
import {builtInClouds} from '../clouds/index.ts';
import {probeCluster} from './probe.ts';
import {errorMessage} from '../core/errors.ts';

/** What the runner probes: a kube_server as stored, or as discovery drafted it. */
export type ProbeSubject = KubeServer | KubeServerDraft;

/** The log calls the runner makes (a pino logger fits). */
export interface ProbeLogger {
  debug(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Options of a ProbeRunner. */
export interface ProbeRunnerOptions {
  readonly clock: Clock;
  /** Probes in flight at once. */
  readonly concurrency: number;
  /** Deadline of one probe, token included. */
  readonly timeoutMs: number;
  /** Bearer token for a cluster (see `tokenSources`). */
  readonly tokenFor: (access: KubeAccess) => Promise<string>;
  /** Forgets a cached token after the cluster answered 401, so the next probe mints afresh. */
  readonly forgetToken?: (access: KubeAccess) => void;
  /** The identity named in messages; default the cloud module's reading of the access (EKS: its role ARN). */
  readonly principalFor?: (access: KubeAccess) => string | undefined;
  /** EKS authentication mode / AKS auth flavour of a cluster (kube_servers do not carry it). */
  readonly authModeFor?: (server: ProbeSubject) => string | undefined;
  readonly logger?: ProbeLogger;
  /** Called with each result as it arrives, e.g. for metrics. */
  readonly onResult?: (health: TargetHealth, server: ProbeSubject) => void;
}

/** Whether two health values differ in anything but their timestamp (re-announce when they do). */
export function healthChanged(before: TargetHealth | undefined, after: TargetHealth): boolean {
  return before?.status !== after.status || before.reason !== after.reason || before.message !== after.message;
}

/** Probes kube_servers in parallel, at most `concurrency` at a time. */
export class ProbeRunner {
  readonly #options: ProbeRunnerOptions;

  constructor(options: ProbeRunnerOptions) {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
      throw new TypeError(`Expected \`concurrency\` to be an integer >= 1, got ${options.concurrency}`);
    }
    if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0) {
      throw new TypeError(`Expected \`timeoutMs\` to be a finite number > 0, got ${options.timeoutMs}`);
    }
    this.#options = options;
  }

  /**
   * Health of every server by name. When `signal` aborts, probes not yet finished are left
   * out of the result; it never rejects because of a probe.
   */
  async probeAll(servers: readonly ProbeSubject[], signal?: AbortSignal): Promise<Map<string, TargetHealth>> {
    const results = new Map<string, TargetHealth>();
    const queue = new PQueue({concurrency: this.#options.concurrency});
    const tasks = servers.map((server) =>
      queue
        .add(async () => {
          const health = await this.probe(server, signal);
          if (health) results.set(server.metadata.name, health);
        }, signal ? {signal} : {})
        // Aborted while queued: left out, as documented.
        .catch(() => undefined),
    );
    await Promise.all(tasks);
    return results;
  }

  /** Health of one server; undefined only when `signal` aborted the probe. */
  async probe(server: ProbeSubject, signal?: AbortSignal): Promise<TargetHealth | undefined> {
    const {clock, timeoutMs, logger} = this.#options;
    const name = server.metadata.name;
    const access = server.status?.access;
    const registered = builtInClouds.registeredCluster(server);
    const cloud = cloudOf(server, registered?.module);
    const target = {
      // The name the cloud knows the cluster by (what `aws eks` / `az aks` take), else the kube_server name.
      clusterName: (access ? cloud.probe.clusterName(access) : undefined) ?? registered?.cluster.name ?? server.metadata.name,
      cloud: cloud.cloud,
      region: registered?.cluster.region,
      principal: access ? (this.#options.principalFor ?? ((a: KubeAccess) => cloud.probe.principal(a)))(access) : undefined,
      authMode: this.#options.authModeFor?.(server),
    };
    let health: TargetHealth;
    try {
      if (!access && server.status?.endpoint && server.status.ca_data) {
        health = {
          status: 'unknown',
          reason: 'no_credentials',
          message: `discovery recorded no access information for cluster ${target.clusterName}, so no token can be minted for it`,
          transition_timestamp: new Date(clock.now()).toISOString(),
        };
      } else {
        health = await probeCluster({
          ...target,
          endpoint: server.status?.endpoint,
          caData: server.status?.ca_data,
          token: () => (access ? this.#options.tokenFor(access) : Promise.reject(new Error('no access information'))),
          timeoutMs,
          clock,
          ...(signal ? {signal} : {}),
        });
      }
    } catch (error) {
      if (signal?.aborted) return undefined;
      // probeCluster maps every failure itself; this is a bug guard, not a code path.
      health = {
        status: 'unknown',
        reason: 'api_error',
        message: `probe of cluster ${target.clusterName} failed unexpectedly: ${errorMessage(error)}`,
        transition_timestamp: new Date(clock.now()).toISOString(),
      };
    }
    if (health.reason === 'unauthorized' && access) this.#options.forgetToken?.(access);
    const fields = {cluster: name, status: health.status, reason: health.reason, message: health.message};
    if (health.status === 'healthy') logger?.debug(fields, 'probe: cluster healthy');
    else logger?.debug(fields, 'probe: cluster not healthy');
    try {
      this.#options.onResult?.(health, server);
    } catch (error) {
      logger?.warn({cluster: name, err: error}, 'probe: onResult callback failed');
    }
    return health;
  }
}

/**
 * The cloud of a probed entry: the one its access belongs to, else the one whose block its
 * document carries, else the first registered (every entry discovery writes has a block).
 */
function cloudOf(server: ProbeSubject, registered: CloudModule | undefined): CloudModule {
  const access = server.status?.access;
  const byAccess = access ? builtInClouds.forAccess(access) : undefined;
  const cloud = byAccess ?? registered ?? builtInClouds.all[0];
  if (!cloud) throw new Error('no cloud is registered');
  return cloud;
}
