/** Kubernetes `Status` objects, the body every API server error (and a delete) answers with. */

/** Details block of a Status naming the object concerned. */
export interface KubeStatusDetails {
  readonly name?: string;
  readonly group?: string;
  readonly kind?: string;
  readonly uid?: string;
  readonly causes?: readonly {readonly reason: string; readonly message: string; readonly field: string}[];
}

/** A `Status` body for a failed request, as kube-apiserver spells it. */
export function failureStatus(code: number, reason: string, message: string, details?: KubeStatusDetails): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details === undefined ? {} : {details}),
    code,
  };
}

/** A `Status` body for a successful delete. */
export function successStatus(details: KubeStatusDetails): Record<string, unknown> {
  return {kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details};
}
