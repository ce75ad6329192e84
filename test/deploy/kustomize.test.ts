// The Kubernetes manifests, rendered by the real `kubectl kustomize` (base, every overlay,
// the components) and checked against what the service actually does: the config in the
// ConfigMap passes our own parser, probes and Service reach the port it listens on, the
// config file and the registry live where the pod mounts them, and the pod is locked down.
import {execFile} from 'node:child_process';
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {promisify} from 'node:util';
import {beforeAll, describe, expect, it} from 'vitest';
import {parse, parseAllDocuments} from 'yaml';
import {parseConfig} from '../../src/config/load.ts';
import type {Config} from '../../src/config/schema.ts';
import {ALERTS_FILE, PROMETHEUS_RULE_FILE, renderPrometheusRule} from './prometheus-rule.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const KUSTOMIZE_ROOT = path.join(ROOT, 'deploy/kubernetes');
const KUBECTL = existsSync('/usr/bin/kubectl') ? '/usr/bin/kubectl' : 'kubectl';
const run = promisify(execFile);
const kubectlFound = await run(KUBECTL, ['version', '--client']).then(() => true, () => false);
const skip = !kubectlFound && process.env['CI'] === undefined;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- rendered manifests are untyped YAML; the assertions are the schema
type Obj = Record<string, any>;

/** Renders a kustomization directory into its objects. */
async function render(dir: string): Promise<Obj[]> {
  const {stdout} = await run(KUBECTL, ['kustomize', dir], {maxBuffer: 16 << 20});
  return parseAllDocuments(stdout).map((d) => d.toJS() as Obj).filter((o) => o !== null);
}

/** Renders an ad-hoc overlay (resources + components, relative to deploy/kubernetes) from a temporary directory. */
async function renderComposed(resources: string[], components: string[]): Promise<Obj[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'kd-kustomize-'));
  try {
    const rel = (p: string): string => path.relative(dir, path.join(KUSTOMIZE_ROOT, p));
    writeFileSync(path.join(dir, 'kustomization.yaml'), JSON.stringify({resources: resources.map(rel), components: components.map(rel)}));
    return await render(dir);
  } finally {
    rmSync(dir, {recursive: true, force: true});
  }
}

/** The rendered deployment, resolved: the workload, its container, the config in its ConfigMap. */
interface Rendered {
  readonly objects: Obj[];
  readonly workload: Obj;
  readonly pod: Obj;
  readonly container: Obj;
  readonly config: Config;
  readonly configPath: string;
}

function resolve(objects: Obj[]): Rendered {
  const workloads = objects.filter((o) => ['StatefulSet', 'Deployment'].includes(o['kind']) && o['metadata'].name === 'kube-discovery');
  expect(workloads, 'exactly one kube-discovery workload').toHaveLength(1);
  const workload = workloads[0] as Obj;
  const pod = workload['spec'].template.spec;
  const container = pod.containers.find((c: Obj) => c['name'] === 'kube-discovery');
  const args: string[] = container.args;
  const configPath = args[args.indexOf('-c') + 1] ?? '';
  expect(args[0]).toBe('start');
  // The config file must be a key of the ConfigMap mounted at its directory.
  const mount = container.volumeMounts.find((m: Obj) => m['mountPath'] === path.posix.dirname(configPath));
  expect(mount, `a volume mounted at ${path.posix.dirname(configPath)}`).toBeDefined();
  const volume = pod.volumes.find((v: Obj) => v['name'] === mount.name);
  const configMap = objects.find((o) => o['kind'] === 'ConfigMap' && o['metadata'].name === volume?.configMap?.name);
  expect(configMap, `ConfigMap ${volume?.configMap?.name} referenced by volume ${mount.name}`).toBeDefined();
  const text = configMap?.['data']?.[path.posix.basename(configPath)];
  expect(typeof text, `key ${path.posix.basename(configPath)} in the ConfigMap`).toBe('string');
  return {objects, workload, pod, container, config: parseConfig(text as string, configPath), configPath};
}

/** Whether `file` lies on a volume mounted in the container (and, if asked, a writable one). */
function mountFor(r: Rendered, file: string): Obj | undefined {
  return (r.container['volumeMounts'] as Obj[])
    .filter((m) => file === m['mountPath'] || file.startsWith(`${m['mountPath']}/`))
    .sort((a, b) => b['mountPath'].length - a['mountPath'].length)[0];
}

const portOf = (addr: string): number => Number(addr.split(':').at(-1));
const find = (r: Rendered, kind: string, name?: string): Obj | undefined => r.objects.find((o) => o['kind'] === kind && (name === undefined || o['metadata'].name === name));

/** The checks every deployable rendering must pass. */
function checkDeployable(r: Rendered): void {
  const {pod, container, config} = r;
  // Listening: every interface, on the container port the probes, the Service and Prometheus use.
  const listen = config.http.listen_addr;
  expect(listen, 'kubelet probes and the Service cannot reach a loopback listener').toMatch(/^(0\.0\.0\.0|\[::\]|):\d+$/);
  const httpPort = (container['ports'] as Obj[]).find((p) => p['name'] === 'http');
  expect(httpPort?.['containerPort']).toBe(portOf(listen));
  const probePort = (probe: Obj): number => (probe['httpGet'].port === 'http' ? httpPort?.['containerPort'] : probe['httpGet'].port);
  expect(container['livenessProbe'].httpGet.path).toBe('/healthz');
  expect(container['readinessProbe'].httpGet.path).toBe('/readyz');
  for (const probe of [container['livenessProbe'], container['readinessProbe'], container['startupProbe']].filter(Boolean)) {
    expect(probePort(probe)).toBe(portOf(listen));
  }
  const service = find(r, 'Service', 'kube-discovery');
  expect(service?.['spec'].ports.map((p: Obj) => [p['name'], p['targetPort']])).toEqual([['http', 'http']]);
  expect(Object.entries(service?.['spec'].selector).every(([k, v]) => r.workload['spec'].template.metadata.labels[k] === v)).toBe(true);
  const monitor = find(r, 'ServiceMonitor');
  expect(monitor?.['spec'].endpoints).toEqual([expect.objectContaining({port: 'http', path: '/metrics'})]);
  expect(config.metrics.listen_addr, '/metrics is served on the http port the ServiceMonitor scrapes').toBeUndefined();
  const policy = find(r, 'NetworkPolicy', 'kube-discovery');
  expect(policy?.['spec'].ingress.flatMap((i: Obj) => i['ports'].map((p: Obj) => p['port']))).toEqual([portOf(listen)]);

  // Locked down: the restricted Pod Security Standard and a read-only root filesystem.
  expect(pod['securityContext']).toMatchObject({runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: 'RuntimeDefault'}});
  expect(container['securityContext']).toMatchObject({
    runAsNonRoot: true,
    runAsUser: 65532,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: {drop: ['ALL']},
    seccompProfile: {type: 'RuntimeDefault'},
  });
  expect(find(r, 'Namespace')?.['metadata'].labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
  expect(container['resources'].requests).toMatchObject({cpu: expect.any(String), memory: expect.any(String)});
  expect(container['resources'].limits).toMatchObject({memory: expect.any(String)});
  expect(mountFor(r, '/tmp'), 'a writable /tmp on a read-only root filesystem').toMatchObject({mountPath: '/tmp'});
  // The service's own shutdown watchdog fires 30 s after SIGTERM; SIGKILL must come later.
  expect(pod['terminationGracePeriodSeconds']).toBeGreaterThan(30);
  expect(container['env']).toContainEqual({name: 'KUBE_DISCOVERY_REPLICA', valueFrom: {fieldRef: {fieldPath: 'metadata.name'}}});
  for (const o of r.objects.filter((o) => !['Namespace', 'ClusterRoleBinding', 'ClusterRole', 'CustomResourceDefinition'].includes(o['kind']))) {
    expect(o['metadata'].namespace, `${o['kind']} ${o['metadata'].name}`).toBe('kube-discovery');
  }
}

/** SQLite: one replica of a StatefulSet whose claim is mounted at the registry file's directory. */
function checkSqlite(r: Rendered): void {
  expect(r.config.storage.type).toBe('sqlite');
  const storagePath = r.config.storage.type === 'sqlite' ? r.config.storage.path : '';
  expect(path.posix.isAbsolute(storagePath)).toBe(true);
  expect(r.workload['kind']).toBe('StatefulSet');
  expect(r.workload['spec'].replicas).toBe(1);
  const mount = mountFor(r, storagePath);
  expect(mount?.['mountPath']).toBe(path.posix.dirname(storagePath));
  expect(mount?.['readOnly']).toBeFalsy();
  expect(r.workload['spec'].volumeClaimTemplates.map((c: Obj) => c['metadata'].name)).toContain(mount?.['name']);
  expect(r.pod['securityContext'].fsGroup, 'the claim is writable by the service user').toBe(65532);
}

const targets = {base: 'base', eks: 'overlays/eks', aks: 'overlays/aks', haEtcd: 'overlays/ha-etcd', kubernetes: 'overlays/kubernetes'} as const;
const rendered: Partial<Record<keyof typeof targets, Rendered>> = {};
const get = (name: keyof typeof targets): Rendered => rendered[name] as Rendered;

describe.skipIf(skip)('kubectl kustomize', () => {
  beforeAll(async () => {
    for (const [name, dir] of Object.entries(targets)) rendered[name as keyof typeof targets] = resolve(await render(path.join(KUSTOMIZE_ROOT, dir)));
  }, 60_000);

  it.each(Object.keys(targets) as (keyof typeof targets)[])('%s: config valid, probes, Service, mounts and securityContext line up', (name) => {
    checkDeployable(get(name));
  });

  it.each(['base', 'eks', 'aks'] as const)('%s: SQLite on a PersistentVolumeClaim at the directory of storage.path', (name) => {
    checkSqlite(get(name));
  });

  it('eks: the ServiceAccount names the IRSA role, and the Pod Identity agent is reachable', () => {
    const sa = find(get('eks'), 'ServiceAccount', 'kube-discovery');
    expect(sa?.['metadata'].annotations['eks.amazonaws.com/role-arn']).toMatch(/^arn:aws(-cn|-us-gov)?:iam::\d{12}:role\/.+/);
    const egress = get('eks').objects.filter((o) => o['kind'] === 'NetworkPolicy').flatMap((p) => p['spec'].egress ?? []);
    expect(egress.flatMap((e: Obj) => (e['to'] ?? []).map((t: Obj) => t['ipBlock']?.cidr))).toContain('169.254.170.23/32');
    expect(get('eks').config.discovery_service.aws.length).toBeGreaterThan(0);
  });

  it('aks: the pod carries the workload identity label and the ServiceAccount its client id', () => {
    const r = get('aks');
    expect(r.workload['spec'].template.metadata.labels['azure.workload.identity/use']).toBe('true');
    expect(find(r, 'ServiceAccount')?.['metadata'].annotations['azure.workload.identity/client-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.config.discovery_service.azure.length).toBeGreaterThan(0);
  });

  it('ha-etcd: three replicas of a Deployment on etcd, a PDB of two, anti-affinity, etcd secrets mounted', () => {
    const r = get('haEtcd');
    expect(r.workload['kind']).toBe('Deployment');
    expect(r.workload['spec'].replicas).toBe(3);
    expect(find(r, 'StatefulSet')).toBeUndefined();
    const pdb = find(r, 'PodDisruptionBudget');
    expect(pdb?.['spec'].minAvailable).toBe(2);
    expect(Object.entries(pdb?.['spec'].selector.matchLabels).every(([k, v]) => r.workload['spec'].template.metadata.labels[k] === v)).toBe(true);
    const antiAffinity = r.pod['affinity']?.podAntiAffinity;
    expect(antiAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? antiAffinity?.requiredDuringSchedulingIgnoredDuringExecution).toBeDefined();
    const storage = r.config.storage;
    expect(storage.type).toBe('etcd');
    if (storage.type !== 'etcd') return;
    // Every file the etcd client reads is on a mounted Secret.
    for (const file of [storage.tls?.ca, storage.tls?.cert, storage.tls?.key, storage.password_file]) {
      expect(file).toBeDefined();
      const mount = mountFor(r, file ?? '');
      const volume = r.pod['volumes'].find((v: Obj) => v['name'] === mount?.['name']);
      expect(volume?.secret?.secretName, `${file} is on a Secret volume`).toMatch(/^kube-discovery-etcd-/);
    }
    const egressPorts = r.objects.filter((o) => o['kind'] === 'NetworkPolicy').flatMap((p) => (p['spec'].egress ?? []).flatMap((e: Obj) => e['ports'].map((x: Obj) => x['port'])));
    for (const endpoint of storage.endpoints) expect(egressPorts).toContain(Number(new URL(endpoint).port || 2379));
  });

  it('kubernetes: two replicas on storage kubernetes, no volume claim, no etcd, a namespaced Role limited to its own resources, the CRDs', () => {
    const r = get('kubernetes');
    expect(r.workload['kind']).toBe('Deployment');
    expect(r.workload['spec'].replicas).toBe(2);
    expect(r.config.storage.type).toBe('kubernetes');
    expect(find(r, 'StatefulSet')).toBeUndefined();
    expect(r.objects.filter((o) => o['kind'] === 'PersistentVolumeClaim' || o['spec']?.volumeClaimTemplates)).toEqual([]);
    expect(r.pod['volumes'].map((v: Obj) => Object.keys(v).filter((k) => k !== 'name')[0]).sort()).toEqual(['configMap', 'emptyDir']);
    expect(JSON.stringify([r.workload, r.config.storage])).not.toMatch(/etcd/);
    expect(r.container['env']).toContainEqual({name: 'POD_NAME', valueFrom: {fieldRef: {fieldPath: 'metadata.name'}}});
    expect(find(r, 'ServiceAccount', 'kube-discovery')?.['automountServiceAccountToken']).toBe(true);
    // Namespaced only: a Role and its binding, no cluster-wide grants.
    expect(r.objects.filter((o) => o['kind'] === 'ClusterRole' || o['kind'] === 'ClusterRoleBinding')).toEqual([]);
    const role = find(r, 'Role', 'kube-discovery');
    const grants = Object.fromEntries((role?.['spec'] ?? role)['rules'].flatMap((rule: Obj) => rule['resources'].map((res: string) => [res, [...rule['verbs']].sort()])));
    expect(Object.keys(grants).sort()).toEqual(['discoveryconfigs', 'discoveryconfigs/status', 'kubeservers', 'leases', 'secrets']);
    expect(grants['secrets'], 'identity Secrets: read by name and create once, never list or change').toEqual(['create', 'get']);
    const binding = find(r, 'RoleBinding', 'kube-discovery');
    expect(binding?.['subjects']).toEqual([{kind: 'ServiceAccount', name: 'kube-discovery', namespace: 'kube-discovery'}]);
    const crds = r.objects.filter((o) => o['kind'] === 'CustomResourceDefinition');
    expect(crds.map((c) => c['metadata'].name).sort()).toEqual(['discoveryconfigs.kube-discovery.io', 'kubeservers.kube-discovery.io']);
    const kubeservers = crds.find((c) => c['metadata'].name === 'kubeservers.kube-discovery.io');
    expect(kubeservers?.['spec'].versions[0].additionalPrinterColumns.map((c: Obj) => c['name'])).toEqual(['Cloud', 'Region', 'Health', 'Stale', 'Age']);
    expect(find(r, 'PodDisruptionBudget')?.['spec'].minAvailable).toBe(1);
  });

  it('components compose with ha-etcd: the identity patches reach the Deployment', async () => {
    const aks = resolve(await renderComposed(['overlays/ha-etcd'], ['components/aks-identity']));
    expect(aks.workload['kind']).toBe('Deployment');
    expect(aks.workload['spec'].template.metadata.labels['azure.workload.identity/use']).toBe('true');
    const eks = resolve(await renderComposed(['overlays/ha-etcd'], ['components/eks-identity']));
    expect(find(eks, 'ServiceAccount')?.['metadata'].annotations['eks.amazonaws.com/role-arn']).toBeDefined();
  });

  it('components/api-auth mounts the service-account token and grants TokenReview', async () => {
    const r = resolve(await renderComposed(['overlays/eks'], ['components/api-auth']));
    expect(find(r, 'ServiceAccount')?.['automountServiceAccountToken']).toBe(true);
    const binding = find(r, 'ClusterRoleBinding', 'kube-discovery-auth-delegator');
    expect(binding?.['roleRef'].name).toBe('system:auth-delegator');
    expect(binding?.['subjects']).toEqual([{kind: 'ServiceAccount', name: 'kube-discovery', namespace: 'kube-discovery'}]);
    expect(find(get('base'), 'ServiceAccount')?.['automountServiceAccountToken']).toBe(false);
  });

  it(`the PrometheusRule's groups are exactly ${ALERTS_FILE}'s (regenerate: node test/deploy/prometheus-rule.ts)`, () => {
    const alerts = readFileSync(path.join(ROOT, ALERTS_FILE), 'utf8');
    const rule = find(get('base'), 'PrometheusRule');
    expect(rule?.['spec'].groups).toEqual((parse(alerts) as {groups: unknown}).groups);
    expect(readFileSync(path.join(ROOT, PROMETHEUS_RULE_FILE), 'utf8')).toBe(renderPrometheusRule(alerts));
  });
});

if (skip) {
  describe('kubectl kustomize', () => {
    it.skip('kubectl is not installed, so the manifests were not rendered (CI installs it and fails without it)', () => {});
  });
}
