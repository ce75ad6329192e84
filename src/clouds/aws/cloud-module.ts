/** EKS's rules for the pure core: labels, Teleport names, the `spec.aws` block, which entries a source covers; its planner (AWS SDK loaded on the first plan). */
import {LABEL} from '../../core/label-names.ts';
import type {CloudModule} from '../cloud.ts';
import type {SourcePlanner} from '../../discovery/cycle.ts';
import {eksProbeAdvice} from './probe-advice.ts';

/** AWS EKS. */
export const awsCloud: CloudModule = {
  cloud: 'AWS',
  type: 'eks',
  matchers: (config) => config.aws,
  // Teleport's original namespaced tag is still honoured on EKS, after the shared one.
  nameOverrideTags: [LABEL.nameOverride, LABEL.legacyNameOverride],
  nameParts: (cluster) => [cluster.type, cluster.region, cluster.account],
  locationLabels: (cluster) => ({[LABEL.accountId]: cluster.account}),
  // An unresolved account ('') covers every account: a failure there must protect them all.
  coversLocation: (source, labels) => source.account === '' || labels[LABEL.accountId] === source.account,
  description: (cluster) => `AWS EKS cluster "${cluster.name}" in ${cluster.region}`,
  clusterSpec: (cluster) => ({aws: {region: cluster.region, account_id: cluster.account, name: cluster.name}}),
  access(cluster) {
    const a = cluster.access;
    if (a?.kind !== 'eks') return undefined;
    return {
      kind: 'eks',
      cluster_name: a.clusterName,
      region: a.region,
      ...(a.roleArn ? {role_arn: a.roleArn} : {}),
      ...(a.externalId ? {external_id: a.externalId} : {}),
    };
  },
  registeredCluster(server) {
    const aws = server.spec.cluster.spec.aws;
    return aws ? {name: aws.name, account: aws.account_id, region: aws.region, resourceGroup: ''} : undefined;
  },
  noCredentialsWarning: () =>
    'no AWS credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or run with an IAM role (IRSA, EKS Pod Identity, instance profile). The service keeps serving the registry and retries every cycle.',
  probe: eksProbeAdvice,
  planner(options) {
    if (options.config.discovery_service.aws.length === 0) return undefined;
    let loaded: Promise<SourcePlanner> | undefined;
    return {plan: async (context) => (await (loaded ??= import('./planner.ts').then((m) => m.awsPlanner(options)))).plan(context)};
  },
};
