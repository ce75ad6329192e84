/**
 * Runs the Backstage peer against the simulator, in its own process, with the packages of the
 * scratch folder the bench installed (never the project's): `AwsEKSClusterProcessor.readLocation`
 * for every (account, region) location at once, per cycle, and `AwsIamStrategy.getCredential` for
 * the token rate. Prints `BENCH_RESULT {json}`.
 *
 *   node bench/peers/peer-driver.ts -- '{"scratch":".tmp/peers","controlUrl":"...","cycles":5,"locations":[...]}'
 */
import {createRequire} from 'node:module';
import path from 'node:path';
import type {SimStats, SimVerdict} from '../sim.ts';
import {clusterKey} from '../sim-world.ts';

/** What bench.ts asks the peer driver to do. */
export interface PeerRequest {
  readonly scratch: string;
  readonly controlUrl: string;
  readonly cycles: number;
  readonly locations: readonly {account: string; region: string}[];
  readonly tokenIterations: number;
}

/** One cycle of the peer. */
export interface PeerCycle {
  readonly wallMs: number;
  readonly cpuMs: number;
  readonly stats: SimStats;
  readonly verdict: SimVerdict;
  readonly failedLocations: number;
  readonly firstError?: string;
}

/** What the peer driver prints. */
export interface PeerResult {
  readonly versions: Record<string, string>;
  readonly cycles: readonly PeerCycle[];
  readonly tokenMintsPerSecond: number;
  readonly maxRssKb: number;
}

interface Entity {
  readonly metadata: {readonly annotations?: Readonly<Record<string, string>>};
}

interface EksProcessor {
  readLocation(location: {type: string; target: string}, optional: boolean, emit: (result: {type: string; entity?: Entity}) => void): Promise<boolean>;
}

interface IamStrategy {
  getCredential(cluster: {name: string; url: string; authMetadata: Record<string, string>}): Promise<{type: string; token?: string}>;
}

async function control<T>(base: string, method: 'GET' | 'POST', route: string, body?: unknown): Promise<T> {
  const res = await fetch(`${base}${route}`, {method, ...(body === undefined ? {} : {body: JSON.stringify(body), headers: {'content-type': 'application/json'}})});
  if (!res.ok) throw new Error(`simulator ${method} ${route}: expected 200, got ${res.status}`);
  return (await res.json()) as T;
}

async function main(raw: string): Promise<PeerResult> {
  const request = JSON.parse(raw) as PeerRequest;
  const require = createRequire(path.resolve(request.scratch, 'package.json'));
  const versions: Record<string, string> = {};
  for (const name of ['@backstage/plugin-catalog-backend-module-aws', '@backstage/plugin-kubernetes-backend', '@aws-sdk/client-eks']) {
    versions[name] = (require(`${name}/package.json`) as {version: string}).version;
  }
  const {AwsEKSClusterProcessor} = require('@backstage/plugin-catalog-backend-module-aws') as {AwsEKSClusterProcessor: new (o: object) => EksProcessor};
  const credentials = {accessKeyId: process.env['AWS_ACCESS_KEY_ID'] ?? '', secretAccessKey: process.env['AWS_SECRET_ACCESS_KEY'] ?? ''};
  // The processor's own hook for per-account credentials; the simulator's workloads use one account.
  const processor = new AwsEKSClusterProcessor({credentialsFactory: async () => credentials});

  const cycles: PeerCycle[] = [];
  for (let i = 0; i < request.cycles; i++) {
    await control(request.controlUrl, 'POST', '/limits/refill');
    await control(request.controlUrl, 'POST', '/stats/reset');
    const keys: string[] = [];
    const errors: string[] = [];
    const started = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    await Promise.all(request.locations.map((loc) =>
      processor
        .readLocation({type: 'aws-eks', target: `${loc.account}/${loc.region}`}, false, (result) => {
          const arn = result.entity?.metadata.annotations?.['amazonaws.com/arn'] ?? '';
          const [, , , region = '', account = '', resource = ''] = arn.split(':');
          if (result.type === 'entity') keys.push(clusterKey({cloud: 'AWS', account, region, name: resource.replace(/^cluster\//, '')}));
        })
        .catch((error: unknown) => {
          errors.push(`${loc.account}/${loc.region}: ${(error as Error).name}: ${(error as Error).message}`);
        }),
    ));
    const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
    const used = process.cpuUsage(cpu);
    const stats = await control<SimStats>(request.controlUrl, 'GET', '/stats');
    const verdict = await control<SimVerdict>(request.controlUrl, 'POST', '/verify', {keys});
    cycles.push({wallMs, cpuMs: (used.user + used.system) / 1000, stats, verdict, failedLocations: errors.length, ...(errors[0] ? {firstError: errors[0]} : {})});
    process.stderr.write(`[peer] cycle ${i + 1}/${request.cycles}: ${wallMs.toFixed(0)} ms, ${verdict.found}/${verdict.expected} found, ${errors.length} failed locations\n`);
  }

  const {AwsIamStrategy} = require('@backstage/plugin-kubernetes-backend') as {AwsIamStrategy: new (o: {config: unknown}) => IamStrategy};
  const {ConfigReader} = require('@backstage/config') as {ConfigReader: new (data: object) => unknown};
  const strategy = new AwsIamStrategy({config: new ConfigReader({})});
  const mint = (i: number): Promise<unknown> => strategy.getCredential({name: `cluster-${i % 1000}`, url: 'https://127.0.0.1', authMetadata: {}});
  for (let i = 0; i < 200; i++) await mint(i);
  const tokenStart = process.hrtime.bigint();
  for (let i = 0; i < request.tokenIterations; i++) await mint(i);
  const tokenSeconds = Number(process.hrtime.bigint() - tokenStart) / 1e9;
  return {versions, cycles, tokenMintsPerSecond: Math.round(request.tokenIterations / tokenSeconds), maxRssKb: process.resourceUsage().maxRSS};
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const raw = args[0] === '--' ? args[1] : args[0];
  main(raw ?? '{}').then(
    (result) => {
      process.stdout.write(`BENCH_RESULT ${JSON.stringify(result)}\n`);
      process.exit(0);
    },
    (error: unknown) => {
      process.stderr.write(`peer-driver: ${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}
