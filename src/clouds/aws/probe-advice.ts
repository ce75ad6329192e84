/** What the access probe tells an operator about an EKS cluster: access entries, aws-auth, the VPC. */
import type {CloudProbeAdvice} from '../cloud.ts';
import {DISCOVERY_GROUP} from '../../probe/rbac-names.ts';

const UNKNOWN_PRINCIPAL = '<principal ARN>';

/** EKS advice. */
export const eksProbeAdvice: CloudProbeAdvice = {
  accessKind: 'eks',
  clusterName: (access) => (access.kind === 'eks' ? access.cluster_name : undefined),
  principal: (access) => (access.kind === 'eks' ? access.role_arn : undefined),
  apiName: 'EKS',
  networkHint:
    'if the endpoint is private, run the service in (or peered with) the cluster VPC and allow it in the cluster security group on 443; if public, check the cluster\'s public access CIDRs',
  credentialsHint: 'check the service\'s AWS credentials and, for a matcher with assume_role_arn, that the role trusts them (and the external_id matches)',
  unauthorized(t) {
    const principal = t.principal ?? UNKNOWN_PRINCIPAL;
    const who = t.principal ? `the identity ${t.principal}` : 'the discovery identity (`aws sts get-caller-identity` with the service\'s credentials shows its ARN)';
    const region = t.region ? ` --region ${t.region}` : '';
    const accessEntry = `\`aws eks create-access-entry --cluster-name ${t.clusterName} --principal-arn ${principal} --kubernetes-groups ${DISCOVERY_GROUP}${region}\``;
    const isUser = /:user\//.test(principal);
    const awsAuth =
      `an aws-auth ${isUser ? 'mapUsers' : 'mapRoles'} entry ` +
      `(\`${isUser ? 'userarn' : 'rolearn'}: ${principal}, username: ${DISCOVERY_GROUP}, groups: [${DISCOVERY_GROUP}]\`; ` +
      `or \`eksctl create iamidentitymapping --cluster ${t.clusterName}${region} --arn ${principal} --username ${DISCOVERY_GROUP} --group ${DISCOVERY_GROUP}\`)`;
    const base = `${who} is not mapped in EKS cluster ${t.clusterName}`;
    switch (t.authMode) {
      case 'API':
        return `${base} (authentication mode API): add an access entry ${accessEntry}`;
      case 'CONFIG_MAP':
        return (
          `${base} (authentication mode CONFIG_MAP, so access entries are not read): add ${awsAuth} to the aws-auth ConfigMap in kube-system, ` +
          `or switch the cluster to API_AND_CONFIG_MAP and add an access entry ${accessEntry}`
        );
      default: {
        const mode = t.authMode ? ` (authentication mode ${t.authMode})` : '';
        return `${base}${mode}: add an access entry ${accessEntry} or, for CONFIG_MAP auth mode, ${awsAuth}`;
      }
    }
  },
  // Access entries and aws-auth put the identity in a group, so the binding names the group.
  rbacSubject: () => ({
    subject: `--group=${DISCOVERY_GROUP}`,
    note: ` (bound to the group ${DISCOVERY_GROUP} that the suggested access entry or aws-auth mapping gives the identity)`,
  }),
};
