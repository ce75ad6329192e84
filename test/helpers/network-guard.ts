/**
 * Loaded before every test file: tests may only talk to loopback. Any attempt to open a
 * TCP connection elsewhere (a real cloud endpoint, the instance metadata service) throws
 * at once instead of hanging or leaking a request.
 */
import net from 'node:net';

process.env['AWS_EC2_METADATA_DISABLED'] = 'true';
// Keep the SDK chains away from developer profiles and real endpoints.
process.env['AWS_CONFIG_FILE'] = '/nonexistent/aws-config';
process.env['AWS_SHARED_CREDENTIALS_FILE'] = '/nonexistent/aws-credentials';
delete process.env['AWS_PROFILE'];
process.env['AZURE_TOKEN_CREDENTIALS'] = 'EnvironmentCredential';

/** True for 127.0.0.0/8, ::1, localhost and unix sockets. */
export function isLoopback(host: string | undefined): boolean {
  if (host === undefined || host === '') return true;
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || h.startsWith('127.') || h === '::ffff:127.0.0.1' || h.endsWith('.localhost');
}

const original = net.Socket.prototype.connect;
type ConnectArgs = Parameters<typeof original>;

net.Socket.prototype.connect = function guardedConnect(this: net.Socket, ...args: ConnectArgs) {
  const [first, second] = args as unknown[];
  let host: string | undefined;
  let path: string | undefined;
  if (Array.isArray(first)) {
    const opts = first[0] as {host?: string; path?: string} | undefined;
    host = opts?.host;
    path = opts?.path;
  } else if (typeof first === 'object' && first !== null) {
    host = (first as {host?: string}).host;
    path = (first as {path?: string}).path;
  } else if (typeof first === 'string' && typeof second !== 'string' && !/^\d+$/.test(first)) {
    path = first;
  } else if (typeof second === 'string') {
    host = second;
  }
  if (path === undefined && !isLoopback(host)) {
    throw new Error(`network guard: tests may only connect to loopback, refused ${host ?? '?'}`);
  }
  return original.apply(this, args);
} as typeof original;
