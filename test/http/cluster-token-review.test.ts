// /v1/* access with a service-account token of a discovered cluster: TokenReview against that
// cluster (a fake API server on the wire), authenticated with the credential we hold for it.
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {createAuthenticator} from '../../src/http/auth.ts';
import {clusterTokenReviewer, parseAllowEntry} from '../../src/http/cluster-token-review.ts';
import type {KubeApiServer} from '../fakes/kube-apiserver-crud.ts';
import {startKubeApiServer} from '../fakes/kube-apiserver-crud.ts';
import {jwt, legacyToken} from '../helpers/sa-token.ts';

let prod: KubeApiServer;
let dev: KubeApiServer;
let prodB: KubeApiServer;

const PROD_A_ISSUER = 'https://oidc.eks.us-east-1.amazonaws.com/id/AAAA1111';
const PROD_B_ISSUER = 'https://oidc.eks.us-east-1.amazonaws.com/id/BBBB2222';

/** Legacy tokens name no cluster: they go to the clusters whose issuer is not recorded (prod-a and dev-b here). */
const GRAFANA = legacyToken('monitoring:grafana');
const INTRUDER = legacyToken('default:intruder');
const DEV_GRAFANA = legacyToken('monitoring:grafana', 'dev-b');
const MADE_UP = legacyToken('monitoring:grafana', 'no cluster issued this');
const PROD_B_GRAFANA = jwt({iss: PROD_B_ISSUER, sub: 'system:serviceaccount:monitoring:grafana'});
/** A bearer that is no JWT (a static token, a cloud credential pasted by mistake): no service-account token looks like it. */
const STATIC_TOKEN = 'static-api-token-8c1f0e2a';
const UNKNOWN_ISSUER_TOKEN = jwt({iss: 'https://oidc.eks.us-east-1.amazonaws.com/id/CCCC3333', sub: 'system:serviceaccount:monitoring:grafana'});

/** An entry as discovery writes it: the cluster's labels on its kube_cluster, only the group's on the kube_server. */
function server(name: string, api: KubeApiServer, labels: Record<string, string>, oidcIssuer?: string): KubeServer {
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels: {'teleport.internal/discovery-group-name': 'g'}, expires: '2099-01-01T00:00:00Z', revision: '1'},
    spec: {version: '0', hostname: 'h', host_id: 'x', proxy_ids: [], cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: '', labels}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name}}}},
    status: {endpoint: api.url, ca_data: Buffer.from(api.caPem).toString('base64'), access: {kind: 'eks', cluster_name: name, region: 'us-east-1'}, ...(oidcIssuer ? {oidc_issuer: oidcIssuer} : {})},
  };
}

beforeAll(async () => {
  // Each discovered cluster knows its own service-account tokens and accepts the credential we mint for it.
  prod = await startKubeApiServer({
    tokens: {'minted-for-prod-a': {username: 'arn:aws:sts::111111111111:assumed-role/kube-discovery/x'}},
    reviewToken: (token) => ({
      [GRAFANA]: {username: 'system:serviceaccount:monitoring:grafana'},
      [INTRUDER]: {username: 'system:serviceaccount:default:intruder'},
      // A cluster with a static token file: a bearer that is no JWT, which it would accept.
      [STATIC_TOKEN]: {username: 'system:serviceaccount:monitoring:grafana'},
    })[token],
  });
  prodB = await startKubeApiServer({
    tokens: {'minted-for-prod-b': {username: 'arn:aws:sts::111111111111:assumed-role/kube-discovery/x'}},
    reviewToken: (token) => (token === PROD_B_GRAFANA ? {username: 'system:serviceaccount:monitoring:grafana'} : undefined),
  });
  dev = await startKubeApiServer({
    tokens: {'minted-for-dev-b': {username: 'arn:aws:sts::111111111111:assumed-role/kube-discovery/x'}},
    reviewToken: (token) => (token === DEV_GRAFANA ? {username: 'system:serviceaccount:monitoring:grafana'} : undefined),
  });
});
afterAll(async () => {
  await prod.close();
  await prodB.close();
  await dev.close();
});

/**
 * The authenticator under test. `timeoutMs` bounds each TokenReview in real time: short only
 * where a review is meant to hang, so an answer slowed by a loaded machine is not taken for one.
 */
function authenticator(allowed: string[], timeoutMs = 10_000, servers = [server('prod-a', prod, {env: 'prod'}), server('dev-b', dev, {env: 'dev'})]) {
  const minted: string[] = [];
  const auth = createAuthenticator({
    clock: new FakeClock(),
    allowedServiceAccounts: allowed,
    clusterTokenReview: clusterTokenReviewer({
      entries: allowed.map(parseAllowEntry).filter((e) => e.cluster !== undefined),
      servers: () => servers,
      credential: async (access) => {
        const name = access.kind === 'eks' ? access.cluster_name : '';
        minted.push(name);
        return `minted-for-${name}`;
      },
      timeoutMs,
    }),
  });
  if (!auth) throw new Error('expected an authenticator');
  return {auth, minted};
}

describe('service-account tokens of discovered clusters', () => {
  it('parses cluster names and label selectors in allow-list entries', () => {
    expect(parseAllowEntry('monitoring:grafana')).toEqual({serviceAccount: 'monitoring:grafana'});
    expect(parseAllowEntry('prod-a/monitoring:grafana')).toEqual({cluster: {name: 'prod-a'}, serviceAccount: 'monitoring:grafana'});
    expect(parseAllowEntry('env=prod,team=a/monitoring:grafana')).toEqual({cluster: {selector: {env: 'prod', team: 'a'}}, serviceAccount: 'monitoring:grafana'});
  });

  it('accepts a listed service account of a named cluster, checked by a TokenReview there with our credential', async () => {
    const {auth, minted} = authenticator(['prod-a/monitoring:grafana']);
    const before = prod.calls.length;
    expect(await auth(`Bearer ${GRAFANA}`)).toBe(true);
    expect(minted).toEqual(['prod-a']);
    expect(prod.calls.slice(before).map((c) => `${c.method} ${c.path} ${c.user ?? ''}`)).toEqual([
      'POST /apis/authentication.k8s.io/v1/tokenreviews arn:aws:sts::111111111111:assumed-role/kube-discovery/x',
    ]);
  });

  it('refuses an unlisted service account of that cluster, and a token no cluster knows', async () => {
    const {auth} = authenticator(['prod-a/monitoring:grafana']);
    expect(await auth(`Bearer ${INTRUDER}`)).toBe(false);
    expect(await auth(`Bearer ${MADE_UP}`)).toBe(false);
  });

  it('selects clusters by label: only matching clusters are asked', async () => {
    const {auth, minted} = authenticator(['env=prod/monitoring:grafana']);
    expect(await auth(`Bearer ${GRAFANA}`)).toBe(true);
    // The dev cluster's grafana is the same name in another cluster: not allowed by env=prod.
    expect(await auth(`Bearer ${DEV_GRAFANA}`)).toBe(false);
    expect(minted.every((n) => n === 'prod-a')).toBe(true);
  });

  it('accepts a service account a later allow-list entry names for a cluster an earlier entry names too', async () => {
    const {auth, minted} = authenticator(['prod-a/monitoring:grafana', 'env=prod/default:intruder']);
    expect(await auth(`Bearer ${INTRUDER}`)).toBe(true);
    // One review per cluster, whatever the number of entries naming it.
    expect(minted).toEqual(['prod-a']);
  });

  it('sends a bearer that is no JWT to no cluster, not even one whose issuer is not recorded', async () => {
    // Service-account tokens, legacy and projected, are JWTs: anything else would only hand the
    // clusters' endpoints a credential that is not theirs (prod-a would even accept this one).
    const {auth, minted} = authenticator(['env=prod/monitoring:grafana', 'dev-b/monitoring:grafana']);
    const [a, d] = [prod.calls.length, dev.calls.length];
    expect(await auth(`Bearer ${STATIC_TOKEN}`)).toBe(false);
    expect(prod.calls.length - a + dev.calls.length - d).toBe(0);
    expect(minted).toEqual([]);
  });

  it('a discovered cluster that errors or hangs refuses the token without failing the request', async () => {
    const {auth} = authenticator(['prod-a/monitoring:grafana']);
    prod.setFault(() => ({status: 500, body: '{}'}));
    expect(await auth(`Bearer ${GRAFANA}`)).toBe(false);
    prod.setFault(() => 'hang');
    const {auth: fresh} = authenticator(['prod-a/monitoring:grafana'], 500);
    expect(await fresh(`Bearer ${GRAFANA}`)).toBe(false);
    prod.setFault(undefined);
  });

  describe('a token goes only to the cluster that issued it, when the clusters\' issuers are known', () => {
    // Both prod clusters match `env=prod`. Sending prod-b's token to prod-a would hand a live
    // credential of prod-b to whoever runs prod-a's API endpoint.
    const issuerServers = () => [server('prod-a', prod, {env: 'prod'}, PROD_A_ISSUER), server('prod-b', prodB, {env: 'prod'}, PROD_B_ISSUER)];
    const reviews = (api: KubeApiServer, from: number) => api.calls.slice(from).filter((c) => c.path.endsWith('/tokenreviews')).length;

    it('reviews the token only at the cluster whose issuer is its `iss`', async () => {
      const {auth, minted} = authenticator(['env=prod/monitoring:grafana'], 10_000, issuerServers());
      const [a, b] = [prod.calls.length, prodB.calls.length];
      expect(await auth(`Bearer ${PROD_B_GRAFANA}`)).toBe(true);
      expect(reviews(prod, a)).toBe(0);
      expect(reviews(prodB, b)).toBe(1);
      expect(minted).toEqual(['prod-b']);
    });

    it('sends a token of an issuer no allow-listed cluster has to none of them', async () => {
      const {auth, minted} = authenticator(['env=prod/monitoring:grafana'], 10_000, issuerServers());
      const [a, b] = [prod.calls.length, prodB.calls.length];
      expect(await auth(`Bearer ${UNKNOWN_ISSUER_TOKEN}`)).toBe(false);
      expect(reviews(prod, a) + reviews(prodB, b)).toBe(0);
      expect(minted).toEqual([]);
    });

    it('sends a token that names no cluster (a legacy token) to none of the clusters whose issuer is known', async () => {
      const {auth} = authenticator(['env=prod/monitoring:grafana'], 10_000, issuerServers());
      const [a, b] = [prod.calls.length, prodB.calls.length];
      expect(await auth(`Bearer ${GRAFANA}`)).toBe(false);
      expect(reviews(prod, a) + reviews(prodB, b)).toBe(0);
    });

    it('still asks a cluster whose issuer is not recorded (an entry written before issuers were), once no known issuer matches', async () => {
      const servers = [server('prod-a', prod, {env: 'prod'}), server('prod-b', prodB, {env: 'prod'}, PROD_A_ISSUER)];
      const {auth} = authenticator(['env=prod/monitoring:grafana'], 10_000, servers);
      const [a, b] = [prod.calls.length, prodB.calls.length];
      expect(await auth(`Bearer ${GRAFANA}`)).toBe(true);
      expect(reviews(prod, a)).toBe(1);
      expect(reviews(prodB, b)).toBe(0);
    });

    it('does not send a token of a cluster the inventory knows to an allow-listed cluster whose issuer is not recorded', async () => {
      // prod-b is discovered (its issuer recorded) but not allow-listed; prod-a's issuer is not recorded.
      // prod-b's token was not issued by prod-a: handing it there gives prod-a's endpoint a live credential of prod-b.
      const servers = [server('prod-a', prod, {env: 'prod'}), server('prod-b', prodB, {env: 'dev'}, PROD_B_ISSUER)];
      const {auth, minted} = authenticator(['env=prod/monitoring:grafana'], 10_000, servers);
      const [a, b] = [prod.calls.length, prodB.calls.length];
      expect(await auth(`Bearer ${PROD_B_GRAFANA}`)).toBe(false);
      expect(reviews(prod, a) + reviews(prodB, b)).toBe(0);
      expect(minted).toEqual([]);
    });

    it('still reviews tokens when an entry written by another writer has a recorded issuer that is not text', async () => {
      const odd = {...server('prod-c', prodB, {env: 'prod'}), status: {...server('prod-c', prodB, {env: 'prod'}).status, oidc_issuer: 42 as unknown as string}};
      const servers = [odd, server('prod-b', prodB, {env: 'prod'}, PROD_B_ISSUER)];
      const {auth} = authenticator(['env=prod/monitoring:grafana'], 10_000, servers);
      expect(await auth(`Bearer ${PROD_B_GRAFANA}`)).toBe(true);
    });
  });
});
