/** The small set of typed errors, mapped to exit codes, HTTP status and metric reasons in one place each. */

/** The message of anything thrown: an Error's message, otherwise its string form. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Bad user input (flags, config, query parameters). Exit code 2, HTTP 400. */
export class InputError extends Error {
  override readonly name = 'InputError';
}

/** A requested thing does not exist. HTTP 404. */
export class NotFoundError extends Error {
  override readonly name = 'NotFoundError';
}

/** Missing or wrong credentials on our own API. HTTP 401. */
export class AuthenticationError extends Error {
  override readonly name = 'AuthenticationError';
}

/** What was asked for cannot be answered yet (the registry has not been read). HTTP 503 with Retry-After. */
export class UnavailableError extends Error {
  override readonly name = 'UnavailableError';
  /** The `error` field of the JSON answer, e.g. `not_synced`. */
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** A write was refused because this replica no longer holds leadership. */
export class FencedError extends Error {
  override readonly name = 'FencedError';
}

