/**
 * Counts and times every HTTP attempt an AWS SDK v3 client makes, retries included, from
 * inside the client's middleware stack — no call site counts by hand. Typed structurally so
 * observability does not import the SDK (SDK imports stay in src/clouds and src/credentials).
 */
import {classifyAwsError} from '../clouds/aws/errors.ts';
import type {Metrics} from './metrics.ts';

/** What the middleware sees of the SDK's handler context. */
interface HandlerContext {
  readonly clientName?: string;
  readonly commandName?: string;
}

type Handler = (args: {readonly input: object}) => Promise<{readonly output: object; readonly response: unknown}>;

/** The stack calls the middleware is added with (the SDK's `MiddlewareStack.add`, finalizeRequest overload). */
interface MiddlewareStackLike {
  add(
    middleware: (next: Handler, context: HandlerContext) => Handler,
    options: {step: 'finalizeRequest'; priority: 'low'; name: string; tags: string[]; override: boolean},
  ): void;
}

/**
 * Any SDK v3 client (EKSClient, STSClient ...). Its `add` is a set of overloads over the client's
 * own input/output types, which no single structural signature matches, hence `never[]`.
 */
export interface InstrumentableAwsClient {
  readonly middlewareStack: {add(...args: never[]): void};
}

/** Name of the middleware in the stack (adding it twice replaces it, so instrumenting is idempotent). */
export const AWS_METRICS_MIDDLEWARE = 'kubeDiscoveryMetrics';

interface SdkError {
  readonly name?: string;
  readonly code?: string;
  readonly $metadata?: {readonly httpStatusCode?: number};
}

/** The code label of a failed attempt: the AWS error code, else the transport error code (ECONNREFUSED, TimeoutError). */
export function awsAttemptCode(error: unknown): string {
  const e = (error ?? {}) as SdkError;
  if (e.$metadata?.httpStatusCode !== undefined && e.name && e.name !== 'Error') return e.name;
  if (typeof e.code === 'string' && e.code !== '') return e.code;
  if (e.name && e.name !== 'Error') return e.name;
  return e.$metadata?.httpStatusCode !== undefined ? `HTTP_${e.$metadata.httpStatusCode}` : 'Error';
}

/** `EKSClient` → `eks`, `STSClient` → `sts`. */
function serviceOf(clientName: string | undefined): string {
  return (clientName ?? 'unknown').replace(/Client$/, '').toLowerCase() || 'unknown';
}

/** Labels per (client, command) name pair, worked out once: the middleware runs on every attempt. */
const labels = new Map<string, {readonly service: string; readonly operation: string}>();

function labelsOf(context: HandlerContext): {readonly service: string; readonly operation: string} {
  const key = `${context.clientName ?? ''}\u0000${context.commandName ?? ''}`;
  let found = labels.get(key);
  if (found === undefined) {
    found = {service: serviceOf(context.clientName), operation: (context.commandName ?? 'unknown').replace(/Command$/, '')};
    // Client and command names are the SDK's own classes: a few dozen; the bound is only a guard.
    if (labels.size >= 1_024) labels.clear();
    labels.set(key, found);
  }
  return found;
}

/**
 * Adds the metrics middleware to an SDK client. It sits at the end of `finalizeRequest`,
 * below the retry and signing middlewares and above deserialization, so it runs once per
 * HTTP attempt and sees the parsed AWS error code of each one.
 */
export function instrumentAwsClient(client: InstrumentableAwsClient, metrics: Pick<Metrics, 'cloudApiCall'>): void {
  (client.middlewareStack as unknown as MiddlewareStackLike).add(
    (next, context) => {
      // The handler is built per (client, command) context, whose names are set before it is.
      const {service, operation} = labelsOf(context);
      return async (args) => {
        const started = performance.now();
        try {
          const result = await next(args);
          metrics.cloudApiCall({service, operation, code: 'OK', durationSeconds: (performance.now() - started) / 1000, throttled: false});
          return result;
        } catch (error) {
          const throttled = classifyAwsError(error) === 'throttled';
          metrics.cloudApiCall({service, operation, code: awsAttemptCode(error), durationSeconds: (performance.now() - started) / 1000, throttled});
          throw error;
        }
      };
    },
    {step: 'finalizeRequest', priority: 'low', name: AWS_METRICS_MIDDLEWARE, tags: ['METRICS'], override: true},
  );
}
