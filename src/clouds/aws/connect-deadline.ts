/**
 * Keep-alive agents whose connection deadline runs from the socket's creation (issue 15, W0).
 *
 * smithy's NodeHttpHandler starts a request's `connectionTimeout` when the request is handed
 * to it, not when it gets a socket: in a burst of a region's DescribeCluster calls larger than
 * the client's sockets, the calls waiting in the agent's queue for a free socket time out as
 * if the server had not answered a connect, each costs the retry quota 10 of 500, and 50 of
 * them leave the rest unretried (whole regions failed, README "Describe bursts"). These agents
 * arm the deadline in `createConnection`, so only a connect that is really under way can miss
 * it; the handler's own `connectionTimeout` stays off.
 */
import {Agent as HttpAgent, type AgentOptions as HttpAgentOptions, type ClientRequestArgs} from 'node:http';
import {Agent as HttpsAgent, type AgentOptions as HttpsAgentOptions, type RequestOptions as HttpsRequestOptions} from 'node:https';
import type {Socket} from 'node:net';
import type {Duplex} from 'node:stream';

/** Sockets per client (smithy's default): a region's describes beyond it wait in the agent's queue, without a deadline. */
export const CLIENT_SOCKETS = 50;

/** Default time a socket may take to connect. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

type ConnectCallback = (err: Error | null, stream: Duplex) => void;

/**
 * Destroys `socket` with an `ETIMEDOUT` error unless it connects within `timeoutMs`. The SDK
 * handler reports that code as a `TimeoutError` (retryable; the source fails as `timeout`).
 */
export function armConnectDeadline(socket: Socket, timeoutMs: number): void {
  if (!(timeoutMs > 0) || !socket.connecting) return;
  let settled = false;
  const settle = (): void => {
    settled = true;
    clearTimeout(timer);
  };
  const timer = setTimeout(() => {
    // A connect that completed while this process's event loop was busy is still waiting to be
    // read; one poll phase (before setImmediate runs) delivers it, so a slow event loop alone
    // never fails a connection the peer accepted in time.
    setImmediate(() => {
      if (settled || !socket.connecting) return;
      socket.destroy(Object.assign(new Error(`connection to ${socket.remoteAddress ?? 'the endpoint'} not established within ${timeoutMs} ms`), {code: 'ETIMEDOUT', name: 'TimeoutError'}));
    });
  }, timeoutMs);
  socket.once('connect', settle);
  socket.once('close', settle);
}

/** An http.Agent that arms {@link armConnectDeadline} on every socket it creates. */
export class ConnectDeadlineHttpAgent extends HttpAgent {
  readonly connectTimeoutMs: number;

  constructor(options: HttpAgentOptions, connectTimeoutMs: number) {
    super(options);
    this.connectTimeoutMs = connectTimeoutMs;
  }

  override createConnection(options: ClientRequestArgs, callback?: ConnectCallback): Duplex | null | undefined {
    const socket = super.createConnection(options, callback);
    if (socket) armConnectDeadline(socket as Socket, this.connectTimeoutMs);
    return socket;
  }
}

/** An https.Agent that arms {@link armConnectDeadline} on every socket it creates (the TCP connect; the TLS handshake is under the socket timeout). */
export class ConnectDeadlineHttpsAgent extends HttpsAgent {
  readonly connectTimeoutMs: number;

  constructor(options: HttpsAgentOptions, connectTimeoutMs: number) {
    super(options);
    this.connectTimeoutMs = connectTimeoutMs;
  }

  override createConnection(options: HttpsRequestOptions, callback?: ConnectCallback): Duplex | null | undefined {
    const socket = super.createConnection(options, callback);
    if (socket) armConnectDeadline(socket as Socket, this.connectTimeoutMs);
    return socket;
  }
}

/** Agents of one SDK client (or of several that share them): keep-alive, `maxSockets` sockets per host, connect deadline from socket creation. */
export function connectDeadlineAgents(connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS, maxSockets = CLIENT_SOCKETS): {readonly httpAgent: ConnectDeadlineHttpAgent; readonly httpsAgent: ConnectDeadlineHttpsAgent} {
  return {
    httpAgent: new ConnectDeadlineHttpAgent({keepAlive: true, maxSockets}, connectTimeoutMs),
    httpsAgent: new ConnectDeadlineHttpsAgent({keepAlive: true, maxSockets}, connectTimeoutMs),
  };
}

/** Whether `agent` arms its own connect deadline (then the handler's `connectionTimeout` must stay off). */
export function armsConnectDeadline(agent: unknown): boolean {
  return agent instanceof ConnectDeadlineHttpAgent || agent instanceof ConnectDeadlineHttpsAgent;
}
