/** Go-style durations (`90s`, `5m`, `1h30m`, `500ms`, `1.5h`) as used by Teleport configs, to and from milliseconds. */
import {InputError} from '../core/errors.ts';

const unitMs: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  'µs': 1e-3, // U+00B5 micro sign
  'μs': 1e-3, // U+03BC Greek mu, both accepted by Go
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const wholePattern = /^(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$/u;
const partPattern = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/gu;

/** What a duration must look like, for error messages. */
export const durationExpectation = 'a duration with a unit such as 90s, 5m, 1h30m or 500ms';

/**
 * Parses a Go-style duration into milliseconds. Unlike Go, a bare number (even `0`) is
 * rejected: a unit-less `5` is ambiguous and usually a mistake. Throws `InputError`.
 */
export function parseDuration(text: string): number {
  const ms = tryParseDuration(text);
  if (ms === undefined) {
    throw new InputError(`expected ${durationExpectation}, found ${JSON.stringify(text)}`);
  }
  return ms;
}

/** Like `parseDuration` but returns undefined instead of throwing. */
export function tryParseDuration(text: string): number | undefined {
  if (typeof text !== 'string' || !wholePattern.test(text)) return undefined;
  let total = 0;
  for (const match of text.matchAll(partPattern)) {
    const [, amount = '', unit = ''] = match;
    total += Number(amount) * (unitMs[unit] ?? Number.NaN);
  }
  return Number.isFinite(total) ? total : undefined;
}

/** Formats milliseconds the Go way but without zero units (`5m`, `1h30m`, `1.5s`, `500ms`), so it parses back to the same value. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new InputError(`expected a finite, non-negative number of milliseconds, found ${ms}`);
  }
  const ns = Math.round(ms * 1e6);
  if (ns === 0) return '0s';
  if (ns < 1e3) return `${ns}ns`;
  if (ns < 1e6) return `${trimFraction(ns / 1e3)}us`;
  if (ns < 1e9) return `${trimFraction(ns / 1e6)}ms`;
  const hours = Math.floor(ns / 3.6e12);
  const minutes = Math.floor((ns % 3.6e12) / 6e10);
  const secondsNs = ns % 6e10;
  let out = '';
  if (hours > 0) out += `${hours}h`;
  if (minutes > 0) out += `${minutes}m`;
  if (secondsNs > 0) out += `${trimFraction(secondsNs / 1e9)}s`;
  return out;
}

/** Up to nine fractional digits, trailing zeros dropped, never exponent notation. */
function trimFraction(value: number): string {
  return value.toFixed(9).replace(/\.?0+$/, '');
}
