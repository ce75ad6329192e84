/** Moving the group's entries onto a new leader's lease at the start of its term. */
import PQueue from 'p-queue';
import type {Writer} from './runtime.ts';

// Re-announcing on promotion: enough parallelism to move 10,000 entries in seconds, few enough to stay under request deadlines.
const REANNOUNCE_CONCURRENCY = 32;

/** Re-puts every entry of the group under this writer's lease; returns how many were written. */
export async function reannounce(writer: Pick<Writer, 'heartbeat' | 'registrar'>): Promise<number> {
  const current = await writer.registrar.current();
  const queue = new PQueue({concurrency: REANNOUNCE_CONCURRENCY});
  let moved = 0;
  await Promise.all(
    current.map((server) =>
      queue.add(async () => {
        const stored = await writer.heartbeat.announce(server);
        if (stored.metadata.revision !== server.metadata.revision) moved++;
      }),
    ),
  );
  return moved;
}
