/**
 * Keep-alive agents whose deadlines run only while a call is on a connection (issue 15, W0).
 *
 * smithy's NodeHttpHandler starts a request's `connectionTimeout` when the request is handed
 * to it, not when it gets a socket: in a burst of a region's DescribeCluster calls larger than
 * the client's sockets, the calls waiting in the agent's queue for a free socket time out as
 * if the server had not answered a connect, each costs the retry quota 10 of 500, and 50 of
 * them leave the rest unretried (whole regions failed, README "Describe bursts"); its
 * `requestTimeout` likewise runs while a call waits for a socket. These agents arm the connect
 * deadline in `createConnection` and the answer deadline when a call gets its socket, so only
 * a connect or a call that is really under way can miss them; the handler's own
 * `connectionTimeout` and `requestTimeout` stay off.
 */
import {Agent as HttpAgent, type AgentOptions as HttpAgentOptions, type ClientRequest, type ClientRequestArgs} from 'node:http';
import {Agent as HttpsAgent, type AgentOptions as HttpsAgentOptions, type RequestOptions as HttpsRequestOptions} from 'node:https';
import type {Socket} from 'node:net';
import type {Duplex} from 'node:stream';

/**
 * Sockets per region client: a region's describes beyond it wait in the agent's queue, without
 * a deadline. Fewer than smithy's 50: each costs a connect (a TLS handshake on AWS) per
 * cycle, and a burst on stale keep-alive sockets costs a reset and a retry each; 20 on the wire
 * already outrun what DescribeCluster grants a region.
 */
export const CLIENT_SOCKETS = 20;

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

/**
 * Destroys `req` with an `ETIMEDOUT` error unless its answer's headers arrive within
 * `timeoutMs` of it getting a socket (the time it waits for one is not counted).
 */
export function armAnswerDeadline(req: ClientRequest, timeoutMs: number): void {
  if (!(timeoutMs > 0)) return;
  let timer: NodeJS.Timeout | undefined;
  let answered = false;
  const settle = (): void => clearTimeout(timer);
  req.once('socket', () => {
    timer = setTimeout(() => {
      // As for connects: an answer that arrived while the event loop was busy gets one poll phase.
      setImmediate(() => {
        if (req.destroyed || answered) return;
        req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms of sending the request`), {code: 'ETIMEDOUT', name: 'TimeoutError'}));
      });
    }, timeoutMs);
  });
  req.once('response', () => {
    answered = true;
    settle();
  });
  req.once('close', settle);
}

/** Deadlines of a {@link ConnectDeadlineHttpAgent}'s calls, in ms (0: none). */
export interface CallDeadlines {
  readonly connectTimeoutMs: number;
  readonly answerTimeoutMs: number;
}

/** Node's (undocumented, long-stable) hook through which an agent receives each request. */
interface AddRequest {
  addRequest(req: ClientRequest, options: unknown): void;
}

/** An http.Agent that arms {@link armConnectDeadline} on every socket it creates and {@link armAnswerDeadline} on every request. */
export class ConnectDeadlineHttpAgent extends HttpAgent {
  readonly connectTimeoutMs: number;
  readonly answerTimeoutMs: number;

  constructor(options: HttpAgentOptions, deadlines: CallDeadlines) {
    super(options);
    this.connectTimeoutMs = deadlines.connectTimeoutMs;
    this.answerTimeoutMs = deadlines.answerTimeoutMs;
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
  readonly answerTimeoutMs: number;

  constructor(options: HttpsAgentOptions, deadlines: CallDeadlines) {
    super(options);
    this.connectTimeoutMs = deadlines.connectTimeoutMs;
    this.answerTimeoutMs = deadlines.answerTimeoutMs;
  }

  override createConnection(options: HttpsRequestOptions, callback?: ConnectCallback): Duplex | null | undefined {
    const socket = super.createConnection(options, callback);
    if (socket) armConnectDeadline(socket as Socket, this.connectTimeoutMs);
    return socket;
  }
}

for (const Agent of [ConnectDeadlineHttpAgent, ConnectDeadlineHttpsAgent]) {
  const proto = Agent.prototype as unknown as AddRequest & {readonly answerTimeoutMs: number};
  const base = (Object.getPrototypeOf(proto) as AddRequest).addRequest;
  proto.addRequest = function addRequest(this: typeof proto, req: ClientRequest, options: unknown): void {
    armAnswerDeadline(req, this.answerTimeoutMs);
    base.call(this, req, options);
  };
}

/**
 * Agents of one SDK client (or of several that share them): keep-alive, `maxSockets` sockets
 * per host, deadlines that run from socket creation (connect) and socket assignment (answer).
 */
export function connectDeadlineAgents(deadlines: CallDeadlines, maxSockets = CLIENT_SOCKETS): {readonly httpAgent: ConnectDeadlineHttpAgent; readonly httpsAgent: ConnectDeadlineHttpsAgent} {
  return {
    httpAgent: new ConnectDeadlineHttpAgent({keepAlive: true, maxSockets}, deadlines),
    httpsAgent: new ConnectDeadlineHttpsAgent({keepAlive: true, maxSockets}, deadlines),
  };
}

/** Whether `agent` arms its own deadlines (then the handler's `connectionTimeout` and `requestTimeout` must stay off). */
export function armsConnectDeadline(agent: unknown): boolean {
  return agent instanceof ConnectDeadlineHttpAgent || agent instanceof ConnectDeadlineHttpsAgent;
}
