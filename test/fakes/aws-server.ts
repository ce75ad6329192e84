/**
 * Wire-level AWS fake: one HTTP server on 127.0.0.1 serving EKS (REST-JSON), STS (query
 * XML) and the Resource Groups Tagging API (JSON 1.1, GetResources) over a FakeAwsWorld, for
 * the real SDK clients.
 *
 *   const world = new FakeAwsWorld();
 *   world.addAccount('111111111111', {accessKeys: [{accessKeyId: 'AKIDTEST', secretAccessKey: 's3cret'}]});
 *   world.addCluster('111111111111', 'us-east-1', {name: 'prod', tags: {env: 'prod'}});
 *   const fake = await startFakeAws({world});
 *   new EKSClient({region: 'us-east-1', endpoint: fake.url, credentials: {...}});
 *   // or: Object.assign(process.env, fake.env)  (AWS_ENDPOINT_URL_EKS / AWS_ENDPOINT_URL_STS)
 *   fake.fault = throttleFirst(1);   // mutable between cycles, like fake.latencyMs and fake.pageSize
 *   fake.stats.count({operation: 'ListClusters', region: 'us-east-1'});
 *   await fake.close();
 *
 * Requests are routed by the service in the SigV4 credential scope (`eks` or `sts`; the path
 * decides for unsigned ones) and answered for the scope's region and the signer's account.
 * Each request is authenticated for real (signature recomputed with the world's secret),
 * then delayed by `latencyMs`, then offered to the `fault` hook, then run.
 */
import {randomUUID} from 'node:crypto';
import {createServer, type IncomingMessage, type ServerResponse} from 'node:http';
import type {AddressInfo} from 'node:net';
import {AwsApiError, type ApiResponse, type AwsApi, type BoundOperation, type CallContext} from './aws-api.ts';
import {latencyFor, type FaultContext, type FaultHook, type Latency} from './aws-faults.ts';
import {readScope, verifySigV4, type WireRequest} from './aws-sigv4.ts';
import {FakeAwsStats} from './aws-stats.ts';
import type {FakeAwsWorld} from './aws-world.ts';
import {eksApi} from './eks-api.ts';
import {accountApi} from './account-api.ts';
import {organizationsApi} from './organizations-api.ts';
import {stsApi} from './sts-api.ts';
import {taggingApi} from './tagging-api.ts';

/** Options of `startFakeAws`. */
export interface FakeAwsOptions {
  readonly world: FakeAwsWorld;
  /** Delay before each answer, on the world's clock. */
  readonly latencyMs?: Latency;
  readonly fault?: FaultHook;
  /** Items per page of list operations (default 2, so more than two clusters always take several pages). */
  readonly pageSize?: number;
}

/** A running fake; `fault`, `latencyMs` and `pageSize` may be changed while it runs. */
export interface FakeAws {
  /** Base URL for both EKS and STS (`endpoint` of the SDK clients). */
  readonly url: string;
  /** Environment that points the SDK's default endpoint resolution at the fake. */
  readonly env: Readonly<{AWS_ENDPOINT_URL_EKS: string; AWS_ENDPOINT_URL_STS: string; AWS_ENDPOINT_URL_ORGANIZATIONS: string; AWS_ENDPOINT_URL_ACCOUNT: string; AWS_ENDPOINT_URL_RESOURCE_GROUPS_TAGGING_API: string}>;
  readonly world: FakeAwsWorld;
  readonly stats: FakeAwsStats;
  fault: FaultHook | undefined;
  latencyMs: Latency | undefined;
  pageSize: number;
  /** Stops the server, cutting hanging and keep-alive connections. */
  close(): Promise<void>;
}

const APIS: Readonly<Record<string, AwsApi>> = {eks: eksApi, sts: stsApi, organizations: organizationsApi, account: accountApi, tagging: taggingApi};

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, answer: ApiResponse, requestId: string): void {
  if (res.destroyed) return;
  res.writeHead(answer.status, {
    'content-type': answer.contentType,
    'content-length': Buffer.byteLength(answer.body),
    'x-amzn-RequestId': requestId,
    ...answer.headers,
  });
  res.end(answer.body);
}

function injectedMessage(code: string): string {
  return /throttl|toomanyrequests/i.test(code) ? 'Rate exceeded' : `${code} (injected by the fake)`;
}

/** Starts the fake on 127.0.0.1 with a free port. */
export async function startFakeAws(options: FakeAwsOptions): Promise<FakeAws> {
  const {world} = options;
  const stats = new FakeAwsStats();
  const clock = world.clock;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const wire: WireRequest = {
      method: req.method ?? 'GET',
      rawPath: q < 0 ? url : url.slice(0, q),
      rawQuery: q < 0 ? '' : url.slice(q + 1),
      headers: req.headers,
      body,
    };
    const requestId = randomUUID();
    const scope = readScope(wire);
    const api = APIS[scope?.service ?? ''] ?? (wire.rawPath === '/' ? stsApi : eksApi);
    let op: BoundOperation | AwsApiError;
    try {
      op = api.route(wire);
    } catch (e) {
      op = e instanceof AwsApiError ? e : new AwsApiError('InternalFailure', String(e), {status: 500});
    }
    const region = scope?.region ?? '';
    const call = stats.begin({service: api.service, operation: op instanceof AwsApiError ? 'Unknown' : op.name, region, account: ''}, clock.now());
    res.on('close', () => stats.end(call, clock.now(), 0));
    const answer = (a: ApiResponse, code?: string): void => {
      stats.end(call, clock.now(), a.status, code);
      send(res, a, requestId);
    };
    const fail = (e: AwsApiError): void => answer(api.errorResponse(e, requestId), e.code);

    const verdict = await verifySigV4(world, wire);
    const fctx: FaultContext = {service: api.service, operation: op instanceof AwsApiError ? 'Unknown' : op.name, region, account: verdict.ok ? verdict.caller.account : ''};
    stats.update(call, {account: fctx.account, ...(verdict.ok ? {accessKeyId: verdict.caller.accessKeyId} : {})});
    const delay = latencyFor(fake.latencyMs, fctx);
    if (delay > 0) await clock.sleep(delay);

    if (!verdict.ok) {
      fail(new AwsApiError(api.authErrorCodes[verdict.kind], verdict.message, {status: verdict.kind === 'malformed' ? 400 : 403}));
      return;
    }
    const action = fake.fault?.(fctx);
    if (action && 'hang' in action) return; // the 'close' listener records the abandoned call
    if (action && 'optInRequired' in action) {
      fail(new AwsApiError(api.authErrorCodes['opt-in-required'], 'The security token included in the request is invalid.', {status: 403}));
      return;
    }
    if (op instanceof AwsApiError) {
      fail(op);
      return;
    }
    const ctx: CallContext = {world, caller: verdict.caller, region, requestId, pageSize: fake.pageSize};
    if (action && 'malformed' in action) {
      answer(op.malformed(action.malformed === true ? 'invalid-json' : action.malformed, ctx));
      return;
    }
    if (action) {
      fail(new AwsApiError(action.code, action.message ?? injectedMessage(action.code), action.status === undefined ? {} : {status: action.status}));
      return;
    }
    try {
      answer(op.run(ctx));
    } catch (e) {
      fail(e instanceof AwsApiError ? e : new AwsApiError('InternalFailure', `fake ${api.service} failed: ${String(e)}`, {status: 500}));
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(500, {'content-type': 'text/plain'});
        res.end(`fake AWS failed: ${String(e)}`);
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const fake: FakeAws = {
    url,
    env: {AWS_ENDPOINT_URL_EKS: url, AWS_ENDPOINT_URL_STS: url, AWS_ENDPOINT_URL_ORGANIZATIONS: url, AWS_ENDPOINT_URL_ACCOUNT: url, AWS_ENDPOINT_URL_RESOURCE_GROUPS_TAGGING_API: url},
    world,
    stats,
    fault: options.fault,
    latencyMs: options.latencyMs,
    pageSize: options.pageSize ?? 2,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((e) => (e ? reject(e) : resolve()));
        server.closeAllConnections();
      }),
  };
  if (!Number.isInteger(fake.pageSize) || fake.pageSize < 1) {
    await fake.close();
    throw new Error(`Expected pageSize to be an integer >= 1, got ${options.pageSize}`);
  }
  return fake;
}
