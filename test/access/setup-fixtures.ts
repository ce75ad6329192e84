/** Fixtures of the tests that run the EKS access set-up step on its own (no service around it). */
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {Config} from '../../src/config/schema.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {eksKubeServer} from '../probe/eks-fixtures.ts';

/** Discovery group `step`, one EKS matcher in `region` that opts `principal` into access set-up. */
export function setupStepConfig(region: string, principal: string): Config {
  return parseConfig(
    `version: v1
discovery_service:
  discovery_group: step
  aws: [{types: [eks], regions: [${region}], setup_access_for_arn: "${principal}"}]
`,
    'step.yaml',
  );
}

/**
 * A cycle report in which EKS cluster `c` of `account` in `region` (kube_server `c-eks`, served
 * by the API server at `kube`, authentication mode API_AND_CONFIG_MAP) is registered and unchanged.
 */
export function unchangedClusterReport(kube: {readonly url: string; readonly caPem: string}, account: string, region: string): {report: CycleReport; server: KubeServer} {
  const source = eksSource(0, region, account);
  const stored = eksKubeServer('c-eks', {endpoint: kube.url, caPem: kube.caPem, access: {cluster_name: 'c', region}, account});
  const server = {...stored, status: {...stored.status, auth_mode: 'API_AND_CONFIG_MAP'}};
  const report = {
    items: [{name: 'c-eks', action: 'unchanged', reason: 'still discovered', source: source.id, labels: {}, server}],
    results: [{source, ok: true, clusters: [], malformed: []}],
  } as unknown as CycleReport;
  return {report, server};
}
