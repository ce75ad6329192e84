/**
 * A loopback TCP proxy a test can cut and restore: simulates a network partition between one
 * client and a server (etcd) while other clients still reach it directly.
 */
import net from 'node:net';

/** A running proxy. */
export interface TcpProxy {
  /** `http://127.0.0.1:<port>` of the proxy. */
  readonly endpoint: string;
  /** Drops every open connection and refuses new ones until `restore`. */
  cut(): void;
  /** Accepts and forwards connections again. */
  restore(): void;
  /**
   * Holds back what the server sends (answers, watch events) on every connection, without
   * dropping any, until `release`: the client hears of the server's changes meanwhile all at once.
   */
  hold(): void;
  /** Delivers what was held back and forwards again. */
  release(): void;
  close(): Promise<void>;
}

/** Forwards 127.0.0.1:<free port> to `target` (a URL such as `http://127.0.0.1:2379`). */
export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const {hostname, port} = new URL(target);
  const sockets = new Set<net.Socket>();
  // Each connection's server side and the client it forwards to, for hold() and release().
  const links = new Map<net.Socket, net.Socket>();
  let open = true;
  let held = false;
  const server = net.createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = net.connect({host: hostname, port: Number(port)});
    sockets.add(client);
    sockets.add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
      links.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    links.set(upstream, client);
    client.pipe(upstream);
    if (held) upstream.pause();
    else upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const listenPort = typeof address === 'object' && address ? address.port : 0;
  return {
    endpoint: `http://127.0.0.1:${listenPort}`,
    cut() {
      open = false;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    restore() {
      open = true;
    },
    hold() {
      held = true;
      for (const [upstream, client] of links) {
        upstream.unpipe(client);
        upstream.pause();
      }
    },
    release() {
      held = false;
      // pipe() resumes the stream; what it buffered meanwhile goes out first.
      for (const [upstream, client] of links) upstream.pipe(client);
    },
    async close() {
      open = false;
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
