/** Small checks of cloud-reported values, shared by the EKS and AKS paths. */

/** Whether `value` parses as an https URL. */
export function isHttpsUrl(value: string): boolean {
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}

const PEM_MARKER = '-----BEGIN CERTIFICATE-----';

/** Whether `value` is base64 of a PEM certificate (how EKS and kubeconfigs carry a cluster CA). */
export function isBase64Pem(value: string): boolean {
  if (!/^[A-Za-z0-9+/=\s]+$/.test(value)) return false;
  // Searched in the decoded bytes: the marker is ASCII, which UTF-8 decoding never changes, so this
  // is the same answer as searching the decoded text, without building a string per cluster.
  return Buffer.from(value, 'base64').includes(PEM_MARKER);
}
