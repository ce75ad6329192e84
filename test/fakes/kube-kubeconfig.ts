/**
 * Kubeconfig YAML as `az aks get-credentials` / the cloud APIs hand it out, so the fakes
 * return files that kubectl and our own parser both read.
 */
import {stringify} from 'yaml';

/** An exec credential plugin entry (`users[].user.exec`). */
export interface KubeconfigExec {
  readonly apiVersion: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env: readonly {readonly name: string; readonly value: string}[] | null;
  readonly installHint?: string;
  readonly interactiveMode?: 'Never' | 'IfAvailable' | 'Always';
  readonly provideClusterInfo?: boolean;
}

/** How the kubeconfig's user authenticates. */
export type KubeconfigUser =
  | {readonly token: string}
  | {readonly exec: KubeconfigExec}
  | {readonly authProvider: {readonly name: string; readonly config: Readonly<Record<string, string>>}};

/** Inputs of {@link buildKubeconfig}. */
export interface KubeconfigInput {
  readonly clusterName: string;
  readonly server: string;
  /** PEM of the CA that signed the API server certificate; omitted from the file when empty. */
  readonly caPem?: string;
  readonly userName: string;
  readonly user: KubeconfigUser;
}

/** Builds a one-cluster, one-context kubeconfig YAML document. */
export function buildKubeconfig(input: KubeconfigInput): string {
  const cluster: Record<string, string> = {server: input.server};
  if (input.caPem !== undefined && input.caPem !== '') {
    cluster['certificate-authority-data'] = Buffer.from(input.caPem, 'utf8').toString('base64');
  }
  let user: Record<string, unknown>;
  if ('token' in input.user) user = {token: input.user.token};
  else if ('exec' in input.user) user = {exec: input.user.exec};
  else user = {'auth-provider': input.user.authProvider};
  return stringify({
    apiVersion: 'v1',
    clusters: [{cluster, name: input.clusterName}],
    contexts: [{context: {cluster: input.clusterName, user: input.userName}, name: input.clusterName}],
    'current-context': input.clusterName,
    kind: 'Config',
    preferences: {},
    users: [{name: input.userName, user}],
  }, {lineWidth: 0});
}
