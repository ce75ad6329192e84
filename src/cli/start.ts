/** `kube-discovery start -c FILE [--deregister-on-exit]`: the long-running service. */
import {parseArgs} from 'node:util';
import {systemClock} from '../core/clock.ts';
import {startService} from '../service/service.ts';
import {usageError, withConfig} from './common.ts';
import type {Command} from './io.ts';

/** How long a running cycle may take to finish after SIGTERM before it is aborted. */
const STOP_GRACE_MS = 15_000;

/** Runs the service until SIGTERM/SIGINT; SIGHUP runs a discovery cycle now. */
export const runStart: Command = async (argv, io) => {
  let values;
  try {
    ({values} = parseArgs({
      args: [...argv],
      options: {config: {type: 'string', short: 'c'}, 'deregister-on-exit': {type: 'boolean', default: false}},
      strict: true,
    }));
  } catch (error) {
    return usageError(io, 'start', (error as Error).message);
  }
  return withConfig(io, 'start', values.config, async (config) => {
    const service = await startService({config, io, clock: systemClock});
    const log = service.runtime.logger;
    return new Promise<number>((resolve) => {
      let stopping = false;
      const stop = (signal: string): void => {
        if (stopping) {
          log.warn({signal}, 'second signal: exiting now');
          process.exit(1);
        }
        stopping = true;
        log.info({signal}, 'shutting down');
        // A watchdog so the service never hangs on shutdown.
        const watchdog = setTimeout(() => {
          log.error('shutdown took too long; exiting');
          process.exit(1);
        }, STOP_GRACE_MS + 15_000);
        watchdog.unref();
        service
          .stop({deregister: values['deregister-on-exit'], graceMs: STOP_GRACE_MS})
          .then(() => resolve(0))
          .catch((error: unknown) => {
            log.error({err: error}, 'error while stopping');
            resolve(1);
          });
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
      process.on('SIGHUP', () => {
        log.info('SIGHUP: running a discovery cycle now');
        service.trigger();
      });
      const fatal = (error: unknown): void => {
        log.fatal({err: error}, 'unexpected error; exiting');
        process.exit(1);
      };
      process.on('uncaughtException', fatal);
      process.on('unhandledRejection', fatal);
    });
  });
};
