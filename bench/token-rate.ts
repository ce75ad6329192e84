/**
 * EKS token throughput: fresh mints (SigV4 presign + encoding) per second, and cached
 * tokens served per second. Prints one JSON object. Run: `node bench/token-rate.ts [-- --cold N --cached M]`;
 * `npm run bench` runs it in its own process and folds the result into its report.
 * Measures, never asserts; targets live in the issues.
 */
import {parseArgs} from 'node:util';
import {systemClock} from '../src/core/clock.ts';
import {mintEksToken, type EksToken} from '../src/credentials/eks-token.ts';
import {TokenCache, type TokenCacheStats} from '../src/credentials/token-cache.ts';

/** What one measurement found. */
export interface TokenRate {
  readonly benchmark: 'token-rate';
  readonly node: string;
  readonly cold_mints_per_second: number;
  readonly cached_gets_per_second: number;
  readonly cache: TokenCacheStats;
}

const credentials = {accessKeyId: 'AKIDBENCH', secretAccessKey: 'bench-secret', sessionToken: 'bench-session-token'.repeat(20)};
const clusters = Array.from({length: 1000}, (_, i) => `cluster-${i}`);

async function rate(iterations: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(200, iterations); i++) await fn(i); // warm up the JIT
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) await fn(i);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return Math.round(iterations / seconds);
}

const mint = (i: number): Promise<EksToken> =>
  mintEksToken({clusterName: clusters[i % clusters.length] ?? 'cluster', region: 'us-east-1', credentials, clock: systemClock});

/** Mints `cold` tokens, then gets `cached` tokens from a warm cache of 1,000 clusters. */
export async function measureTokenRate(options: {cold?: number; cached?: number} = {}): Promise<TokenRate> {
  const coldMintsPerSecond = await rate(options.cold ?? 20_000, mint);
  const cache = new TokenCache<EksToken>({clock: systemClock});
  for (let i = 0; i < clusters.length; i++) await cache.get(`${clusters[i]}|bench`, () => mint(i));
  const cachedPerSecond = await rate(options.cached ?? 500_000, (i) => cache.get(`${clusters[i % clusters.length]}|bench`, () => mint(i)));
  return {
    benchmark: 'token-rate',
    node: process.version,
    cold_mints_per_second: coldMintsPerSecond,
    cached_gets_per_second: cachedPerSecond,
    cache: cache.stats,
  };
}

if (import.meta.main) {
  const args = process.argv.slice(2).filter((a, i) => i > 0 || a !== '--');
  if (args[0]?.startsWith('{')) {
    // Called by bench.ts: a JSON request in, one BENCH_RESULT line out.
    console.log(`BENCH_RESULT ${JSON.stringify(await measureTokenRate(JSON.parse(args[0]) as {cold?: number; cached?: number}))}`);
  } else {
    const {values} = parseArgs({args, options: {cold: {type: 'string'}, cached: {type: 'string'}}, strict: true});
    const result = await measureTokenRate({
      ...(values.cold ? {cold: Number(values.cold)} : {}),
      ...(values.cached ? {cached: Number(values.cached)} : {}),
    });
    console.log(JSON.stringify(result));
  }
}
