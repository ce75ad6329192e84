/** Small checks of cloud-reported values, shared by the EKS and AKS paths. */

/** Whether `value` parses as an https URL. */
export function isHttpsUrl(value: string): boolean {
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}

/** Whether `value` is base64 of a PEM certificate (how EKS and kubeconfigs carry a cluster CA). */
export function isBase64Pem(value: string): boolean {
  if (!/^[A-Za-z0-9+/=\s]+$/.test(value)) return false;
  return Buffer.from(value, 'base64').toString('utf8').includes('-----BEGIN CERTIFICATE-----');
}
