// Reading the kubeconfigs listClusterUserCredential returns, in every shape AKS hands out.
import {describe, expect, it} from 'vitest';
import {parseAksKubeconfig} from '../../src/credentials/aks-kubeconfig.ts';
import {AKS_AAD_SERVER_ID, userKubeconfig} from '../fakes/arm-json.ts';
import {ArmWorld, type ManagedClusterInput} from '../fakes/arm-world.ts';
import {buildKubeconfig} from '../fakes/kube-kubeconfig.ts';

const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';
const TENANT = 'aaaaaaaa-0000-0000-0000-000000000001';
const SECRET = 'local-account-token-DO-NOT-PRINT';

function cluster(extra: Partial<ManagedClusterInput> = {}) {
  const world = new ArmWorld();
  world.addSubscription({subscriptionId: '00000000-0000-0000-0000-000000000001', tenantId: TENANT});
  return world.addCluster({subscriptionId: '00000000-0000-0000-0000-000000000001', resourceGroup: 'rg', name: 'c1', server: 'https://c1.hcp.eastus.azmk8s.io:443', caPem: CA_PEM, localAccountToken: SECRET, ...extra});
}

describe('parseAksKubeconfig', () => {
  it('reads server, CA and the static token of a local-account cluster', () => {
    const parsed = parseAksKubeconfig(Buffer.from(userKubeconfig(cluster(), TENANT, 'exec')));
    expect(parsed).toEqual({server: 'https://c1.hcp.eastus.azmk8s.io:443', caData: Buffer.from(CA_PEM).toString('base64'), user: {kind: 'token', token: SECRET}});
  });

  it('reads the server id and tenant of an Entra ID cluster, from exec (kubelogin) and legacy auth-provider formats', () => {
    const aad = cluster({aadProfile: {managed: true, enableAzureRBAC: false}});
    expect(parseAksKubeconfig(userKubeconfig(aad, TENANT, 'exec')).user).toEqual({kind: 'entra', serverId: AKS_AAD_SERVER_ID, tenantId: TENANT});
    expect(parseAksKubeconfig(userKubeconfig(aad, TENANT, 'azure')).user).toEqual({kind: 'entra', serverId: AKS_AAD_SERVER_ID, tenantId: TENANT});
  });

  it('refuses a server that is not an https URL and a CA that is not PEM, naming what it found', () => {
    const plain = buildKubeconfig({clusterName: 'c', server: 'http://10.0.0.1', userName: 'u', user: {token: SECRET}});
    expect(() => parseAksKubeconfig(plain)).toThrow('expected clusters[].cluster.server to be an https URL, got "http://10.0.0.1"');
    const badCa = plain.replace('server: http://10.0.0.1', 'server: https://10.0.0.1\n      certificate-authority-data: bm90LWEtY2VydA==');
    expect(() => parseAksKubeconfig(badCa)).toThrow('certificate-authority-data to be base64 PEM');
  });

  it('never quotes the token when the YAML is broken', () => {
    const broken = `users:\n- name: u\n  user:\n    token: ${SECRET}\n  - : [unclosed`;
    let message = '';
    try {
      parseAksKubeconfig(broken);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/^expected a kubeconfig in YAML, got text that does not parse \(line \d+, column \d+\)$/);
    expect(message).not.toContain(SECRET);
  });

  it('names the line of a broken kubeconfig, counting from 1', () => {
    const broken = `apiVersion: v1\nclusters:\n- cluster:\n    server: "https://x:443\n`;
    expect(() => parseAksKubeconfig(broken)).toThrow(/does not parse \(line [45], column \d+\)/);
  });

  it('reads a kubeconfig written as JSON (YAML accepts it), and refuses two documents or a duplicate key', () => {
    const json = JSON.stringify({clusters: [{name: 'c', cluster: {server: 'https://c:443'}}], users: [{name: 'u', user: {token: SECRET}}], contexts: [{name: 'c', context: {cluster: 'c', user: 'u'}}], 'current-context': 'c'});
    expect(parseAksKubeconfig(json)).toEqual({server: 'https://c:443', user: {kind: 'token', token: SECRET}});
    const yaml = buildKubeconfig({clusterName: 'c', server: 'https://c:443', userName: 'u', user: {token: SECRET}});
    expect(() => parseAksKubeconfig(`${yaml}---\n${yaml}`)).toThrow(/does not parse/);
    expect(() => parseAksKubeconfig(`${yaml}kind: Config\n`)).toThrow(/does not parse/);
  });
});
