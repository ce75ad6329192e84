/** `kube-discovery start -c FILE [--deregister-on-exit]`: the long-running service. */
import {systemClock} from '../core/clock.ts';
import {startService} from '../service/service.ts';
import {withConfig} from './common.ts';
import {parseFlags} from './flags.ts';
import type {Command} from './io.ts';

/** How long a running cycle may take to finish after SIGTERM before it is aborted. */
const STOP_GRACE_MS = 15_000;

/** Runs the service until SIGTERM/SIGINT; SIGHUP runs a discovery cycle now. */
export const runStart: Command = async (argv, io) => {
  const flags = parseFlags(io, 'start', argv, {config: {type: 'string', short: 'c'}, 'deregister-on-exit': {type: 'boolean', default: false}});
  if (typeof flags === 'number') return flags;
  const {values} = flags;
  // SIGHUP is handled from here on, not only once the service runs: starting can take a while (an
  // etcd election's first round), and Node's default for SIGHUP is to die on the spot. A stop
  // asked for while starting still ends the process at once, as before: nothing runs yet.
  let service: Awaited<ReturnType<typeof startService>> | undefined;
  let stopNow: ((signal: string) => void) | undefined;
  const onStop = (signal: string): void => {
    if (stopNow) return stopNow(signal);
    io.stderr(`kube-discovery start: ${signal} while starting; exiting\n`);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  const onTerm = (): void => onStop('SIGTERM');
  const onInt = (): void => onStop('SIGINT');
  const onHup = (): void => {
    if (!service) return; // the first cycle runs at start anyway
    service.runtime.logger.info('SIGHUP: running a discovery cycle now');
    service.trigger();
  };
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  process.on('SIGHUP', onHup);
  const code = await withConfig(io, 'start', values.config, async (config) => {
    service = await startService({config, io, clock: systemClock});
    const running = service;
    const log = running.runtime.logger;
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
        running
          .stop({deregister: values['deregister-on-exit'], graceMs: STOP_GRACE_MS})
          .then(() => resolve(0))
          .catch((error: unknown) => {
            log.error({err: error}, 'error while stopping');
            resolve(1);
          });
      };
      stopNow = stop;
      const fatal = (error: unknown): void => {
        log.fatal({err: error}, 'unexpected error; exiting');
        process.exit(1);
      };
      process.on('uncaughtException', fatal);
      process.on('unhandledRejection', fatal);
    });
  });
  process.off('SIGTERM', onTerm);
  process.off('SIGINT', onInt);
  process.off('SIGHUP', onHup);
  return code;
};
