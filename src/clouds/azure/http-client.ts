/**
 * The HTTP client every ARM client of discovery shares: undici (undici-client.ts) over one
 * keep-alive pool per TLS settings, capped at {@link ARM_MAX_SOCKETS} sockets per endpoint (as
 * the AWS side's); the short path of the list pages (lean-get.ts) sends over the same pool, so a
 * steady cycle reuses the sockets the cold one opened. The SDK's default agent has no cap and
 * keeps 256 idle sockets: W5's cold cycle (100 sources × 10 credential calls each) opened about
 * 1,900 TLS connections, closing and reopening them as the bursts came, which cost seconds of CPU
 * and some 80 MB of peak RSS; capped, it opens at most 256. Requests undici-client.ts does not
 * model go to the SDK's own client, over capped Node agents.
 */
import http from 'node:http';
import https from 'node:https';
import {createDefaultHttpClient, type HttpClient, type PipelineRequest} from '@azure/core-rest-pipeline';
import {Agent, type Dispatcher} from 'undici';
import {UndiciArmHttpClient} from './undici-client.ts';

/** Sockets per ARM endpoint; requests beyond it wait for a free socket (their timeout runs meanwhile). */
export const ARM_MAX_SOCKETS = 256;

/**
 * Idle sockets of the pool are kept this long, or as long as the server's Keep-Alive hint says
 * (undici's default is 4 s; Node's agent keeps them until the server closes them).
 */
const LEAN_KEEP_ALIVE_MS = 10 * 60_000;

/** The pooled client: the ARM clients' HTTP client, and its pools for requests sent without the SDK's pipeline (lean-get.ts). */
export interface PooledHttpClient extends HttpClient {
  /** The pool's agent for a URL and the TLS settings object the SDK's requests carry (undefined: none). */
  agentFor(url: string, tls: object | undefined): http.Agent;
  /** The undici pool for the TLS settings object the SDK's requests carry (undefined: none): the one the client itself sends over. */
  dispatcherFor(tls: object | undefined): Dispatcher;
}

/** An undici pool for ARM: `maxSockets` per endpoint, one call per connection at a time, HTTP/1.1, the TLS settings given. */
export function leanDispatcher(maxSockets = ARM_MAX_SOCKETS, tls: object | undefined = undefined): Dispatcher {
  return new Agent({connections: maxSockets, pipelining: 1, allowH2: false, keepAliveTimeout: LEAN_KEEP_ALIVE_MS, keepAliveMaxTimeout: LEAN_KEEP_ALIVE_MS, ...(tls ? {connect: {...tls}} : {})});
}

/** The ARM clients' HTTP client over a capped keep-alive pool (see the file comment); `inner` sends what undici-client.ts leaves to the SDK. */
export function pooledHttpClient(maxSockets = ARM_MAX_SOCKETS, inner: HttpClient = createDefaultHttpClient()): PooledHttpClient {
  const options = {keepAlive: true, maxSockets, maxFreeSockets: maxSockets};
  let plain: http.Agent | undefined;
  let secure: https.Agent | undefined;
  // Keyed by the TLS settings object, as the SDK keys its own agents: a client with a custom CA gets an agent with it.
  const secureWith = new WeakMap<object, https.Agent>();
  const agentOf = (url: string, tls: object | undefined): http.Agent => {
    if (!url.startsWith('https:')) return (plain ??= new http.Agent(options));
    if (!tls) return (secure ??= new https.Agent(options));
    let agent = secureWith.get(tls);
    if (!agent) {
      agent = new https.Agent({...options, ...tls});
      secureWith.set(tls, agent);
    }
    return agent;
  };
  let dispatcher: Dispatcher | undefined;
  const dispatchers = new WeakMap<object, Dispatcher>();
  const dispatcherFor = (tls: object | undefined): Dispatcher => {
    if (!tls) return (dispatcher ??= leanDispatcher(maxSockets));
    let found = dispatchers.get(tls);
    if (!found) {
      found = leanDispatcher(maxSockets, tls);
      dispatchers.set(tls, found);
    }
    return found;
  };
  // A request that asks for no keep-alive gets the SDK's own handling.
  const agentFor = (request: PipelineRequest): http.Agent | undefined => (request.disableKeepAlive ? undefined : agentOf(request.url, request.tlsSettings));
  // Requests the undici client does not model (a proxy, a streamed answer ...) go to the SDK's client, over the capped agents.
  const sdk: HttpClient = {
    sendRequest(request) {
      request.agent ??= agentFor(request);
      return inner.sendRequest(request);
    },
  };
  const client = new UndiciArmHttpClient(dispatcherFor, sdk);
  return {
    sendRequest: (request) => client.sendRequest(request),
    agentFor: agentOf,
    dispatcherFor,
  };
}
