/** Kubernetes label-key syntax: `[prefix/]name`, prefix a DNS subdomain (≤253), name ≤63 alphanumerics with `-_.` inside. */

const namePattern = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const dnsLabel = '[a-z0-9](?:[-a-z0-9]*[a-z0-9])?';
const prefixPattern = new RegExp(`^${dnsLabel}(?:\\.${dnsLabel})*$`);

/** What a label key must look like, for error messages. */
export const labelKeyExpectation =
  'a Kubernetes label key ([prefix/]name: name up to 63 letters, digits, "-", "_" or "." starting and ending alphanumeric; prefix a DNS subdomain)';

/** Whether `key` is a valid Kubernetes label key (the kube_server labels must be usable as Kubernetes labels). */
export function isValidLabelKey(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (name.length === 0 || name.length > 63 || !namePattern.test(name)) return false;
  if (prefix === undefined) return true;
  return prefix.length > 0 && prefix.length <= 253 && prefixPattern.test(prefix);
}
