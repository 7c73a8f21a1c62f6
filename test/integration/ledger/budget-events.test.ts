// A request a budget refuses (402) raises a throttled Warning on the Guardrail or Workspace whose budget refused it
// (BudgetExceeded once the limit is reached, RequestOverBudget for a request that needed more than was left), and
// Workspace/Guardrail status says what is counted and what is BYOK. Real kube-apiserver, real redis-server, the
// operator's spend pass; refusals counted by the gateway's wrapped spend gate.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { EventsV1Api, type EventsV1Event } from '@kubernetes/client-node';
import { compileAccount } from '../../../src/compiler/index.ts';
import type { CompiledAccount } from '../../../src/domain/index.ts';
import { createRedisLedger, createSpendGate, keySpace, windowOf } from '../../../src/ledger/index.ts';
import { countRefusals } from '../../../src/ledger/refusals.ts';
import { createAccountStateSource, VerdictStore } from '../../../src/operator/verdicts.ts';
import { crApi, createTestNamespace, kubectl, testKubeConfig } from '../../support/kube.ts';
import { finished, USD } from '../../support/ledger-fixtures.ts';
import { type CapturedOperator, type Obj, startTestOperator } from '../../support/operator.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';
import { until } from '../../support/until.ts';

const CAPPED_KEY = 'c'.repeat(64);
const PLAIN_KEY = 'd'.repeat(64);
const PILOT_KEY = 'e'.repeat(64);
/** Long enough that the second burst below lands inside it even on a loaded machine. */
const THROTTLE_MS = 12_000;
let redis: RedisServer;
let ns: string;
let run: CapturedOperator;
let gate: ReturnType<typeof countRefusals>;
let account: CompiledAccount;
let seq = 0;

beforeAll(async () => {
  redis = await startRedis();
  ns = await createTestNamespace('budget-events');
  const routing = await createTestNamespace('routing');
  await crApi('accounts', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Account',
    metadata: { name: 'acme' },
    spec: { plan: 'pay-as-you-go' },
  });
  await crApi('guardrails', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Guardrail',
    metadata: { name: 'capped' },
    spec: { budget: { limitUsd: 5, resetInterval: 'daily' } },
  });
  // BYOK excluded from the workspace budgets: its BYOK spend must still show, beside what is counted.
  await crApi('workspaces', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Workspace',
    metadata: { name: 'main' },
    spec: { default: true, budgets: { daily: 12, monthly: 1000 } },
  });
  await crApi('gatewayapikeys', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'GatewayAPIKey',
    metadata: { name: 'capped-key' },
    spec: { hash: CAPPED_KEY, guardrail: 'capped' },
  });
  await crApi('gatewayapikeys', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'GatewayAPIKey',
    metadata: { name: 'plain-key' },
    spec: { hash: PLAIN_KEY },
  });
  // The issue's case: one dollar a day, and a request that could cost 1.28 USD.
  await crApi('guardrails', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Guardrail',
    metadata: { name: 'pilot' },
    spec: { budget: { limitUsd: 1, resetInterval: 'daily' } },
  });
  await crApi('gatewayapikeys', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'GatewayAPIKey',
    metadata: { name: 'pilot-key' },
    spec: { hash: PILOT_KEY, guardrail: 'pilot' },
  });
  run = await startTestOperator(testKubeConfig(), {
    routingNamespace: routing,
    watchNamespaces: [ns],
    identity: 'budget-events-test-operator',
    spendStatus: { redisUrl: redis.url, intervalMs: 200, eventThrottleMs: THROTTLE_MS },
  });
  await run.op.waitForIdle();
  const ledger = await createRedisLedger({ url: redis.url });
  // The gateway's wiring (cli/gateway-ledger.ts): the spend gate with its refusals counted in the ledger.
  gate = countRefusals(createSpendGate(ledger), ledger, keySpace(), { flushMs: 100 });
  account = await until('account compiled with its workspace', () => {
    const a = compileAccount(createAccountStateSource(run.op.informers, new VerdictStore()).snapshot(ns));
    return a.workspaces.length === 1 && a.guardrails.length === 2 && a.apiKeys.length === 3 ? a : undefined;
  });
});

afterAll(async () => {
  await gate?.close();
  await run?.op.stop();
  await redis?.stop();
});

const who = (apiKeyHash: string) => ({ apiKeyHash, workspaceId: account.workspaces[0]!.id, userId: null });

/** Asks admission like the gateway does (a reservation of `costMicros`); true when refused. */
async function refused(apiKeyHash: string, costMicros = 1): Promise<boolean> {
  const d = await gate.admit({
    account,
    who: who(apiKeyHash),
    at: new Date(),
    maximum: { id: `gen-be-${++seq}`, costMicros, byokOnly: false },
  });
  if (d.allowed) await gate.release(d.reservation);
  return !d.allowed;
}

async function budgetEvents(name: string, reason = 'BudgetExceeded'): Promise<EventsV1Event[]> {
  const list = await testKubeConfig()
    .makeApiClient(EventsV1Api)
    .listNamespacedEvent({ namespace: ns, fieldSelector: `regarding.name=${name}` });
  return list.items.filter((e) => e.reason === reason);
}

const count = (e: EventsV1Event) => e.series?.count ?? 1;
/** From an Event's first write to its last, by the apiserver's clock (whole seconds: creation and managedFields). */
const writeGapMs = (e: EventsV1Event) =>
  Math.max(...(e.metadata?.managedFields ?? []).map((f) => new Date(f.time as unknown as string).getTime())) -
  new Date(e.metadata!.creationTimestamp as unknown as string).getTime();

test('Workspace and Guardrail status show counted spend and BYOK spend side by side', async () => {
  const c = { account, who: who(PLAIN_KEY), at: new Date() };
  await gate.record(finished(c, 2 * USD, false)); // shared capacity: counted
  await gate.record(finished(c, 40 * USD, true)); // BYOK: excluded from the budgets, still shown
  const ws = await until('Workspace spend with BYOK', async () => {
    const o = (await crApi('workspaces', ns).get('main')) as Obj;
    const daily = (o.status?.spend as { windows?: { interval: string; byokUsd: number }[] } | undefined)?.windows?.find(
      (w) => w.interval === 'daily',
    );
    return daily?.byokUsd === 40 ? o : undefined;
  });
  const today = windowOf('daily', new Date());
  expect((ws.status?.spend as { windows?: unknown[] } | undefined)?.windows?.[0]).toEqual({
    interval: 'daily',
    window: today.id,
    resetsAt: new Date(today.endsAt!).toISOString(),
    limitUsd: 12,
    nonByokUsd: 2,
    byokUsd: 40,
    countedUsd: 2,
    blocked: false,
  });

  const table = await kubectl('get', 'byokws', 'main', '-n', ns);
  const [header, row] = table
    .trim()
    .split('\n')
    .map((l) => l.split(/\s{2,}/));
  expect(header).toEqual([
    'NAME',
    'DEFAULT',
    'COUNTED TODAY USD',
    'BYOK TODAY USD',
    'DAILY LIMIT',
    'COUNTED MONTH USD',
    'MONTHLY LIMIT',
    'BYOK COUNTED',
    'BLOCKED',
    'READY',
    'REASON',
    'AGE',
  ]);
  expect(row!.slice(0, 9)).toEqual(['main', 'true', '2', '40', '12', '2', '1000', 'false', 'false']);
  const wide = await kubectl('get', 'byokws', 'main', '-n', ns, '-o', 'wide');
  expect(wide.split('\n')[0]).toContain('BYOK MONTH USD');
  const gr = await kubectl('get', 'byokgr', 'capped', '-n', ns);
  expect(gr.split('\n')[0]!.split(/\s{2,}/)).toEqual([
    'NAME',
    'COUNTED USD',
    'BYOK USD',
    'LIMIT USD',
    'INTERVAL',
    'BYOK COUNTED',
    'BLOCKED',
    'READY',
    'REASON',
    'AGE',
  ]);

  // kubectl explain says which is which.
  const explain = await kubectl('explain', 'workspaces.status.spend.windows.byokUsd');
  expect(explain.replace(/\s+/g, ' ')).toContain('Counted against the limit only when includeByokInBudgets is true');
});

test('refusals make one throttled BudgetExceeded Warning per budget window, with a count, on the object whose budget refused', async () => {
  // The guardrail (5 USD a day, BYOK excluded) is reached; the workspace (12 USD) is not yet.
  const c = { account, who: who(CAPPED_KEY), at: new Date() };
  await gate.record(finished(c, 6 * USD, false)); // counted: 6 USD on the guardrail, 8 USD on the workspace
  for (let i = 0; i < 7; i++) expect(await refused(CAPPED_KEY)).toBe(true);
  await gate.flushRefusals();

  const first = await until(
    'BudgetExceeded on Guardrail capped',
    async () => {
      const events = await budgetEvents('capped');
      return events.length > 0 && count(events[0]!) === 7 ? events : undefined;
    },
    20_000,
    100,
  );
  expect(first).toHaveLength(1);
  const e = first[0]!;
  expect(e).toMatchObject({
    type: 'Warning',
    reason: 'BudgetExceeded',
    action: 'RefuseRequests',
    reportingController: 'byok.gateway.dev/operator',
    reportingInstance: 'budget-events-test-operator',
  });
  expect(e.regarding).toMatchObject({
    kind: 'Guardrail',
    name: 'capped',
    namespace: ns,
    apiVersion: 'byok.gateway.dev/v1alpha1',
  });
  const today = windowOf('daily', new Date());
  expect(e.note).toBe(
    `Guardrail capped: today's (UTC) daily budget of 5 USD (shared-capacity charges count, BYOK is excluded) is reached; requests under it are refused with 402; it resets at ${new Date(today.endsAt!).toISOString().replace('.000Z', 'Z')} (UTC)`,
  );
  expect(e.note).not.toContain(today.id);
  expect(e.note).not.toContain(CAPPED_KEY);
  // Nothing on the workspace: its budget did not refuse (the guardrail did, first).
  expect(await budgetEvents('main')).toEqual([]);

  // Three more refusals inside the throttle period: status counts them at once, the Event waits.
  for (let i = 0; i < 3; i++) expect(await refused(CAPPED_KEY)).toBe(true);
  await gate.flushRefusals();
  await until('status.spend.window.refusedRequests = 10', async () => {
    const o = (await crApi('guardrails', ns).get('capped')) as Obj;
    return (o.status?.spend as { window?: { refusedRequests?: number } } | undefined)?.window?.refusedRequests === 10
      ? o
      : undefined;
  });
  // Still the one Event. It shows the three only after the throttle period, by the apiserver's clock (its write
  // times), not a stopwatch here: a read that came late on a loaded machine may already see them.
  const during = await budgetEvents('capped');
  expect(during).toHaveLength(1);
  expect(count(during[0]!) === 7 || writeGapMs(during[0]!) >= THROTTLE_MS - 1000).toBe(true);

  // After the throttle period, the same Event (not a second one) shows all ten.
  const after = await until(
    'the series counts 10',
    async () => {
      const events = await budgetEvents('capped');
      return events.length === 1 && count(events[0]!) === 10 ? events : undefined;
    },
    THROTTLE_MS + 15_000,
    200,
  );
  expect(after[0]!.metadata?.name).toBe(e.metadata?.name);
  expect(writeGapMs(after[0]!)).toBeGreaterThanOrEqual(THROTTLE_MS - 1000);
  expect(new Date(after[0]!.series!.lastObservedTime).getTime()).toBeGreaterThan(
    new Date(after[0]!.eventTime as unknown as string).getTime(),
  );

  const described = await kubectl('describe', 'guardrail', 'capped', '-n', ns);
  expect(described).toMatch(
    /Warning\s+BudgetExceeded\s+.*\(x10 over .*\)\s+byok\.gateway\.dev\/operator\s+Guardrail capped: today's \(UTC\) daily budget of 5 USD/,
  );
}, 90_000);

test('a workspace budget that refuses gets its own Event; a single refusal is a plain Event', async () => {
  // The plain key has no guardrail: only the workspace's daily 12 USD applies (8 counted so far).
  const c = { account, who: who(PLAIN_KEY), at: new Date() };
  await gate.record(finished(c, 4 * USD, false)); // 12 counted: reached
  expect(await refused(PLAIN_KEY)).toBe(true);
  await gate.flushRefusals();
  const events = await until(
    'BudgetExceeded on Workspace main',
    async () => {
      const list = await budgetEvents('main');
      return list.length > 0 ? list : undefined;
    },
    20_000,
    100,
  );
  expect(events).toHaveLength(1);
  expect(events[0]!.series ?? null).toBeNull();
  expect(events[0]!.regarding).toMatchObject({ kind: 'Workspace', name: 'main' });
  expect(events[0]!.note).toContain(
    "Workspace main: today's (UTC) daily budget of 12 USD (shared-capacity charges count, BYOK is excluded) is reached",
  );
  const ws = (await crApi('workspaces', ns).get('main')) as Obj;
  const daily = (ws.status?.spend as { windows?: { interval: string }[] } | undefined)?.windows?.find(
    (w) => w.interval === 'daily',
  );
  expect(daily).toMatchObject({ refusedRequests: 1, countedUsd: 12, byokUsd: 40, blocked: true });
  const described = await kubectl('describe', 'workspace', 'main', '-n', ns);
  expect(described).toMatch(/Warning\s+BudgetExceeded\s+.*Workspace main: today's \(UTC\) daily budget of 12 USD/);
}, 60_000);

test('a request that would need more than is left is a RequestOverBudget Event, not "the budget is reached"', async () => {
  // Nothing counted on the pilot guardrail; the request could cost 1.28 USD of its 1 USD.
  expect(await refused(PILOT_KEY, 1_280_089)).toBe(true);
  await gate.flushRefusals();
  const events = await until(
    'RequestOverBudget on Guardrail pilot',
    async () => {
      const list = await budgetEvents('pilot', 'RequestOverBudget');
      return list.length > 0 ? list : undefined;
    },
    20_000,
    100,
  );
  expect(events).toHaveLength(1);
  expect(events[0]!.note).toContain(
    "Guardrail pilot: today's (UTC) daily budget of 1 USD (shared-capacity charges count, BYOK is excluded) is not reached, but requests that would need more than it has left were refused with 402",
  );
  expect(events[0]!.note).not.toMatch(/window d|d20\d\d-/);
  expect(await budgetEvents('pilot')).toEqual([]);
  const o = (await crApi('guardrails', ns).get('pilot')) as Obj;
  expect((o.status?.spend as { window?: unknown } | undefined)?.window).toMatchObject({
    refusedRequests: 1,
    overBudgetRequests: 1,
    countedUsd: 0,
    blocked: false,
  });
}, 60_000);

test('a new leader counts from what status mirrored: its own Event shows only the refusals after the change', async () => {
  await run.op.stop();
  run = await startTestOperator(testKubeConfig(), {
    routingNamespace: await createTestNamespace('routing'),
    watchNamespaces: [ns],
    identity: 'budget-events-second-leader',
    spendStatus: { redisUrl: redis.url, intervalMs: 200, eventThrottleMs: THROTTLE_MS },
  });
  await run.op.waitForIdle();
  // A few passes over the unchanged counters: nothing is new, so no Event from the new leader.
  await new Promise((r) => setTimeout(r, 1000));
  expect((await budgetEvents('capped')).map((e) => [e.reportingInstance, count(e)])).toEqual([
    ['budget-events-test-operator', 10],
  ]);
  for (let i = 0; i < 2; i++) expect(await refused(CAPPED_KEY)).toBe(true);
  await gate.flushRefusals();
  const events = await until(
    "the new leader's Event",
    async () => {
      const list = await budgetEvents('capped');
      return list.length === 2 ? list : undefined;
    },
    20_000,
    100,
  );
  // An events.k8s.io Event's reportingInstance is immutable: each leader writes its own series.
  expect(events.map((e) => [e.reportingInstance, count(e)]).sort()).toEqual([
    ['budget-events-second-leader', 2],
    ['budget-events-test-operator', 10],
  ]);
  const o = (await crApi('guardrails', ns).get('capped')) as Obj;
  expect((o.status?.spend as { window?: { refusedRequests?: number } } | undefined)?.window?.refusedRequests).toBe(12);
}, 60_000);
