/**
 * The HTTP client every ARM client of discovery shares: the SDK's own, over one keep-alive pool
 * capped at {@link ARM_MAX_SOCKETS} sockets per endpoint (as the AWS side's). The SDK's default
 * agent has no cap and keeps 256 idle sockets: W5's cold cycle (100 sources × 10 credential
 * calls each) opened about 1,900 TLS connections, closing and reopening them as the bursts came,
 * which cost seconds of CPU and some 80 MB of peak RSS; capped, it opens about 100.
 */
import http from 'node:http';
import https from 'node:https';
import {createDefaultHttpClient, type HttpClient, type PipelineRequest} from '@azure/core-rest-pipeline';

/** Sockets per ARM endpoint; requests beyond it wait for a free socket (their timeout runs meanwhile). */
export const ARM_MAX_SOCKETS = 256;

/** The pooled client: the SDK's HTTP client, and the pool's agents for requests sent without it (lean-get.ts). */
export interface PooledHttpClient extends HttpClient {
  /** The pool's agent for a URL and the TLS settings object the SDK's requests carry (undefined: none). */
  agentFor(url: string, tls: object | undefined): http.Agent;
}

/** The SDK's default HTTP client, its requests sent over a capped keep-alive pool. */
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
  // A request that asks for no keep-alive gets the SDK's own handling.
  const agentFor = (request: PipelineRequest): http.Agent | undefined => (request.disableKeepAlive ? undefined : agentOf(request.url, request.tlsSettings));
  return {
    sendRequest(request) {
      request.agent ??= agentFor(request);
      return inner.sendRequest(request);
    },
    agentFor: agentOf,
  };
}
