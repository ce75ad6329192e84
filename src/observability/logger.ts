/** pino logger: JSON by default, human-readable on a TTY or with `log.format: text`; secrets redacted everywhere. */
import {pino, type DestinationStream, type Logger} from 'pino';
import {redact, redactText} from './redact.ts';

export type {Logger} from 'pino';

/** Logger settings (the config's `log` section). */
export interface LoggerOptions {
  readonly level: string;
  readonly format: 'json' | 'text';
  /** Where lines go; default stdout. Tests pass a capturing stream. */
  readonly destination?: DestinationStream;
  /** Whether stdout is a terminal (text output then). */
  readonly isTty?: boolean;
}

/** Builds the service logger. Every logged object passes through deep redaction. */
export function createLogger(options: LoggerOptions): Logger {
  const pretty = options.format === 'text' || (options.isTty ?? false);
  const base = {
    level: options.level,
    base: {service: 'kube-discovery'},
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label: string) => ({level: label}),
      log: (object: Record<string, unknown>) => redact(object) as Record<string, unknown>,
    },
    hooks: {
      // Messages are free text too: a token pasted into a message is removed as well.
      logMethod(this: Logger, args: Parameters<Logger['info']>, method: (...a: unknown[]) => void) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? redactText(a) : a)));
      },
    },
    serializers: {err: (e: unknown) => redact(e)},
  };
  if (pretty && !options.destination) {
    return pino({...base, transport: {target: 'pino-pretty', options: {colorize: options.isTty ?? false, translateTime: 'SYS:standard', ignore: 'pid,hostname,service'}}});
  }
  return options.destination ? pino(base, options.destination) : pino(base);
}

/** A logger that drops everything (tests and library defaults). */
export const silentLogger: Logger = pino({level: 'silent'});
