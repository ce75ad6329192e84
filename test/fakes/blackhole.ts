/**
 * A TCP endpoint whose connects hang: a listener that never accepts, its accept queue already
 * full, so the kernel drops further SYNs (what a firewall that drops packets, or a host that
 * went away behind a stale DNS answer, looks like to a client). Node always accepts on its
 * listeners, so the socket is held by a small Python process (Python comes with moto here).
 *
 *   const hole = await startBlackhole();   // hole.url: http://127.0.0.1:<port>
 *   ...
 *   await hole.close();
 */
import {spawn} from 'node:child_process';
import net from 'node:net';

/** A running blackhole. */
export interface Blackhole {
  readonly url: string;
  close(): Promise<void>;
}

// listen(0): one completed connection fills the accept queue; nothing is ever accepted.
const SCRIPT = `
import socket, sys
s = socket.socket()
s.bind(('127.0.0.1', 0))
s.listen(0)
print(s.getsockname()[1], flush=True)
sys.stdin.read()
`;

/** Starts a blackhole listener on loopback; its first connect is taken to fill the queue. */
export async function startBlackhole(): Promise<Blackhole> {
  const child = spawn('python3', ['-c', SCRIPT], {stdio: ['pipe', 'pipe', 'inherit']});
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`blackhole: python3 exited with ${code} before listening`)));
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (out.includes('\n')) resolve(Number(out.trim()));
    });
  });
  // Fill the accept queue; the kernel completes this handshake, later ones get no answer.
  const fillers: net.Socket[] = [];
  await new Promise<void>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', resolve);
    s.once('error', reject);
    fillers.push(s);
  });
  const extra = net.connect(port, '127.0.0.1');
  extra.on('error', () => undefined);
  fillers.push(extra);
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const s of fillers) s.destroy();
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.stdin.end();
      child.kill();
      await exited;
    },
  };
}
