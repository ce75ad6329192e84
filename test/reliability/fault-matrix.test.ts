/**
 * The cloud fault matrix: every fault below runs against `once` and `start` (both in-process)
 * on a filled registry, with the real SDK clients talking to the EKS/STS and ARM fakes through
 * the fault proxy. For each: zero deregistrations, no crash, the failure visible in the
 * output / `/v1/status`, the metrics and one log line, and recovery on the next clean cycle.
 * (Registry-backend faults live in their own file.)
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {FailureReason} from '../../src/core/types.ts';
import {answer, mutateJson, when, type ProxyFault, type ProxyFaultRule} from '../fakes/faults.ts';
import {ALL_NAMES, goldenRegistry, SECRET, metricValue, once, start, SUBSCRIPTION, startHarness, type Harness} from './cloud-fault-harness.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';

const EAST = 'eks:us-east-1:111111111111';
const WEST = 'eks:eu-west-1:111111111111';
const NO_ACCOUNT = 'eks:us-east-1:unknown';
// Planning cut off by the deadline fails the catch-all source of the cloud.
const AKS = `aks:${SUBSCRIPTION}`;
const AKS_ALL = 'aks:*';
const B = 'b-eks-us-east-1-111111111111';
const A1 = `a1-aks-eastus-rg-a-${SUBSCRIPTION}`;

/** A fault that fails a whole source. */
interface SourceRow {
  readonly fault: string;
  readonly proxy: 'aws' | 'azure';
  readonly rule: ProxyFaultRule;
  readonly source: string;
  readonly reason: FailureReason;
  /** Only the cycle deadline can end it: the cycle must report an overrun. */
  readonly deadline?: boolean;
  /** false where `once`'s default ARM retries (1 s backoff, 5 tries) would only measure the SDK's patience. */
  readonly once?: boolean;
  /** Words the failure's message must hold, in `once`'s report and in `/v1/status`. */
  readonly message?: string;
}

/** A fault that spoils one cluster record: the source succeeds, the cluster is kept. */
interface ClusterRow {
  readonly fault: string;
  readonly proxy: 'aws' | 'azure';
  readonly rule: ProxyFaultRule;
  readonly cluster: string;
  readonly effect: 'malformed' | 'invalid_ca' | 'no_endpoint';
}

const EMPTYISH: [string, ProxyFault][] = [
  ['200 {}', answer(200, '{}')],
  ['200 []', answer(200, '[]')],
  ['200 with an empty body', answer(200, '')],
  ['200 {"clusters":null}', answer(200, '{"clusters":null}')],
  ['200 {"clusters":"x"}', answer(200, '{"clusters":"x"}')],
  ['200 {"clusters":[1,2]}', answer(200, '{"clusters":[1,2]}')],
  ['200 {"message":"..."}', answer(200, '{"message":"Service busy"}')],
  ['204 No Content', {kind: 'answer', status: 204, body: ''}],
];
const eksError = (status: number, code: string): ProxyFault => answer(status, JSON.stringify({message: `${code} injected`}), {'x-amzn-errortype': code});
const stsError = (status: number, code: string): ProxyFault =>
  answer(status, `<ErrorResponse><Error><Type>Sender</Type><Code>${code}</Code><Message>${code} injected</Message></Error><RequestId>r-1</RequestId></ErrorResponse>`, {'content-type': 'text/xml'});
const list = (page: 'first' | 'later', region = 'us-east-1') => ({operation: 'ListClusters', page, region});
const describeB = {operation: 'DescribeCluster', cluster: 'b'};
const caller = {operation: 'GetCallerIdentity'};
const aksList = (page: 'first' | 'later') => ({operation: 'managedClusters.list', page});
/**
 * The answer with `members` written after its last member: JSON.parse keeps the last of two equal
 * keys, so a second `"clusters":[]` would read as an empty listing, a second `"nextToken":null` as the last page.
 */
const appendMembers = (members: string): ProxyFault => ({kind: 'mutate', rewrite: (text) => text.replace(/\}\s*$/, `,${members}}`)});
const duplicate = (key: string): string => `malformed answer: duplicate key "${key}"`;
const editCluster = (patch: Record<string, unknown>) => mutateJson((body) => ({cluster: {...(body['cluster'] as object), ...patch}}));

const SOURCE_ROWS: SourceRow[] = [
  ...EMPTYISH.flatMap(([label, fault]) =>
    (['first', 'later'] as const).map((page): SourceRow => ({fault: `EKS ListClusters ${page} page: ${label}`, proxy: 'aws', rule: when(list(page), fault), source: EAST, reason: 'invalid_response'})),
  ),
  {fault: 'EKS ListClusters: 200 HTML instead of JSON', proxy: 'aws', rule: when(list('first'), answer(200, '<html>gateway</html>', {'content-type': 'text/html'})), source: EAST, reason: 'invalid_response'},
  {fault: 'EKS ListClusters eu-west-1: clusters is a number', proxy: 'aws', rule: when(list('first', 'eu-west-1'), mutateJson(() => ({clusters: 3}))), source: WEST, reason: 'invalid_response'},
  {fault: 'EKS ListClusters: 500 InternalFailure', proxy: 'aws', rule: when(list('first'), eksError(500, 'InternalFailure')), source: EAST, reason: 'other'},
  {fault: 'EKS ListClusters: 429 ThrottlingException', proxy: 'aws', rule: when(list('later'), eksError(429, 'ThrottlingException')), source: EAST, reason: 'throttled'},
  {fault: 'EKS ListClusters: 403 AccessDeniedException', proxy: 'aws', rule: when(list('first'), eksError(403, 'AccessDeniedException')), source: EAST, reason: 'access_denied'},
  {fault: 'EKS ListClusters: 502 with an HTML body', proxy: 'aws', rule: when(list('first'), answer(502, '<html>bad gateway</html>', {'content-type': 'text/html'})), source: EAST, reason: 'other'},
  {fault: 'EKS ListClusters: truncated answer', proxy: 'aws', rule: when(list('first'), {kind: 'truncate'}), source: EAST, reason: 'other'},
  {fault: 'EKS ListClusters: connection reset', proxy: 'aws', rule: when(list('later'), {kind: 'reset'}), source: EAST, reason: 'other'},
  {fault: 'EKS ListClusters: hang', proxy: 'aws', rule: when(list('first'), {kind: 'hang'}), source: EAST, reason: 'timeout'},
  {fault: 'EKS ListClusters: the answer stops mid-body for longer than request_timeout', proxy: 'aws', rule: when(list('first'), {kind: 'drip', bytes: 8, everyMs: 4_000}), source: EAST, reason: 'timeout'},
  {fault: 'EKS ListClusters: a 200 larger than any EKS answer (9 MiB listing other names)', proxy: 'aws', rule: when(list('first'), answer(200, `{"clusters":[${'"x",'.repeat(2_400_000)}"x"]}`)), source: EAST, reason: 'invalid_response'},
  {fault: 'EKS ListClusters: bytes that are not HTTP', proxy: 'aws', rule: when(list('first'), {kind: 'raw', bytes: 'SSH-2.0-OpenSSH_9.6\r\n\r\n'}), source: EAST, reason: 'other'},
  {fault: 'EKS ListClusters: slow drip past the cycle deadline', proxy: 'aws', rule: when(list('later'), {kind: 'drip', bytes: 1, everyMs: 500}), source: EAST, reason: 'timeout', deadline: true},
  // A later page goes the direct way of src/clouds/aws/direct-read.ts (the client's first call went the SDK's): its faults too.
  {fault: 'EKS ListClusters later page (direct way): 500 InternalFailure', proxy: 'aws', rule: when(list('later'), eksError(500, 'InternalFailure')), source: EAST, reason: 'other'},
  {fault: 'EKS ListClusters later page (direct way): hang', proxy: 'aws', rule: when(list('later'), {kind: 'hang'}), source: EAST, reason: 'timeout'},
  {fault: 'EKS ListClusters later page (direct way): 200 {"clusters":[]} with x-amzn-ErrorType', proxy: 'aws', rule: when(list('later'), answer(200, '{"clusters":[]}', {'x-amzn-errortype': 'InternalFailure'})), source: EAST, reason: 'invalid_response'},
  // JSON protocols name an error's type in the body's `__type`: a 2xx naming one contradicts itself, as the header does.
  {fault: 'EKS ListClusters first page (SDK way): 200 {"__type":"InternalFailure","clusters":[]}', proxy: 'aws', rule: when(list('first'), answer(200, '{"__type":"InternalFailure","clusters":[]}')), source: EAST, reason: 'invalid_response'},
  {fault: 'EKS ListClusters later page (direct way): 200 {"clusters":[],"__type":"ThrottlingException"}', proxy: 'aws', rule: when(list('later'), answer(200, '{"clusters":[],"__type":"ThrottlingException"}')), source: EAST, reason: 'invalid_response'},
  // EKS answers a listing 200; another 2xx is not that answer: 206 is part of one, 203 one a proxy rewrote, 202 one not yet made.
  {fault: 'EKS ListClusters first page (SDK way): 206 Partial Content {"clusters":[]}', proxy: 'aws', rule: when(list('first'), answer(206, '{"clusters":[]}')), source: EAST, reason: 'invalid_response'},
  {fault: 'EKS ListClusters later page (direct way): 203 Non-Authoritative Information {"clusters":[]}', proxy: 'aws', rule: when(list('later'), answer(203, '{"clusters":[]}')), source: EAST, reason: 'invalid_response'},
  {fault: 'EKS ListClusters first page: 202 Accepted {"clusters":[]}', proxy: 'aws', rule: when(list('first'), answer(202, '{"clusters":[]}')), source: EAST, reason: 'invalid_response'},
  {fault: 'EKS DescribeCluster: 500 InternalFailure', proxy: 'aws', rule: when(describeB, eksError(500, 'InternalFailure')), source: EAST, reason: 'other'},
  {fault: 'EKS DescribeCluster: hang', proxy: 'aws', rule: when(describeB, {kind: 'hang'}), source: EAST, reason: 'timeout'},
  {fault: 'EKS DescribeCluster: connection reset', proxy: 'aws', rule: when(describeB, {kind: 'reset'}), source: EAST, reason: 'other'},
  {fault: 'STS GetCallerIdentity: 500', proxy: 'aws', rule: when(caller, stsError(500, 'InternalFailure')), source: NO_ACCOUNT, reason: 'other'},
  // The account a default-credentials matcher lists under: an account that is no AWS account id, or not the one
  // the caller's ARN names, would register every cluster under it and deregister the ones registered under the real one.
  {fault: 'STS GetCallerIdentity: 200 with an Account of 11 digits', proxy: 'aws', rule: when(caller, {kind: 'mutate', rewrite: (text) => text.replace('<Account>111111111111</Account>', '<Account>11111111111</Account>')}), source: NO_ACCOUNT, reason: 'invalid_response'},
  {fault: 'STS GetCallerIdentity: 200 whose Account is not the account of its Arn', proxy: 'aws', rule: when(caller, {kind: 'mutate', rewrite: (text) => text.replace('<Account>111111111111</Account>', '<Account>999999999999</Account>')}), source: NO_ACCOUNT, reason: 'invalid_response'},
  {fault: 'STS GetCallerIdentity: a 203 (a proxy rewrote the answer)', proxy: 'aws', rule: when(caller, answer(203, '<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::999999999999:user/x</Arn><UserId>AIDAX</UserId><Account>999999999999</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></GetCallerIdentityResponse>', {'content-type': 'text/xml'})), source: NO_ACCOUNT, reason: 'invalid_response'},
  {fault: 'STS GetCallerIdentity: 403 AccessDenied', proxy: 'aws', rule: when(caller, stsError(403, 'AccessDenied')), source: NO_ACCOUNT, reason: 'access_denied'},
  {fault: 'STS GetCallerIdentity: 200 without Account', proxy: 'aws', rule: when(caller, {kind: 'mutate', rewrite: (xml) => xml.replace(/<Account>\d+<\/Account>/, '')}), source: NO_ACCOUNT, reason: 'invalid_response'},
  {fault: 'STS GetCallerIdentity: 200 empty body', proxy: 'aws', rule: when(caller, answer(200, '', {'content-type': 'text/xml'})), source: NO_ACCOUNT, reason: 'invalid_response'},
  {fault: 'STS GetCallerIdentity: hang', proxy: 'aws', rule: when(caller, {kind: 'hang'}), source: NO_ACCOUNT, reason: 'timeout'},
  {fault: 'STS GetCallerIdentity: slow drip past the cycle deadline', proxy: 'aws', rule: when(caller, {kind: 'drip', bytes: 1, everyMs: 500}), source: 'eks:*', reason: 'timeout', deadline: true},
  {fault: 'STS GetCallerIdentity: connection reset', proxy: 'aws', rule: when(caller, {kind: 'reset'}), source: NO_ACCOUNT, reason: 'other'},
  {fault: 'ARM managedClusters first page: 200 {}', proxy: 'azure', rule: when(aksList('first'), answer(200, '{}')), source: AKS, reason: 'invalid_response'},
  {fault: 'ARM managedClusters later page: 200 {}', proxy: 'azure', rule: when(aksList('later'), answer(200, '{}')), source: AKS, reason: 'invalid_response'},
  {fault: 'ARM managedClusters: 200 {"value":null}', proxy: 'azure', rule: when(aksList('first'), answer(200, '{"value":null}')), source: AKS, reason: 'invalid_response'},
  {fault: 'ARM managedClusters later page: 204', proxy: 'azure', rule: when(aksList('later'), {kind: 'answer', status: 204, body: ''}), source: AKS, reason: 'invalid_response'},
  {fault: 'ARM managedClusters first page: 206 {"value":[]}', proxy: 'azure', rule: when(aksList('first'), answer(206, '{"value":[]}')), source: AKS, reason: 'invalid_response'},
  {fault: 'ARM managedClusters: 403 AuthorizationFailed', proxy: 'azure', rule: when(aksList('first'), answer(403, '{"error":{"code":"AuthorizationFailed","message":"no"}}')), source: AKS, reason: 'access_denied'},
  {fault: 'ARM managedClusters: hang', proxy: 'azure', rule: when(aksList('first'), {kind: 'hang'}), source: AKS, reason: 'timeout'},
  {fault: 'ARM managedClusters: 500', proxy: 'azure', rule: when(aksList('later'), answer(500, '{"error":{"code":"InternalServerError","message":"boom"}}')), source: AKS, reason: 'other', once: false},
  {fault: 'ARM managedClusters: 429 Retry-After 0', proxy: 'azure', rule: when(aksList('first'), answer(429, '{"error":{"code":"TooManyRequests","message":"slow down"}}', {'retry-after': '0'})), source: AKS, reason: 'throttled', once: false},
  {fault: 'ARM managedClusters: connection reset', proxy: 'azure', rule: when(aksList('first'), {kind: 'reset'}), source: AKS, reason: 'other', once: false},
  {fault: 'ARM managedClusters: truncated answer', proxy: 'azure', rule: when(aksList('later'), {kind: 'truncate'}), source: AKS, reason: 'other', once: false},
  {fault: 'ARM managedClusters later page: 200 cut off mid-JSON', proxy: 'azure', rule: when(aksList('later'), answer(200, '{"value":[{"id":"/subscriptions/')), source: AKS, reason: 'invalid_response'},
  {fault: 'ARM managedClusters: an item that is not an object', proxy: 'azure', rule: when(aksList('first'), mutateJson((body) => ({...body, value: [...(body['value'] as unknown[]), 'a1']}))), source: AKS, reason: 'invalid_response'},
  // ARM names a failure in the body's `error`: a 200 list page carrying one is no listing, even with a value.
  {fault: 'ARM managedClusters first page: 200 {"value":[],"error":{...}}', proxy: 'azure', rule: when(aksList('first'), answer(200, '{"value":[],"error":{"code":"InternalServerError","message":"boom"}}')), source: AKS, reason: 'invalid_response'},
  {fault: 'ARM managedClusters later page: 200 {"error":{...},"value":[]}', proxy: 'azure', rule: when(aksList('later'), answer(200, '{"error":{"code":"ResourceCollectionRequestsThrottled","message":"later"},"value":[]}')), source: AKS, reason: 'invalid_response'},
  {fault: 'ARM subscriptions list: 200 {"value":[],"error":{...}}', proxy: 'azure', rule: when({operation: 'subscriptions.list'}, answer(200, '{"value":[],"error":{"code":"InternalServerError","message":"boom"}}')), source: AKS_ALL, reason: 'invalid_response'},
  {fault: 'ARM subscriptions list: 200 {}', proxy: 'azure', rule: when({operation: 'subscriptions.list'}, answer(200, '{}')), source: AKS_ALL, reason: 'invalid_response'},
  // A duplicate key in a listing is malformed (src/core/json-keys.ts): never the empty or last page JSON.parse would make of it.
  // The client's first call (the first page) goes the SDK's way; later pages the short, direct way (lean-read.ts).
  {fault: 'EKS ListClusters first page (SDK way): a second "clusters":[]', proxy: 'aws', rule: when(list('first'), appendMembers('"clusters":[]')), source: EAST, reason: 'invalid_response', message: duplicate('clusters')},
  {fault: 'EKS ListClusters first page (SDK way): a second "nextToken":null', proxy: 'aws', rule: when(list('first'), appendMembers('"nextToken":null')), source: EAST, reason: 'invalid_response', message: duplicate('nextToken')},
  {fault: 'EKS ListClusters first page (SDK way): an escaped second "clu\\u0073ters"', proxy: 'aws', rule: when(list('first'), appendMembers('"clu\\u0073ters":[]')), source: EAST, reason: 'invalid_response', message: duplicate('clusters')},
  {fault: 'EKS ListClusters later page (direct way): a second "clusters":[]', proxy: 'aws', rule: when(list('later'), appendMembers('"clusters":[]')), source: EAST, reason: 'invalid_response', message: duplicate('clusters')},
  {fault: 'EKS ListClusters later page (direct way): "nextToken" given twice', proxy: 'aws', rule: when(list('later'), appendMembers('"nextToken":"t9","nextToken":null')), source: EAST, reason: 'invalid_response', message: duplicate('nextToken')},
  {fault: 'ARM managedClusters first page: a second "value":[]', proxy: 'azure', rule: when(aksList('first'), appendMembers('"value":[]')), source: AKS, reason: 'invalid_response', message: duplicate('value')},
  {fault: 'ARM managedClusters first page: a second "nextLink":null', proxy: 'azure', rule: when(aksList('first'), appendMembers('"nextLink":null')), source: AKS, reason: 'invalid_response', message: duplicate('nextLink')},
  {fault: 'ARM managedClusters later page: a second "value":[]', proxy: 'azure', rule: when(aksList('later'), appendMembers('"value":[]')), source: AKS, reason: 'invalid_response', message: duplicate('value')},
  {fault: 'ARM subscriptions list: a second "value":[]', proxy: 'azure', rule: when({operation: 'subscriptions.list'}, appendMembers('"value":[]')), source: AKS_ALL, reason: 'invalid_response', message: duplicate('value')},
  {fault: 'ARM subscriptions list: 500', proxy: 'azure', rule: when({operation: 'subscriptions.list'}, answer(500, '{"error":{"code":"InternalServerError","message":"boom"}}')), source: AKS_ALL, reason: 'other', once: false},
];

const CLUSTER_ROWS: ClusterRow[] = [
  {fault: 'EKS DescribeCluster: status {"x":1}', proxy: 'aws', rule: when(describeB, editCluster({status: {x: 1}})), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: status "active"', proxy: 'aws', rule: when(describeB, editCluster({status: 'active'})), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: status "ACTIVE "', proxy: 'aws', rule: when(describeB, editCluster({status: 'ACTIVE '})), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: names another cluster', proxy: 'aws', rule: when(describeB, editCluster({name: 'zzz'})), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: 404 ResourceNotFoundException for a cluster ListClusters just listed', proxy: 'aws', rule: when(describeB, eksError(404, 'ResourceNotFoundException')), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: an ARN of another account', proxy: 'aws', rule: when(describeB, editCluster({arn: 'arn:aws:eks:us-east-1:999999999999:cluster/b'})), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: DELETING with "__type":"ResourceNotFoundException" in a 200', proxy: 'aws', rule: when(describeB, mutateJson((body) => ({__type: 'ResourceNotFoundException', cluster: {...(body['cluster'] as object), status: 'DELETING'}}))), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: DELETING in a 203 (a proxy rewrote the answer)', proxy: 'aws', rule: when(describeB, answer(203, JSON.stringify({cluster: {name: 'b', arn: 'arn:aws:eks:us-east-1:111111111111:cluster/b', status: 'DELETING'}}))), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: 200 {}', proxy: 'aws', rule: when(describeB, answer(200, '{}')), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: 200 truncated JSON', proxy: 'aws', rule: when(describeB, answer(200, '{"cluster":{"name":"b"')), cluster: B, effect: 'malformed'},
  {fault: 'EKS DescribeCluster: CA not base64 PEM', proxy: 'aws', rule: when(describeB, editCluster({certificateAuthority: {data: 'bW90byBjYQ=='}})), cluster: B, effect: 'invalid_ca'},
  {fault: 'EKS DescribeCluster: endpoint missing', proxy: 'aws', rule: when(describeB, editCluster({endpoint: null})), cluster: B, effect: 'no_endpoint'},
  {
    fault: 'ARM managedClusters: provisioningState "succeeded"',
    proxy: 'azure',
    rule: when(aksList('first'), mutateJson((body) => {
      const [first, ...rest] = body['value'] as Record<string, unknown>[];
      return {...body, value: [{...first, properties: {...(first?.['properties'] as object), provisioningState: 'succeeded'}}, ...rest]};
    })),
    cluster: A1,
    effect: 'malformed',
  },
  {
    fault: 'ARM managedClusters: tags a string',
    proxy: 'azure',
    rule: when(aksList('first'), mutateJson((body) => {
      const [first, ...rest] = body['value'] as Record<string, unknown>[];
      return {...body, value: [{...first, tags: 'env=prod'}, ...rest]};
    })),
    cluster: A1,
    effect: 'malformed',
  },
];

/** Drip rows wait out a 5 s cycle deadline twice; a loaded CI machine must not turn that into a failure. */
const ROW_TIMEOUT_MS = 90_000;

let h: Harness;
/** A fresh registry holding every cluster of the clean world: the config file and its text. */
let filledRegistry: () => Promise<{file: string; text: string}>;

beforeAll(async () => {
  h = await startHarness();
  filledRegistry = await goldenRegistry(h, 'row');
});
afterAll(async () => {
  await h.close();
});

function setFault(proxy: 'aws' | 'azure', rule: ProxyFaultRule | undefined): void {
  h.awsProxy.fault = proxy === 'aws' ? rule : undefined;
  h.armProxy.fault = proxy === 'azure' ? rule : undefined;
}

const kept = (json: Awaited<ReturnType<typeof once>>['json']): string[] =>
  json.clusters.filter((c) => c.action !== 'delete' && c.action !== 'skip').map((c) => c.name).sort();

describe('cloud faults that fail a source', () => {
  for (const row of SOURCE_ROWS) {
    it(row.fault, async () => {
      const {file, text} = await filledRegistry();
      setFault(row.proxy, row.rule);
      if (row.once !== false) {
        const {code, json} = await once(file);
        expect(code).toBe(1);
        expect(json.counts['delete']).toBe(0);
        expect(kept(json)).toEqual(ALL_NAMES);
        expect(json.sources.find((s) => s.id === row.source)?.error?.reason, JSON.stringify(json.sources)).toBe(row.reason);
        if (row.message !== undefined) expect(json.sources.find((s) => s.id === row.source)?.error?.message).toContain(row.message);
      }

      const service = await start(file, text);
      try {
        expect((await service.servers()).map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
        const failing = (await service.status()).sources.find((s) => s.id === row.source);
        expect(failing, JSON.stringify(await service.status())).toMatchObject({ok: false, last_error: {reason: row.reason}});
        if (row.message !== undefined) {
          expect(failing?.last_error?.message).toContain(row.message);
          expect(JSON.stringify(await service.status())).not.toContain(SECRET);
        }
        expect(metricValue(await service.metrics(), 'kube_discovery_source_errors_total', {reason: row.reason})).toBeGreaterThanOrEqual(1);
        expect(service.logs.filter((l) => l['event'] === 'source_failed' && l['source'] === row.source)).toHaveLength(1);
        if (row.deadline) {
          expect((await service.status()).last_cycle?.deadline_exceeded).toBe(true);
          expect(metricValue(await service.metrics(), 'kube_discovery_cycle_overruns_total', {})).toBeGreaterThanOrEqual(1);
          expect(service.logs.filter((l) => l['event'] === 'cycle_deadline')).toHaveLength(1);
        }

        setFault(row.proxy, undefined);
        await service.cycle();
        const servers = await service.servers();
        expect(servers.map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
        expect(servers.filter((s) => s.status?.stale).map((s) => s.metadata.name), JSON.stringify((await service.status()).sources)).toEqual([]);
        const after = await service.status();
        expect(after.sources.filter((s) => !s.ok), JSON.stringify(after)).toEqual([]);
      } finally {
        setFault(row.proxy, undefined);
        await service.stop();
      }
    }, ROW_TIMEOUT_MS);
  }
});

describe('cloud faults that spoil one cluster record', () => {
  for (const row of CLUSTER_ROWS) {
    it(row.fault, async () => {
      const {file, text} = await filledRegistry();
      setFault(row.proxy, row.rule);
      const {code, json} = await once(file);
      expect(code).toBe(0);
      expect(json.counts['delete']).toBe(0);
      expect(kept(json)).toEqual(ALL_NAMES);
      expect(json.clusters.find((c) => c.name === row.cluster && c.action !== 'skip')?.action).toBe(row.effect === 'malformed' ? 'stale' : 'update');

      const service = await start(file, text);
      try {
        const servers = await service.servers();
        expect(servers.map((s) => s.metadata.name).sort()).toEqual(ALL_NAMES);
        const entry = servers.find((s) => s.metadata.name === row.cluster);
        if (row.effect === 'malformed') {
          expect(entry?.status?.stale).toBe(true);
          expect(metricValue(await service.metrics(), 'kube_discovery_clusters', {state: 'skipped_invalid'})).toBeGreaterThanOrEqual(1);
          expect(service.logs.filter((l) => l['event'] === 'source_malformed_clusters')).toHaveLength(1);
        } else {
          expect(entry?.status?.target_health).toMatchObject({status: 'unhealthy', reason: row.effect});
          expect(service.logs.filter((l) => l['event'] === 'source_unreachable_clusters')).toHaveLength(1);
          await expect.poll(async () => metricValue(await service.metrics(), 'kube_discovery_clusters_by_health', {health: 'unhealthy'}), ROUND_TRIP).toBeGreaterThanOrEqual(1);
        }

        setFault(row.proxy, undefined);
        await service.cycle();
        const after = (await service.servers()).find((s) => s.metadata.name === row.cluster);
        expect(after?.status?.stale).toBeFalsy();
        expect(after?.status?.target_health?.reason).not.toBe(row.effect);
      } finally {
        setFault(row.proxy, undefined);
        await service.stop();
      }
    }, ROW_TIMEOUT_MS);
  }

  it('covers at least 40 distinct faults', () => {
    expect(new Set([...SOURCE_ROWS, ...CLUSTER_ROWS].map((r) => r.fault)).size).toBeGreaterThanOrEqual(40);
  });
});
