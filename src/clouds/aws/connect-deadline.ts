/**
 * The socket cap and connect deadline of the AWS clients (issue 15, W0), which the request
 * handler (undici-handler.ts) applies so that deadlines run only while a call is on a
 * connection.
 *
 * smithy's NodeHttpHandler starts a request's `connectionTimeout` when the request is handed
 * to it, not when it gets a socket: in a burst of a region's DescribeCluster calls larger than
 * the client's sockets, the calls waiting for a free socket time out as if the server had not
 * answered a connect, each costs the retry quota 10 of 500, and 50 of them leave the rest
 * unretried (whole regions failed, README "Describe bursts"); its `requestTimeout` likewise
 * runs while a call waits for a socket. The handler arms the connect deadline when a socket is
 * created and the answer deadline when a call is on its socket, so only a connect or a call that
 * is really under way can miss them.
 */

/**
 * Sockets per region client: a region's describes beyond it wait in the dispatcher's queue,
 * without a deadline. Fewer than smithy's 50: each costs a connect (a TLS handshake on AWS) per
 * cycle, and a burst on stale keep-alive sockets costs a reset and a retry each; 20 on the wire
 * already outrun what DescribeCluster grants a region.
 */
export const CLIENT_SOCKETS = 20;

/** Default time a socket may take to connect. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
