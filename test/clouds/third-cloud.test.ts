/**
 * A third cloud is one module plus one registration: this test registers a small GKE-like cloud
 * in-process (nothing in src/ knows it) and has `Discovery` run real cycles over it — its planner
 * comes from the module, then evaluate, reconcile, a memory registry behind the heartbeat, metrics
 * and the no-credentials warning — next to EKS. If Discovery still built the AWS and Azure planners
 * by name, the GCP clusters would never be listed.
 * If the core still branched on cloud names, the GCP clusters would be misnamed, mislabelled,
 * deleted by the wrong source or counted as `other`.
 */
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {parseKubeServers, type KubeServer} from '../../heartbeats/kube-server.ts';
import {compileTagMatcher, type TagMatcherInput} from '../../matchers/index.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {Config} from '../../src/config/schema.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import {awsCloud} from '../../src/clouds/aws/cloud-module.ts';
import {azureCloud} from '../../src/clouds/azure/cloud-module.ts';
import {Clouds, type CloudModule} from '../../src/clouds/cloud.ts';
import type {ClusterFetcher} from '../../src/clouds/fetcher.ts';
import type {DiscoveredCluster, SourceRef, SourceResult} from '../../src/core/types.ts';
import {runCycle, type CycleReport} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {warnIfNoCredentials} from '../../src/observability/log-events.ts';
import {Metrics} from '../../src/observability/metrics.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {context, eksCluster} from '../discovery/builders.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const PROJECT_LABEL = 'project-id';

/** The cloud's matcher block, `discovery_service.gcp`: the one piece a real GCP would add to `src/config/schema.ts`. */
type GcpServiceConfig = {readonly gcp?: readonly {readonly tags: TagMatcherInput}[]};

/** What a caller hands the GCP planner through `cloudOptions.GCP`: the fake GKE API's answers. */
interface GcpPlannerOptions {
  readonly listing: () => SourceResult[];
  readonly planFails?: boolean;
}

/** The whole of the third cloud: what a `src/clouds/gcp/cloud-module.ts` would hold. */
const gcpCloud: CloudModule = {
  cloud: 'GCP',
  type: 'gke',
  matchers: (ds) => (ds as GcpServiceConfig).gcp ?? [],
  nameOverrideTags: ['TeleportKubernetesName'],
  // Deliberately unlike EKS and AKS (project before region), so a core that still chose the parts by cloud name would misname.
  nameParts: (c) => [c.type, c.account, c.region],
  locationLabels: (c) => ({[PROJECT_LABEL]: c.account}),
  coversLocation: (source, labels) => source.account === '' || labels[PROJECT_LABEL] === source.account,
  description: (c) => `GCP GKE cluster "${c.name}" in ${c.region}`,
  clusterSpec: () => ({}),
  access: () => undefined,
  registeredCluster: (server) => {
    const labels = server.spec.cluster.metadata.labels;
    if (labels['teleport.dev/cloud'] !== 'GCP') return undefined;
    return {name: labels['teleport.internal/discovered-name'] ?? server.metadata.name, account: labels[PROJECT_LABEL] ?? '', region: labels['region'], resourceGroup: ''};
  },
  noCredentialsWarning: () => 'no GCP credentials found: set GOOGLE_APPLICATION_CREDENTIALS',
  probe: {
    accessKind: 'gke',
    clusterName: () => undefined,
    principal: () => undefined,
    apiName: 'GKE',
    networkHint: 'check the authorized networks',
    credentialsHint: 'check the service account',
    unauthorized: (t) => `grant ${t.principal ?? 'the identity'} roles/container.clusterViewer`,
    rbacSubject: (t) => ({subject: `--user=${t.principal ?? '<email>'}`, note: ''}),
  },
  // No coversAll: Discovery supplies `gke:*`, so a planning failure protects every GCP entry.
  planner(options) {
    if (((options.config.discovery_service as GcpServiceConfig).gcp ?? []).length === 0) return undefined;
    const own = options.cloudOptions?.['GCP'] as GcpPlannerOptions;
    return {
      plan: async () => {
        if (own.planFails) throw new Error('projects.locations.clusters.list: connection reset');
        return {fetchers: own.listing().map((r) => fetcher(() => r)), failed: []};
      },
    };
  },
};

/** EKS as built in, except that its planner answers from the test's listing instead of the AWS SDK. */
const eksFromListing: CloudModule = {
  ...awsCloud,
  planner: (options) => (options.config.discovery_service.aws.length === 0 ? undefined : {plan: async () => ({fetchers: [fetcher(() => listing.eks)], failed: []})}),
};

const clouds = new Clouds([eksFromListing, azureCloud, gcpCloud]);

/** One EKS matcher and one GCP matcher, both matching every tag. */
function gcpConfig(aws = true): Config {
  const config = parseConfig(`version: v1\ndiscovery_service:\n  discovery_group: g1\n  aws: [${aws ? `{types: [eks], regions: [us-east-1]}` : ''}]\nstorage: {type: memory}\n`, 'third-cloud.yaml');
  const gcp: GcpServiceConfig['gcp'] = [{tags: {'*': '*'}}];
  return {...config, discovery_service: {...config.discovery_service, ...{gcp}}};
}
const ACCOUNT = '111111111111';

function gkeSource(project: string, region: string): SourceRef {
  return {id: `gke:${region}:${project}`, cloud: 'GCP', type: 'gke', region, account: project, matcherIndex: 0};
}

function gkeCluster(name: string, project: string, region: string, extra: Partial<DiscoveredCluster> = {}): DiscoveredCluster {
  return {cloud: 'GCP', type: 'gke', name, region, account: project, tags: {env: 'prod'}, status: 'RUNNING', statusOk: true, endpoint: `https://${name}.gke.example`, sourceId: gkeSource(project, region).id, ...extra};
}

/** The clouds' answers of the next cycle, set by each test. */
let listing: {gke: SourceResult | SourceResult[]; eks: SourceResult; planFails?: boolean};

function fetcher(pick: () => SourceResult): ClusterFetcher {
  const result = pick();
  return {source: result.source, fetch: async () => pick()};
}

let clock: FakeClock;
let backend: MemoryBackend;
let heartbeat: Heartbeat;
let metrics: Metrics;

beforeEach(async () => {
  clock = new FakeClock(Date.UTC(2026, 0, 1));
  backend = new MemoryBackend({clock});
  heartbeat = new Heartbeat({backend, clock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  metrics = new Metrics({defaultMetrics: false, clouds});
});

afterEach(async () => {
  await heartbeat.stop({deregister: false});
  await backend.close();
});

let discovery: Discovery;

async function cycle(): Promise<CycleReport> {
  // A new Discovery each cycle reads the current listing; the planner is the module's, not the test's.
  discovery = new Discovery({
    config: gcpConfig(),
    clock,
    clouds,
    cloudOptions: {GCP: {listing: () => [listing.gke].flat(), ...(listing.planFails ? {planFails: true} : {})} satisfies GcpPlannerOptions},
  });
  const report = await discovery.runCycle(createRegistrar(backend, heartbeat, 'g1'));
  metrics.observeCycle(report);
  metrics.observeInventory(await registered());
  return report;
}

async function registered(): Promise<KubeServer[]> {
  return parseKubeServers(await backend.list('kube_servers/g1/'));
}

function ok(source: SourceRef, clusters: DiscoveredCluster[]): SourceResult {
  return {source, ok: true, clusters, malformed: []};
}

const GKE = gkeSource('shop-prod', 'europe-west1');
const EKS = eksSource(0, 'us-east-1', ACCOUNT);

describe('a third cloud registered in-process', () => {
  it('is named, labelled and described by its module, next to EKS entries that stay as they were', async () => {
    listing = {
      gke: ok(GKE, [gkeCluster('web', 'shop-prod', 'europe-west1'), gkeCluster('shop-prod-db', 'shop-prod', 'europe-west1'), gkeCluster('paused', 'shop-prod', 'europe-west1', {status: 'STOPPING', statusOk: false})]),
      eks: ok(EKS, [eksCluster('api', 'us-east-1', ACCOUNT)]),
    };
    const report = await cycle();
    expect(report.result).toBe('success');
    const byName = new Map((await registered()).map((s) => [s.metadata.name, s]));
    expect([...byName.keys()].sort()).toEqual(['api-eks-us-east-1-111111111111', 'shop-prod-db-gke-europe-west1', 'web-gke-shop-prod-europe-west1']);
    const web = byName.get('web-gke-shop-prod-europe-west1')!.spec.cluster;
    expect(web.metadata.description).toBe('GCP GKE cluster "web" in europe-west1');
    expect(web.metadata.labels).toMatchObject({'teleport.dev/cloud': 'GCP', 'teleport.dev/discovery-type': 'gke', region: 'europe-west1', 'project-id': 'shop-prod', 'teleport.internal/discovered-name': 'web'});
    expect(web.metadata.labels['account-id']).toBeUndefined();
    expect(report.items.find((i) => i.name === 'paused-gke-shop-prod-europe-west1')).toMatchObject({action: 'skip', skipKind: 'status'});
    // The EKS document is exactly what the built-in clouds alone make.
    const alone = evaluate([ok(EKS, [eksCluster('api', 'us-east-1', ACCOUNT)])], {...context('g1')});
    const {expires: _e, revision: _r, ...metadata} = byName.get('api-eks-us-east-1-111111111111')!.metadata;
    expect({...byName.get('api-eks-us-east-1-111111111111')!, metadata, status: {...byName.get('api-eks-us-east-1-111111111111')!.status, discovered_at: undefined}}).toEqual({
      ...alone.candidates.get('api-eks-us-east-1-111111111111')!.server,
      // The heartbeat stamps the writer identity.
      spec: {...alone.candidates.get('api-eks-us-east-1-111111111111')!.server.spec, host_id: 'h', hostname: 'n', version: 't'},
      status: {...alone.candidates.get('api-eks-us-east-1-111111111111')!.server.status, discovered_at: undefined},
    });
  });

  it('keeps its entries, stale, while its source fails, and deletes only once a good listing of its project no longer has them', async () => {
    listing = {gke: ok(GKE, [gkeCluster('web', 'shop-prod', 'europe-west1'), gkeCluster('batch', 'shop-prod', 'europe-west1')]), eks: ok(EKS, [])};
    await cycle();
    // Failed: nothing of the project goes, both are marked stale. Good, empty listings of EKS and
    // of another project cover none of them.
    const timeout = {reason: 'timeout' as const, code: 'DEADLINE_EXCEEDED', message: 'timed out', operation: 'ListClusters'};
    listing = {gke: [{source: GKE, ok: false, clusters: [], malformed: [], error: timeout}, ok(gkeSource('other-project', 'europe-west1'), [])], eks: ok(EKS, [])};
    const failed = await cycle();
    expect(failed.items.filter((i) => i.action === 'stale').map((i) => i.name).sort()).toEqual(['batch-gke-shop-prod-europe-west1', 'web-gke-shop-prod-europe-west1']);
    expect(failed.items.filter((i) => i.action === 'delete')).toEqual([]);
    expect((await registered()).every((s) => s.status?.stale === true)).toBe(true);
    // Its own project's good listing without `batch` deletes it, and only it.
    listing = {gke: ok(GKE, [gkeCluster('web', 'shop-prod', 'europe-west1')]), eks: ok(EKS, [])};
    const good = await cycle();
    expect(good.items.find((i) => i.name === 'batch-gke-shop-prod-europe-west1')).toMatchObject({action: 'delete', reason: `no longer listed by ${GKE.id}`});
    expect((await registered()).map((s) => s.metadata.name)).toEqual(['web-gke-shop-prod-europe-west1']);
  });

  it('gets its own cloud label in the metrics and its own no-credentials warning', async () => {
    listing = {gke: ok(GKE, [gkeCluster('web', 'shop-prod', 'europe-west1')]), eks: ok(EKS, [eksCluster('api', 'us-east-1', ACCOUNT)])};
    await cycle();
    metrics.tokenMinted('GCP');
    const {body} = await metrics.render();
    expect(body).toContain('kube_discovery_sources{cloud="GCP",region="europe-west1",state="ok"} 1');
    expect(body).toContain('kube_discovery_clusters_by_health{cloud="GCP",health="unknown"} 1');
    expect(body).toContain('kube_discovery_clusters_by_health{cloud="AWS",health="unknown"} 1');
    expect(body).toContain('kube_discovery_tokens_minted_total{cloud="GCP"} 1');
    expect(body).not.toContain('cloud="other"');

    const warnings: {fields: object; message: string}[] = [];
    const log = {warn: (fields: object, message: string) => warnings.push({fields, message})};
    const failure = {reason: 'access_denied' as const, code: 'NoCredentials', message: 'no credentials', operation: 'ListClusters', noCredentials: true as const};
    const report = {sources: [{id: GKE.id, cloud: 'GCP', region: GKE.region, account: GKE.account, ok: false, clusters: 0, error: failure}, {id: EKS.id, cloud: 'AWS', region: 'us-east-1', account: ACCOUNT, ok: true, clusters: 0}]};
    warnIfNoCredentials(log as never, report as unknown as CycleReport, clouds);
    expect(warnings).toEqual([{fields: {event: 'no_credentials', cloud: 'GCP'}, message: 'no GCP credentials found: set GOOGLE_APPLICATION_CREDENTIALS'}]);
  });

  it('is unknown until registered: a cycle with its clusters fails loudly and deletes nothing', async () => {
    listing = {gke: ok(GKE, [gkeCluster('web', 'shop-prod', 'europe-west1')]), eks: ok(EKS, [])};
    await cycle();
    const matcher = compileTagMatcher({'*': '*'});
    const withoutGcp = runCycle({
      planners: [{plan: async () => ({fetchers: [fetcher(() => ok(GKE, [gkeCluster('other', 'shop-prod', 'europe-west1')]))], failed: []})}],
      registrar: createRegistrar(backend, heartbeat, 'g1'),
      clock,
      discoveryGroup: 'g1',
      matcherFor: () => matcher,
      sourceConcurrency: 4,
      evaluateContext: {staticLabels: {}},
    });
    await expect(withoutGcp).rejects.toThrow('unknown cloud "GCP"; known: AWS, Azure');
    expect((await registered()).map((s) => s.metadata.name)).toEqual(['web-gke-shop-prod-europe-west1']);
  });

  it('supplies its planner through its module: Discovery builds one per registered cloud with matchers, and its planning failure deletes nothing', async () => {
    listing = {gke: ok(GKE, [gkeCluster('web', 'shop-prod', 'europe-west1')]), eks: ok(EKS, [eksCluster('api', 'us-east-1', ACCOUNT)])};
    await cycle();
    expect(discovery.planner(gcpCloud)).toBeDefined();
    expect(discovery.planner(eksFromListing)).toBeDefined();
    expect(discovery.planner(azureCloud)).toBeUndefined();

    // The planner throws: Discovery reports the module's catch-all source, and both entries stay (GCP's stale).
    listing = {gke: [], eks: ok(EKS, [eksCluster('api', 'us-east-1', ACCOUNT)]), planFails: true};
    const failed = await cycle();
    expect(failed.sources.find((s) => !s.ok)).toMatchObject({id: 'gke:*', cloud: 'GCP'});
    expect(failed.items.filter((i) => i.action === 'delete')).toEqual([]);
    const after = await registered();
    expect(after.map((s) => [s.metadata.name, s.status?.stale === true]).sort()).toEqual([
      ['api-eks-us-east-1-111111111111', false],
      ['web-gke-shop-prod-europe-west1', true],
    ]);
  });

  it('gets no planner from a Discovery whose registry does not hold it', async () => {
    listing = {gke: ok(GKE, [gkeCluster('web', 'shop-prod', 'europe-west1')]), eks: ok(EKS, [])};
    const builtIn = new Discovery({config: gcpConfig(false), clock, cloudOptions: {GCP: {listing: () => [listing.gke].flat()} satisfies GcpPlannerOptions}});
    expect(builtIn.planner(gcpCloud)).toBeUndefined();
    expect(builtIn.planner(awsCloud)).toBeUndefined();
    const report = await builtIn.runCycle(createRegistrar(backend, heartbeat, 'g1'));
    expect(report.sources).toEqual([]);
    expect(await registered()).toEqual([]);
    // With an aws matcher the built-in AWS module plans (lazily: its SDK loads on the first plan, not here).
    expect(new Discovery({config: gcpConfig(true), clock}).planner(awsCloud)).toBeDefined();
  });
});
