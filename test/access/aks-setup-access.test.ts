/**
 * setup_access_for_principal_id end to end: the service, the real `@azure/arm-authorization`
 * client and the wire-level ARM fake (managed clusters and role assignments).
 */
import {mkdtemp, rm} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterEach, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {AKS_RBAC_READER_ROLE_ID, ownedDescription} from '../../src/access/aks-setup-step.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {startFakeArm, type ArmFaultHook, type FakeArm} from '../fakes/arm-server.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import {ArmWorld, managedClusterId} from '../fakes/arm-world.ts';
import {captureIo} from '../helpers/env.ts';
import {runCycle, servedBy} from '../helpers/service-cycles.ts';

const SUB = '3f2b8d6e-0000-4000-8000-00000000a11c';
const PRINCIPAL = '0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6';
const OTHER = '99999999-8888-4777-8666-555555555555';
const READER = `/subscriptions/${SUB}/providers/Microsoft.Authorization/roleDefinitions/${AKS_RBAC_READER_ROLE_ID}`;
const WRITES = ['roleAssignments.create', 'roleAssignments.delete'] as const;

interface Harness {
  readonly world: ArmWorld;
  readonly arm: FakeArm;
  svc: RunningService;
  cycle(): Promise<void>;
  servers(): Promise<Record<string, KubeServer>>;
  writes(): number;
  /** Role assignments at a cluster's scope, as ARM holds them. */
  assignmentsOn(cluster: string): ReturnType<ArmWorld['roleAssignments']>;
  close(): Promise<void>;
}

let open: Harness | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});

const scopeOf = (name: string): string => managedClusterId({subscriptionId: SUB, resourceGroup: 'rg-a', name}).replace('/resourcegroups/', '/resourceGroups/');

/** Clusters `rbac-*` use Azure RBAC for Kubernetes authorization, `entra-*` Entra ID with Kubernetes RBAC. */
async function harness(names: readonly string[], fault?: ArmFaultHook, seed?: (world: ArmWorld) => void): Promise<Harness> {
  const world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB});
  for (const name of names) {
    world.addCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name, location: 'eastus', tags: {env: 'prod'}, aadProfile: {managed: true, enableAzureRBAC: name.startsWith('rbac-')}, server: 'https://127.0.0.1:9'});
  }
  seed?.(world);
  const arm = await startFakeArm({world, ...(fault ? {fault} : {})});
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-aks-setup-'));
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: setup
  poll_interval: 1h
  azure:
    - types: [aks]
      subscriptions: ["${SUB}"]
      resource_manager_endpoint: ${arm.url}
      setup_access_for_principal_id: ${PRINCIPAL}
probe: {timeout: 2s}
storage: {type: sqlite, path: ${path.join(dir, 'registry.db')}}
http: {listen_addr: "127.0.0.1:0"}
`,
    'setup.yaml',
  );
  const svc = await startService({
    config,
    io: captureIo().io,
    clock: systemClock,
    logger: silentLogger,
    discovery: {
      azure: {
        credential: fakeTokenCredential(),
        clientOptions: {tlsOptions: {ca: arm.caPem}, retryOptions: {maxRetries: 0, retryDelayInMs: 1, maxRetryDelayInMs: 5}},
        policyOptions: {requestTimeoutMs: 1_000},
      },
    },
  });
  const h: Harness = {
    world,
    arm,
    svc,
    cycle: () => runCycle(h.svc),
    servers: () => servedBy(h.svc, (s) => s.spec.cluster.spec.azure?.resource_name ?? s.metadata.name),
    writes: () => WRITES.reduce((n, operation) => n + arm.stats.count({operation}), 0),
    assignmentsOn: (cluster) => world.roleAssignments().filter((a) => a.scope.toLowerCase() === scopeOf(cluster).toLowerCase()),
    async close() {
      await h.svc.stop({deregister: false});
      await arm.close();
      await rm(dir, {recursive: true, force: true});
    },
  };
  open = h;
  // The first cycle starts on its own; subscribing right after start cannot miss it.
  await svc.nextCycle();
  return h;
}

describe('setup_access_for_principal_id', () => {
  it('assigns AKS RBAC Reader on Azure RBAC clusters within one cycle, leaves the others alone, and writes nothing in the next cycle', async () => {
    const h = await harness(['rbac-1', 'rbac-2', 'rbac-3', 'entra-1']);
    for (const name of ['rbac-1', 'rbac-2', 'rbac-3']) {
      expect(h.assignmentsOn(name)).toEqual([
        expect.objectContaining({principalId: PRINCIPAL, roleDefinitionId: READER, description: ownedDescription('setup')}),
      ]);
    }
    expect(h.assignmentsOn('entra-1')).toEqual([]);
    expect(Object.keys(await h.servers()).sort()).toEqual(['entra-1', 'rbac-1', 'rbac-2', 'rbac-3']);
    expect(h.writes()).toBe(3);
    const metrics = await (await fetch(`${h.svc.url}/metrics`)).text();
    expect(metrics).toMatch(/kube_discovery_access_setup_total\{cloud="Azure",outcome="configured"\} 3/);

    const reads = h.arm.stats.count({operation: 'roleAssignments.list'});
    await h.cycle();
    await h.cycle();
    expect(h.writes()).toBe(3);
    // Cached per cluster: steady-state cycles do not even read.
    expect(h.arm.stats.count({operation: 'roleAssignments.list'})).toBe(reads);
    expect(h.world.roleAssignments()).toHaveLength(3);
  });

  it('deletes its own assignment when the cluster is deleted, and never one somebody else made', async () => {
    // Before discovery: the principal already holds the reader role on rbac-theirs, granted by an operator.
    const h = await harness(['rbac-mine', 'rbac-theirs', 'rbac-stays'], undefined, (world) => {
      world.putRoleAssignment({name: '11111111-2222-4333-8444-555555555555', scope: scopeOf('rbac-theirs'), principalId: PRINCIPAL, roleDefinitionId: READER, description: 'granted by the platform team'});
      world.putRoleAssignment({name: '22222222-2222-4333-8444-555555555555', scope: scopeOf('rbac-mine'), principalId: OTHER, roleDefinitionId: READER});
    });
    expect(h.arm.stats.count({operation: 'roleAssignments.create'})).toBe(2);
    expect(h.assignmentsOn('rbac-theirs')).toEqual([expect.objectContaining({description: 'granted by the platform team'})]);
    const ours = h.assignmentsOn('rbac-mine').find((a) => a.principalId === PRINCIPAL);
    expect(ours?.description).toBe(ownedDescription('setup'));

    h.world.removeCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'rbac-mine'});
    h.world.removeCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'rbac-theirs'});
    await h.cycle();
    expect(Object.keys(await h.servers())).toEqual(['rbac-stays']);
    // Ours is gone; the other principal's assignment on the same cluster and the operator's grant stay.
    expect(h.assignmentsOn('rbac-mine')).toEqual([expect.objectContaining({principalId: OTHER})]);
    expect(h.assignmentsOn('rbac-theirs')).toEqual([expect.objectContaining({description: 'granted by the platform team'})]);
    expect(h.assignmentsOn('rbac-stays')).toHaveLength(1);
    expect(h.arm.stats.count({operation: 'roleAssignments.delete'})).toBe(1);
  });

  it('keeps the cluster registered with the failed call and the missing permission when the assignment is refused', async () => {
    const h = await harness(['rbac-1'], (ctx) => (ctx.operation === 'roleAssignments.create' ? {status: 403} : undefined));
    const server = (await h.servers())['rbac-1'];
    expect(server).toBeDefined();
    expect(server?.status?.target_health).toMatchObject({status: 'unhealthy', reason: 'access_setup_failed'});
    expect(server?.status?.target_health?.message).toMatch(/failed at RoleAssignments\.create: AuthorizationFailed: .*lacks Microsoft\.Authorization\/roleAssignments\/write/);

    // Granted: the next cycle sets it up and the message goes.
    h.arm.setFault(undefined);
    await h.cycle();
    expect(h.assignmentsOn('rbac-1')).toHaveLength(1);
    expect((await h.servers())['rbac-1']?.status?.target_health?.reason).not.toBe('access_setup_failed');
  });

  it.each([
    ['an error status', {status: 500}],
    ['a malformed answer', {malformed: true}],
    ['a hang', {hang: true}],
  ] as const)('a role assignment listing that fails with %s writes nothing and keeps the cluster', async (_label, fault) => {
    const h = await harness(['rbac-1'], (ctx) => (ctx.operation === 'roleAssignments.list' ? fault : undefined));
    expect((await h.servers())['rbac-1']?.status?.target_health?.message).toMatch(/RoleAssignments\.listForPrincipal/);
    expect(h.writes()).toBe(0);
    expect(h.world.roleAssignments()).toEqual([]);
  });

  it.each([
    ['an error status', {status: 503}],
    ['a malformed answer', {malformed: true}],
    ['a hang', {hang: true}],
  ] as const)('cleanup that fails with %s deletes nothing and retries next cycle', async (_label, fault) => {
    const h = await harness(['rbac-gone', 'rbac-stays']);
    h.world.removeCluster({subscriptionId: SUB, resourceGroup: 'rg-a', name: 'rbac-gone'});
    h.arm.setFault((ctx) => (ctx.operation === 'roleAssignments.get' ? fault : undefined));
    await h.cycle();
    expect(h.assignmentsOn('rbac-gone')).toHaveLength(1);
    h.arm.setFault(undefined);
    await h.cycle();
    expect(h.assignmentsOn('rbac-gone')).toEqual([]);
    expect(h.assignmentsOn('rbac-stays')).toHaveLength(1);
  });

  it('a failed cluster listing deletes no assignment: the cluster stays, stale, and so does its access', async () => {
    const h = await harness(['rbac-1']);
    for (const fault of [{status: 500}, {malformed: true}] as const) {
      h.arm.setFault((ctx) => (ctx.operation.startsWith('managedClusters.list') ? fault : undefined));
      await h.cycle();
      expect((await h.servers())['rbac-1']?.status?.stale).toBe(true);
      expect(h.assignmentsOn('rbac-1')).toHaveLength(1);
    }
    expect(h.arm.stats.count({operation: 'roleAssignments.delete'})).toBe(0);
  });
});
