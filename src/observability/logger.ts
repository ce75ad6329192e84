/** pino logger: JSON by default, human-readable on a TTY or with `log.format: text`; secrets redacted everywhere. */
import {Writable} from 'node:stream';
import {pino, type Bindings, type ChildLoggerOptions, type DestinationStream, type Logger, type LoggerOptions as PinoOptions} from 'pino';
import pinoPretty from 'pino-pretty';
import {redact, redactText} from './redact.ts';

export type {Logger} from 'pino';

/** Logger settings (the config's `log` section). */
export interface LoggerOptions {
  readonly level: string;
  readonly format: 'json' | 'text';
  /** Where lines go; default stdout. Tests pass a capturing stream. */
  readonly destination?: DestinationStream;
  /** Whether the destination is a terminal: text output then, colourised. */
  readonly isTty?: boolean;
}

/**
 * Redacts every argument of a log call before pino sees it: merge objects deeply, messages and
 * format arguments as text. An Error logged on its own becomes `{err}` with its (redacted)
 * message as the line's message, because pino would otherwise copy the raw message.
 */
function redactArgs(args: unknown[]): unknown[] {
  const [first, ...rest] = args;
  if (first instanceof Error) {
    const message = rest.length > 0 ? rest : [redactText(first.message)];
    return [{err: redact(first)}, ...message.map((a) => redact(a))];
  }
  return args.map((a) => redact(a));
}

/** Builds the service logger. Every logged object, binding and message passes through redaction. */
export function createLogger(options: LoggerOptions): Logger {
  const pretty = options.format === 'text' || (options.isTty ?? false);
  const config: PinoOptions = {
    level: options.level,
    base: {service: 'kube-discovery'},
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label: string) => ({level: label}),
      // Child-logger bindings skip the log formatter; a secret bound there must not leak either.
      bindings: (bindings: Record<string, unknown>) => redact(bindings) as Record<string, unknown>,
      log: (object: Record<string, unknown>) => redact(object) as Record<string, unknown>,
    },
    hooks: {
      logMethod(args, method) {
        method.apply(this, redactArgs(args) as Parameters<typeof method>);
      },
    },
    serializers: {err: (e: unknown) => redact(e)},
  };
  if (!pretty) return redactChildBindings(options.destination ? pino(config, options.destination) : pino(config));
  // pino-pretty as an in-process stream (not a worker transport): lines are already redacted
  // JSON when they reach it, and nothing is lost when the process exits right after logging.
  const prettyStream = pinoPretty({
    destination: options.destination ? asWritable(options.destination) : 1,
    colorize: options.isTty ?? false,
    translateTime: 'SYS:standard',
    ignore: 'pid,hostname,service',
    sync: true,
  });
  return redactChildBindings(pino(config, prettyStream));
}

/** pino-pretty pipes into a real stream; a bare `{write}` destination is wrapped into one. */
function asWritable(destination: DestinationStream): NodeJS.WritableStream {
  if (destination instanceof Writable) return destination;
  return new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      destination.write(chunk.toString());
      callback();
    },
  });
}

/**
 * pino runs the bindings formatter only for the root logger, so child bindings (`logger.child({...})`)
 * would bypass redaction. Children inherit this override through their prototype chain.
 */
function redactChildBindings(logger: Logger): Logger {
  const original = logger.child;
  function child(this: Logger, bindings: Bindings, childOptions?: ChildLoggerOptions): Logger {
    return Reflect.apply(original, this, [redact(bindings), childOptions]) as Logger;
  }
  logger.child = child as unknown as Logger['child'];
  return logger;
}

/** A logger that drops everything (tests and library defaults). */
export const silentLogger: Logger = pino({level: 'silent'});
