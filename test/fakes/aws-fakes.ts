/** Public entry of the wire-level AWS fakes: the world, the server, fault helpers and the EKS token verifier. */
export {FakeAwsWorld, PLACEHOLDER_CA_DATA, partitionOf, parseRoleArn} from './aws-world.ts';
export type {
  EksAuthenticationMode,
  EksClusterStatus,
  FakeAccessEntry,
  FakeAssociatedPolicy,
  FakeAccessKey,
  FakeClusterInit,
  FakeClusterPatch,
  FakeEksCluster,
  FakeRole,
  ResolvedCredentials,
} from './aws-world.ts';
export {startFakeAws} from './aws-server.ts';
export {FakeOrganization} from './organizations-api.ts';
export type {FakeAccountStatus} from './organizations-api.ts';
export type {FakeAws, FakeAwsOptions} from './aws-server.ts';
export {combineFaults, failRegion, regionNotEnabled, statusForCode, throttleFirst} from './aws-faults.ts';
export type {FaultAction, FaultContext, FaultHook, Latency} from './aws-faults.ts';
export {FakeAwsStats} from './aws-stats.ts';
export type {FakeAwsCall, FakeAwsCallFilter, FakeAwsService} from './aws-stats.ts';
export {EKS_TOKEN_PREFIX, canonicalPrincipalArn, stsHostRegion, verifyEksToken} from './eks-token.ts';
export type {EksTokenVerdict} from './eks-token.ts';
