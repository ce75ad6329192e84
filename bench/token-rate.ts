/**
 * EKS token throughput: fresh mints (SigV4 presign + encoding) per second, and cached
 * tokens served per second. Prints one JSON object. Run: `node bench/token-rate.ts`.
 * Measures, never asserts; targets live in the issues.
 */
import {systemClock} from '../src/core/clock.ts';
import {mintEksToken, type EksToken} from '../src/credentials/eks-token.ts';
import {TokenCache} from '../src/credentials/token-cache.ts';

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
  mintEksToken({clusterName: clusters[i % clusters.length]!, region: 'us-east-1', credentials, clock: systemClock});

const coldMintsPerSecond = await rate(20_000, mint);

const cache = new TokenCache<EksToken>({clock: systemClock});
for (let i = 0; i < clusters.length; i++) await cache.get(`${clusters[i]}|bench`, () => mint(i));
const cachedPerSecond = await rate(500_000, (i) => cache.get(`${clusters[i % clusters.length]}|bench`, () => mint(i)));

console.log(
  JSON.stringify({
    benchmark: 'token-rate',
    node: process.version,
    cold_mints_per_second: coldMintsPerSecond,
    cached_gets_per_second: cachedPerSecond,
    cache: cache.stats,
  }),
);
