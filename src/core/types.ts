/** Shared data shapes of the discovery pipeline: fetchers produce them, the pure core consumes them. */

/** Which cloud a cluster or source belongs to: a registered `CloudModule`'s `cloud` (`AWS`, `Azure`), Teleport's `teleport.dev/cloud` label. */
export type CloudName = string;

/** Discovery type: a registered `CloudModule`'s `type` (`eks`, `aks`), Teleport's `teleport.dev/discovery-type` label. */
export type DiscoveryType = string;

/** One unit of listing: (matcher, cloud, region, account or subscription). Its id reads well in logs. */
export interface SourceRef {
  /** e.g. `eks:us-east-1:123456789012` or `aks:sub-1234:rg-a` */
  readonly id: string;
  readonly cloud: CloudName;
  readonly type: DiscoveryType;
  /** Region for EKS; `*` or a location for AKS sources that span regions. */
  readonly region: string;
  /** AWS account id or Azure subscription id ('' when not known yet). */
  readonly account: string;
  /** Resource group an AKS source is limited to; undefined means all of the subscription. */
  readonly resourceGroup?: string;
  /** Index of the matcher in the config that produced this source. */
  readonly matcherIndex: number;
}

/** How the discovery identity reaches a cluster's API; used to mint tokens for probes and kubeconfigs. */
export type ClusterAccess =
  | {readonly kind: 'eks'; readonly clusterName: string; readonly region: string; readonly roleArn?: string; readonly externalId?: string}
  | {readonly kind: 'aks-entra'; readonly serverId: string}
  | {readonly kind: 'aks-local'};

/** A cluster as the cloud API reported it, before matching and naming. */
export interface DiscoveredCluster {
  readonly cloud: CloudName;
  readonly type: DiscoveryType;
  /** The cluster's own name in the cloud. */
  readonly name: string;
  /** Normalised region / location (`us-east-1`, `eastus`). */
  readonly region: string;
  /** AWS account id or Azure subscription id. */
  readonly account: string;
  readonly resourceGroup?: string;
  readonly tenantId?: string;
  /** ARN (EKS) or resource id (AKS). */
  readonly id?: string;
  /** Raw cloud tags. */
  readonly tags: Readonly<Record<string, string>>;
  /** Raw status: EKS `status`; AKS `provisioningState/powerState`. */
  readonly status: string;
  /** Whether the status is one discovery keeps (EKS ACTIVE/UPDATING; AKS Succeeded+Running). */
  readonly statusOk: boolean;
  /** API server URL, when the cloud reported one. */
  readonly endpoint?: string;
  /** Base64 PEM of the cluster CA, when the cloud reported one. */
  readonly caData?: string;
  /** Kubernetes version, when known. */
  readonly kubernetesVersion?: string;
  /** EKS authentication mode (API, API_AND_CONFIG_MAP, CONFIG_MAP) or AKS auth flavour. */
  readonly authMode?: string;
  readonly access?: ClusterAccess;
  /**
   * Issuer of the cluster's service-account tokens (EKS `identity.oidc.issuer`, AKS
   * `oidcIssuerProfile.issuerURL`), when the cloud reported an https URL: tokens are reviewed
   * only by the cluster that issued them (src/http/cluster-token-review.ts).
   */
  readonly oidcIssuer?: string;
  /**
   * Set when the cloud reported the cluster but no usable endpoint or CA: it is registered
   * anyway, unhealthy with this reason, so the inventory shows what exists.
   */
  readonly unreachable?: {readonly reason: UnreachableReason; readonly message: string};
  /** Id of the source that listed it. */
  readonly sourceId: string;
}

/** Why a listed cluster cannot be reached from what the cloud reported. */
export type UnreachableReason = 'invalid_ca' | 'no_endpoint';

/** A cluster record the fetcher could not use (missing endpoint, bad CA ...): skipped with a warning. */
export interface MalformedCluster {
  readonly name: string;
  readonly sourceId: string;
  readonly reason: string;
}

/** What one source returned in one cycle. */
export interface SourceResult {
  readonly source: SourceRef;
  readonly ok: boolean;
  readonly clusters: readonly DiscoveredCluster[];
  readonly malformed: readonly MalformedCluster[];
  /** Set when `ok` is false. */
  readonly error?: SourceFailure;
  /** Set when the source was skipped on purpose (e.g. a region not enabled for the account). */
  readonly skippedReason?: string;
  /**
   * Set with `skippedReason` when the skip rests on an answer that is not a listing (an opt-in
   * region's "credentials not recognised" is also what a deactivated key gets): entries the
   * source covers are kept, stale, instead of being read as gone.
   */
  readonly notAListing?: boolean;
}

/** Bounded reasons a source can fail with; used as metric label values and in `/v1/status`. */
export type FailureReason = 'throttled' | 'access_denied' | 'timeout' | 'not_found' | 'invalid_response' | 'other';

/** A source failure, safe to print: it never carries credentials. */
export interface SourceFailure {
  readonly reason: FailureReason;
  /** Cloud error code (`ThrottlingException`, `AuthorizationFailed` ...). */
  readonly code: string;
  readonly message: string;
  readonly operation: string;
  readonly requestId?: string;
  /** The credential chain found no credentials at all (as opposed to credentials that were refused). */
  readonly noCredentials?: true;
}
