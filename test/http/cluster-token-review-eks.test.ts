/**
 * A workload token of a discovered EKS cluster, checked with the credential the service really
 * mints: `clusterReviewFor` without an injected credential signs an EKS token with the AWS SDK
 * (explicit keys, STS endpoint of the fake AWS), and the discovered cluster's fake API server
 * admits the TokenReview only after verifying that token like EKS does (presigned
 * GetCallerIdentity for its own cluster name). Listed service account accepted, unlisted refused.
 */
import {afterAll, beforeAll, describe, expect, it, vi} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {parseConfig} from '../../src/config/load.ts';
import {systemClock} from '../../src/core/clock.ts';
import {createAuthenticator} from '../../src/http/auth.ts';
import {clusterReviewFor} from '../../src/service/cluster-auth.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import type {KubeApiServer} from '../fakes/kube-apiserver-crud.ts';
import {startKubeApiServer} from '../fakes/kube-apiserver-crud.ts';
import {eksAuthenticator} from '../probe/eks-fixtures.ts';
import {legacyToken} from '../helpers/sa-token.ts';

const ACCOUNT = '111111111111';
const USER_ARN = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const KEY = {accessKeyId: 'AKIACLUSTERREVIEW001', secretAccessKey: 'cluster-review-secret', arn: USER_ARN};

let aws: FakeAws;
let prod: KubeApiServer;
const GRAFANA = legacyToken('monitoring:grafana');
const INTRUDER = legacyToken('default:intruder');
const MADE_UP = legacyToken('monitoring:grafana', 'no cluster issued this');

/** Why the discovered cluster refused a bearer token (never the token itself). */
let refused: string[] = [];
/** Principals whose EKS token the discovered cluster accepted. */
let admitted: string[] = [];

/**
 * An API server standing in for EKS cluster `name`: it authenticates our credential as EKS does
 * (the presigned GetCallerIdentity replayed to STS with its own cluster id, then the caller's
 * access entry), and knows its workloads' service-account tokens.
 */
function eksCluster(name: string): Promise<KubeApiServer> {
  const authn = eksAuthenticator({world: aws.world, clusters: [{account: ACCOUNT, region: 'us-east-1', name}], stsUrl: aws.url});
  refused = authn.refused;
  admitted = [];
  return startKubeApiServer({
    tokens: {},
    authenticate: async (token) => {
      const user = await authn.authenticate(token);
      if (!user) return undefined;
      admitted.push(authn.accepted.at(-1)?.principalArn ?? '');
      return {username: user.user, groups: user.groups};
    },
    reviewToken: (token) => ({
      [GRAFANA]: {username: 'system:serviceaccount:monitoring:grafana'},
      [INTRUDER]: {username: 'system:serviceaccount:default:intruder'},
    })[token],
  });
}

function kubeServer(name: string, api: KubeApiServer): KubeServer {
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels: {env: 'prod'}, expires: '2099-01-01T00:00:00Z', revision: '1'},
    spec: {version: '0', hostname: 'h', host_id: 'x', proxy_ids: [], cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: '', labels: {env: 'prod'}}, spec: {aws: {region: 'us-east-1', account_id: ACCOUNT, name}}}},
    status: {endpoint: api.url, ca_data: Buffer.from(api.caPem).toString('base64'), access: {kind: 'eks', cluster_name: name, region: 'us-east-1'}},
  };
}

/** The service's authenticator for `allowed`, over an inventory of `servers`, minting for real. */
function authenticator(allowed: string[], servers: KubeServer[]) {
  const config = parseConfig(`version: v1\ndiscovery_service:\n  discovery_group: mgmt\nhttp:\n  auth:\n    allowed_service_accounts: ${JSON.stringify(allowed)}\n`, 'svc.yaml');
  const {clusterTokenReview} = clusterReviewFor({config, inventory: {list: () => servers}, clock: systemClock, env: process.env});
  if (!clusterTokenReview) throw new Error('expected a cluster reviewer');
  const auth = createAuthenticator({clock: systemClock, allowedServiceAccounts: allowed, clusterTokenReview});
  if (!auth) throw new Error('expected an authenticator');
  return auth;
}

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  world.addCluster(ACCOUNT, 'us-east-1', {name: 'prod-a'});
  world.addAccessEntry(ACCOUNT, 'us-east-1', 'prod-a', {principalArn: USER_ARN, kubernetesGroups: ['kube-discovery'], username: 'kube-discovery'});
  aws = await startFakeAws({world});
  // The SDK's default chain reads the process environment, as in the service.
  for (const [k, v] of Object.entries({...aws.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_EC2_METADATA_DISABLED: 'true', AWS_CONFIG_FILE: '/nonexistent', AWS_SHARED_CREDENTIALS_FILE: '/nonexistent'})) vi.stubEnv(k, v);
  prod = await eksCluster('prod-a');
});
afterAll(async () => {
  vi.unstubAllEnvs();
  await prod.close();
  await aws.close();
});

describe('TokenReview on a discovered EKS cluster with a minted EKS token', () => {
  it('accepts a listed service account: the cluster verified our minted EKS token, then reviewed the workload token', async () => {
    const auth = authenticator(['prod-a/monitoring:grafana'], [kubeServer('prod-a', prod)]);
    const before = prod.calls.length;
    expect(await auth(`Bearer ${GRAFANA}`)).toBe(true);
    expect(admitted).toEqual([USER_ARN]);
    const reviews = prod.calls.slice(before).filter((c) => c.path === '/apis/authentication.k8s.io/v1/tokenreviews');
    expect(reviews.map((c) => c.user)).toEqual(['kube-discovery']);
  });

  it('refuses an unlisted service account of that cluster, and a made-up token', async () => {
    const auth = authenticator(['prod-a/monitoring:grafana'], [kubeServer('prod-a', prod)]);
    const before = prod.calls.length;
    expect(await auth(`Bearer ${INTRUDER}`)).toBe(false);
    // Refused on the cluster's verdict, not for want of a credential: the review ran as us.
    expect(prod.calls.slice(before).map((c) => `${c.path} ${c.user ?? ''}`)).toEqual(['/apis/authentication.k8s.io/v1/tokenreviews kube-discovery']);
    expect(await auth(`Bearer ${MADE_UP}`)).toBe(false);
  });

  it('refuses when the cluster cannot verify our credential (it was minted for another cluster name)', async () => {
    // The inventory says "prod-b" lives at prod-a's API server: the token names prod-b, prod-a refuses it.
    const auth = authenticator(['prod-b/monitoring:grafana'], [kubeServer('prod-b', prod)]);
    refused.length = 0;
    admitted.length = 0;
    expect(await auth(`Bearer ${GRAFANA}`)).toBe(false);
    expect(admitted).toEqual([]);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.join('\n')).not.toContain('k8s-aws-v1.');
  });
});
