/**
 * Secrets stay secret: with a running service that assumes a role, mints EKS tokens for probes,
 * and sees failures, neither the logs (at trace level), nor /metrics, /v1/*, `ls`, `kubeconfig`
 * or `once` output ever contain the secret key, the session token, or a bearer token.
 */
import {Writable} from 'node:stream';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {failRegion, type FakeAws} from '../fakes/aws-fakes.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {base64, eksAuthenticator} from '../probe/eks-fixtures.ts';

const MGMT = '111111111111';
const PROD = '222222222222';
const SECRET = 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRETKEY';
const SESSION = 'FwoGZXIvYXdzEJr//////////SESSIONTOKENVALUE';
const KEY = {accessKeyId: 'AKIASECRETSTEST00001', secretAccessKey: SECRET, sessionToken: SESSION};
const ROLE = `arn:aws:iam::${PROD}:role/kube-discovery`;

let fake: FakeAws;
let kube: FakeKubeApi;
let svc: RunningService;
let aws: AwsServiceWorld;
const logs: string[] = [];

/** Everything that looks like a credential this test put into play. */
function leaks(text: string): string[] {
  const found: string[] = [];
  if (text.includes(SECRET)) found.push('secret access key');
  if (text.includes(SESSION)) found.push('session token');
  if (/k8s-aws-v1\.[A-Za-z0-9_-]{20,}/.test(text)) found.push('EKS bearer token');
  if (/X-Amz-Signature=[0-9a-f]{16,}/.test(text)) found.push('presigned signature');
  for (const issued of fake.world.issuedCredentials()) {
    if (text.includes(issued.secretAccessKey)) found.push('assumed-role secret');
    if (issued.sessionToken && text.includes(issued.sessionToken)) found.push('assumed-role session token');
  }
  return found;
}

beforeAll(async () => {
  aws = await startAwsServiceWorld({key: KEY, account: MGMT, populate: (w) => w.addAccount(PROD, {roles: [{arn: ROLE, externalId: 'ext-secret-id', trust: [MGMT]}]})});
  ({fake} = aws);
  const {world} = aws;
  const clusters = [{account: PROD, region: 'us-east-1', name: 'prod'}];
  kube = await startFakeKubeApi({authenticate: eksAuthenticator({world, clusters, stsUrl: fake.url}).authenticate});
  world.addCluster(PROD, 'us-east-1', {name: 'prod', endpoint: kube.url, caData: base64(kube.caPem)});
  world.addCluster(PROD, 'eu-west-1', {name: 'eu'});
  fake.fault = failRegion('eu-west-1', 'AccessDeniedException');
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: secrets
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [us-east-1, eu-west-1]
      assume_role_arn: ${ROLE}
      external_id: ext-secret-id
storage: {type: memory}
http: {listen_addr: "127.0.0.1:0"}
log: {level: trace}
`,
    'secrets.yaml',
  );
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  svc = await startService({config, io: captureIo().io, clock: systemClock, logger: createLogger({level: 'trace', format: 'json', destination: sink})});
  // The checks below need the first cycle whole: the token minted, the probe sent, the failing region logged. nextCycle()
  // resolves once the cycle's probes are done, however slow a loaded machine makes it; startService returns as soon as the
  // cycle starts and the cycle needs network round trips, so the waiter is registered before it can end (poll_interval 1h).
  await svc.nextCycle();
});

afterAll(async () => {
  await svc.stop({deregister: false});
  await kube.close();
  await aws.close();
});

describe('secrets', () => {
  it('a real token was minted and used, so the checks below are meaningful', () => {
    expect(fake.world.issuedCredentials().length).toBeGreaterThan(0);
    expect(kube.requests.some((r) => r.authorization?.startsWith('Bearer k8s-aws-v1.'))).toBe(true);
    expect(logs.join('')).toContain('source_failed');
  });

  it('never reach the logs, /metrics, /v1/* or the CLI output', async () => {
    const texts: Record<string, string> = {logs: logs.join('')};
    for (const path of ['/metrics', '/v1/kube_servers', '/v1/status', '/readyz']) texts[path] = await (await fetch(`${svc.url}${path}`)).text();
    const ls = captureIo();
    await main(['ls', '--server', svc.url, '--output', 'json'], ls.io);
    texts['ls'] = ls.stdout() + ls.stderr();
    const kc = captureIo();
    await main(['kubeconfig', '--server', svc.url], kc.io);
    texts['kubeconfig'] = kc.stdout() + kc.stderr();
    expect(texts['kubeconfig']).toContain('token');
    for (const [where, text] of Object.entries(texts)) expect(leaks(text), where).toEqual([]);
  });

  it('never reach the error output of a failing token command', async () => {
    const io = captureIo();
    const code = await main(['token', 'eks', '--cluster-name', 'prod', '--region', 'us-east-1', '--role-arn', ROLE, '--external-id', 'wrong'], io.io);
    expect(code).toBe(1);
    expect(io.stderr()).toContain('AccessDenied');
    expect(leaks(io.stdout() + io.stderr())).toEqual([]);
  });
});

/**
 * Redaction by value: every credential the process holds is cut out of any message, whatever its
 * format, even when an AWS error echoes it in its first line. One region per case; each answers
 * ListClusters with an error whose message carries one credential.
 */
describe('secrets echoed in cloud error messages (12 cases)', () => {
  const OLD_FORMAT_TOKEN = 'AQoDYXdzEJr1K2Zm9wX8yXc0dGVzdG9sZGZvcm1hdHNlc3Npb250b2tlbg==';
  const AZURE_SECRET = 'Zx8Q~abcdEFGHijkl.mnopQRST_uvwxYZ0123456';
  const ETCD_PASSWORD = 'etcd-pa55word-never-shown';
  const FILE_TOKEN = 'file-bearer-token-0123456789abcdef';
  const cases: Record<string, () => string> = {
    'us-east-1': () => `The security token included in the request is invalid: ${SECRET}`,
    'us-east-2': () => `SignatureDoesNotMatch; secret=${SECRET}`,
    'us-west-1': () => `invalid header x-amz-security-token:${SESSION}`,
    'us-west-2': () => `expired session ${OLD_FORMAT_TOKEN}`,
    'eu-west-2': () => `assumed key ${fake.world.issuedCredentials()[0]?.secretAccessKey ?? 'none'}`,
    'eu-west-3': () => `assumed session ${fake.world.issuedCredentials()[0]?.sessionToken ?? 'none'}`,
    'eu-central-1': () => `client secret rejected: ${AZURE_SECRET}`,
    'eu-north-1': () => `auth failed for root:${ETCD_PASSWORD}`,
    'ap-south-1': () => `bearer was ${FILE_TOKEN} (from the token file)`,
    'ap-northeast-1': () => `token=${encodeURIComponent(SESSION)}`,
    'ap-southeast-1': () => `abc${SECRET}`,
    'ca-central-1': () => `SessionToken=${SESSION}`,
  };
  let svc2: RunningService;
  let restore: () => void;
  let dir: string;
  const logs2: string[] = [];

  function leaksAll(text: string): string[] {
    const found = leaks(text);
    for (const [what, value] of Object.entries({OLD_FORMAT_TOKEN, AZURE_SECRET, ETCD_PASSWORD, FILE_TOKEN, encoded: encodeURIComponent(SESSION)})) {
      if (text.includes(value)) found.push(what);
    }
    return found;
  }

  beforeAll(async () => {
    const {mkdtemp, writeFile} = await import('node:fs/promises');
    const os = await import('node:os');
    const path = await import('node:path');
    dir = await mkdtemp(path.join(os.tmpdir(), 'kd-secrets-'));
    await writeFile(path.join(dir, 'tokens'), `${FILE_TOKEN}\n`);
    restore = setEnv({AZURE_CLIENT_SECRET: AZURE_SECRET, KUBE_DISCOVERY_ETCD_PASSWORD: ETCD_PASSWORD});
    fake.fault = (ctx) => {
      const message = ctx.service === 'eks' && ctx.operation === 'ListClusters' ? cases[ctx.region] : undefined;
      return message ? {code: 'AccessDeniedException', message: message()} : undefined;
    };
    const yaml = `version: v1
discovery_service:
  discovery_group: echoes
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [${Object.keys(cases).join(', ')}]
      assume_role_arn: ${ROLE}
      external_id: ext-secret-id
storage: {type: memory}
http: {listen_addr: "127.0.0.1:0", auth: {token_file: ${path.join(dir, 'tokens')}}}
log: {level: trace}
`;
    await writeFile(path.join(dir, 'echoes.yaml'), yaml);
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logs2.push(chunk.toString('utf8'));
        done();
      },
    });
    svc2 = await startService({
      config: parseConfig(yaml, 'echoes.yaml'),
      io: captureIo().io,
      clock: systemClock,
      logger: createLogger({level: 'trace', format: 'json', destination: sink}),
    });
    await svc2.nextCycle();
  });

  afterAll(async () => {
    await svc2?.stop({deregister: false});
    fake.fault = failRegion('eu-west-1', 'AccessDeniedException');
    restore();
    const {rm} = await import('node:fs/promises');
    await rm(dir, {recursive: true, force: true});
  });

  it('every case failed its source with the echoing message, so the checks are meaningful', async () => {
    const status = (await (await fetch(`${svc2.url}/v1/status`, {headers: {authorization: `Bearer ${FILE_TOKEN}`}})).json()) as {
      sources: {region: string; last_error?: {message: string}}[];
    };
    expect(status.sources.filter((s) => s.last_error?.message.includes('[REDACTED]')).map((s) => s.region).sort()).toEqual(Object.keys(cases).sort());
  });

  it('reach neither the log, /v1/status, /readyz nor `once` JSON', async () => {
    const texts: Record<string, string> = {logs: logs2.join('')};
    for (const p of ['/v1/status', '/readyz', '/v1/kube_servers']) {
      texts[p] = await (await fetch(`${svc2.url}${p}`, {headers: {authorization: `Bearer ${FILE_TOKEN}`}})).text();
    }
    const once = captureIo();
    const path = await import('node:path');
    await main(['once', '-c', path.join(dir, 'echoes.yaml'), '--output', 'json'], once.io);
    texts['once'] = once.stdout() + once.stderr();
    expect(texts['once']).toContain('AccessDeniedException');
    for (const [where, text] of Object.entries(texts)) expect(leaksAll(text), where).toEqual([]);
  });
});
