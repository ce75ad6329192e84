/** Test plumbing: a fake API server with the project's CRDs installed, and a real client on a kubeconfig file for it. */
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {parseAllDocuments} from 'yaml';
import type {KubeClient, KubeClientOptions} from '../../src/registry/kube-client.ts';
import {createKubeClient} from '../../src/registry/kube-client.ts';
import type {KubeApiServer, KubeApiServerOptions} from '../fakes/kube-apiserver-crud.ts';
import {startKubeApiServer} from '../fakes/kube-apiserver-crud.ts';
import {flushMicrotasks} from '../helpers/fake-clock.ts';

const crdDir = new URL('../../deploy/kubernetes/crds/', import.meta.url);

/** The CRD objects shipped in deploy/kubernetes/crds. */
export function shippedCrds(): Record<string, unknown>[] {
  return ['kubeservers.yaml', 'discoveryconfigs.yaml'].flatMap((file) =>
    parseAllDocuments(readFileSync(new URL(file, crdDir), 'utf8')).map((doc) => doc.toJS() as Record<string, unknown>));
}

/** A fake API server with the CRDs, a kubeconfig file for it and a client. */
export interface KubeEnv {
  readonly server: KubeApiServer;
  readonly kubeconfigPath: string;
  readonly dir: string;
  client(options?: KubeClientOptions): Promise<KubeClient>;
  /** A client authenticating as `user` (its own token), so faults can target one replica. */
  clientAs(user: string, options?: KubeClientOptions): Promise<KubeClient>;
  close(): Promise<void>;
}

/** Starts a fake API server (namespace `kd`) with the shipped CRDs. */
export async function startKubeEnv(options: KubeApiServerOptions = {}): Promise<KubeEnv> {
  const server = await startKubeApiServer(options);
  server.createNamespace('kd');
  for (const crd of shippedCrds()) server.addCrd(crd);
  const dir = mkdtempSync(join(tmpdir(), 'kd-kube-'));
  const kubeconfigPath = join(dir, 'kubeconfig');
  writeFileSync(kubeconfigPath, server.kubeconfig('kd'), {mode: 0o600});
  return {
    server,
    kubeconfigPath,
    dir,
    client: (clientOptions = {}) => createKubeClient({kubeconfig: kubeconfigPath, qps: 1000, burst: 1000, ...clientOptions}),
    clientAs(user, clientOptions = {}) {
      const token = `token-${user}`;
      server.tokens.set(token, {username: user});
      const path = join(dir, `kubeconfig-${user}`);
      writeFileSync(path, server.kubeconfig('kd', token), {mode: 0o600});
      return createKubeClient({kubeconfig: path, qps: 1000, burst: 1000, ...clientOptions});
    },
    async close() {
      await server.close();
      rmSync(dir, {recursive: true, force: true});
    },
  };
}

/**
 * Resolves once the clients of `server` are quiet: nothing is being answered and no new request
 * arrived over a few event-loop turns. A test stepping a fake clock waits for this after each step,
 * so each round's real HTTP ends before the next step, however slow the machine (a fixed real
 * wait is too short under load: a round still in flight skips the next one).
 */
export async function quiet(server: KubeApiServer): Promise<void> {
  for (;;) {
    const seen = server.calls.length;
    await flushMicrotasks();
    if (server.idle() && server.calls.length === seen) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
