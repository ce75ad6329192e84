/**
 * The peer comparison of `npm run bench -- --peers`: installs (from peer-package.json) the Backstage AWS catalog module and
 * the Kubernetes backend (for `AwsIamStrategy`) into a scratch folder with its own package.json
 * (outside the project's dependencies), then runs them against the same simulator. When the
 * install or the run fails, the report says exactly why and the bench goes on.
 */
import {spawn} from 'node:child_process';
import {copyFile, mkdir, readFile} from 'node:fs/promises';
import path from 'node:path';
import {runChild} from '../child.ts';
import {median} from '../report.ts';
import type {Simulator} from '../sim.ts';
import {accountsOf, regionsOf} from '../scenario.ts';
import type {PeerRequest, PeerResult} from './peer-driver.ts';
import type {PeerReport} from './peer-types.ts';

const PEER = 'Backstage AwsEKSClusterProcessor + AwsIamStrategy';
const TEMPLATE = path.join(import.meta.dirname, 'peer-package.json');

/** Outcome of preparing the scratch folder. */
export type PeerInstall = {readonly ok: true; readonly dir: string} | {readonly ok: false; readonly reason: string};

function npm(args: readonly string[], cwd: string, timeoutMs: number): Promise<{code: number | null; output: string}> {
  return new Promise((resolve) => {
    const child = spawn('npm', [...args], {cwd, stdio: ['ignore', 'pipe', 'pipe'], env: process.env});
    let output = '';
    const keep = (c: Buffer): void => {
      output = (output + c.toString('utf8')).slice(-6000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({code: -1, output: `could not run npm: ${error.message}`});
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({code, output});
    });
  });
}

/** Installs the peers into `dir` (reusing an install of the same package.json). */
export async function installPeers(dir: string): Promise<PeerInstall> {
  await mkdir(dir, {recursive: true});
  const wanted = await readFile(TEMPLATE, 'utf8');
  const have = await readFile(path.join(dir, 'package.json'), 'utf8').catch(() => '');
  const installed = await readFile(path.join(dir, 'node_modules/@backstage/plugin-catalog-backend-module-aws/package.json'), 'utf8').catch(() => '');
  if (have === wanted && installed !== '') return {ok: true, dir};
  await copyFile(TEMPLATE, path.join(dir, 'package.json'));
  process.stderr.write(`installing peers into ${dir} (npm install; about a minute)...\n`);
  const {code, output} = await npm(['install', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error', '--no-package-lock'], dir, 15 * 60_000);
  if (code !== 0) {
    const lines = output.split('\n').filter((l) => /ERR|error/i.test(l)).slice(-6).join(' | ');
    return {ok: false, reason: `npm install in ${dir} failed (exit ${code}): ${lines || output.trim().split('\n').slice(-4).join(' | ')}`};
  }
  return {ok: true, dir};
}

/** Runs the peer on the simulator's AWS part and reports it next to kube-discovery's numbers. */
export async function runPeer(install: PeerInstall, sim: Simulator, options: {cycles: number; tokenIterations: number; log?: (line: string) => void}): Promise<PeerReport> {
  if (!install.ok) return {ran: false, peer: PEER, reason: install.reason};
  const aws = sim.scenario.aws;
  if (!aws) return {ran: false, peer: PEER, reason: 'the workload has no AWS part'};
  const locations = accountsOf(aws).slice(0, 1).flatMap((account) => regionsOf(aws).map((region) => ({account, region})));
  const request: PeerRequest = {scratch: install.dir, controlUrl: sim.description.control_url, cycles: options.cycles, locations, tokenIterations: options.tokenIterations};
  const outcome = await runChild<PeerResult>(path.join(import.meta.dirname, 'peer-driver.ts'), request, {env: {...sim.description.env}, ...(options.log ? {onProgress: (l: string) => options.log?.(`  ${l}`)} : {})});
  if (!outcome.ok) return {ran: false, peer: PEER, reason: outcome.reason};
  const r = outcome.result;
  const warm = r.cycles.length > 1 ? r.cycles.slice(1) : r.cycles;
  const last = r.cycles.at(-1);
  const expected = last?.verdict.expected ?? 0;
  const found = last?.verdict.found ?? 0;
  const notes = ['reads only the first ListClusters page of each region (no nextToken loop) and describes every listed cluster at once'];
  if (accountsOf(aws).length > 1) notes.push('run on the management account only');
  const failed = Math.max(0, ...r.cycles.map((c) => c.failedLocations));
  const firstError = r.cycles.find((c) => c.firstError)?.firstError;
  return {
    ran: true,
    peer: PEER,
    versions: r.versions,
    wall_ms_median: Math.round(median(warm.map((c) => c.wallMs)) * 10) / 10,
    wall_ms_all: r.cycles.map((c) => Math.round(c.wallMs * 10) / 10),
    api_calls_per_cycle: median(warm.map((c) => c.stats.aws_calls)),
    clusters_found: found,
    clusters_expected: expected,
    found_all: r.cycles.every((c) => c.verdict.missing === 0),
    failed_locations: failed,
    ...(firstError ? {first_error: firstError} : {}),
    cpu_ms_per_cluster: Math.round((median(warm.map((c) => c.cpuMs)) / Math.max(1, expected)) * 1000) / 1000,
    peak_rss_mb: Math.round(r.maxRssKb / 102.4) / 10,
    token_mints_per_second: r.tokenMintsPerSecond,
    notes,
  };
}
