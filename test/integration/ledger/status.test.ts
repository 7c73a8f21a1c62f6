// Spend recorded by a gateway into the shared Redis ledger shows up in Account, Workspace and Guardrail status
// (written by the operator's leader under its own field manager) and in `kubectl get byokacct,byokws,byokgr`.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { compileAccount } from '../../../src/compiler/index.ts';
import { createRedisLedger, createSpendGate, type LedgerSpendGate } from '../../../src/ledger/index.ts';
import { SPEND_FIELD_MANAGER } from '../../../src/operator/spend/spend-status-writer.ts';
import { createAccountStateSource, VerdictStore } from '../../../src/operator/verdicts.ts';
import { crApi, createTestNamespace, kubectl, testKubeConfig } from '../../support/kube.ts';
import { finished, USD } from '../../support/ledger-fixtures.ts';
import { type CapturedOperator, cond, type Obj, startTestOperator } from '../../support/operator.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';
import { until } from '../../support/until.ts';

const HASH = 'a'.repeat(64);
let redis: RedisServer;
let ns: string;
let run: CapturedOperator;
let gate: LedgerSpendGate;

beforeAll(async () => {
  redis = await startRedis();
  ns = await createTestNamespace('acme');
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
  await crApi('guardrails', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Guardrail',
    metadata: { name: 'open' },
    spec: { dataPolicy: { requireZdr: false } },
  });
  await crApi('workspaces', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Workspace',
    metadata: { name: 'main' },
    spec: {
      default: true,
      budgets: { daily: 50000, monthly: 100000 },
      includeByokInBudgets: true,
      members: [{ userId: 'u1', guardrail: 'open' }],
    },
  });
  await crApi('gatewayapikeys', ns).create({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'GatewayAPIKey',
    metadata: { name: 'ci' },
    spec: { hash: HASH, guardrail: 'capped' },
  });
  run = await startTestOperator(testKubeConfig(), {
    routingNamespace: routing,
    watchNamespaces: [ns],
    spendStatus: { redisUrl: redis.url, intervalMs: 200 },
  });
  await run.op.waitForIdle();
  gate = createSpendGate(await createRedisLedger({ url: redis.url }));
});

afterAll(async () => {
  await gate?.close();
  await run?.op.stop();
  await redis?.stop();
});

test('spend against limits is visible in status and kubectl get, next to the reconcilers’ conditions', async () => {
  const account = compileAccount(createAccountStateSource(run.op.informers, new VerdictStore()).snapshot(ns));
  const now = new Date();
  const who = { apiKeyHash: HASH, workspaceId: account.workspaces[0]?.id ?? '', userId: 'u1' };
  const c = { account, who, at: now };
  expect(await gate.admit(c)).toEqual({ allowed: true, reservation: null });
  await gate.record(finished(c, 6 * USD, false)); // shared capacity: counts everywhere
  await gate.record(finished(c, 25_010 * USD, true)); // BYOK: 10 USD above the allowance, fee 0.5 USD
  const blocked = await gate.admit(c);
  expect(!blocked.allowed && blocked.blockedBy.id).toBe(account.guardrails.find((g) => g.name === 'capped')?.id);

  const acct = await until('Account.status.spend', async () => {
    const o = (await crApi('accounts', ns).get('acme')) as Obj;
    return (o.status?.spend as { byokFeesUsd?: number } | undefined)?.byokFeesUsd === 0.5 ? o : undefined;
  });
  expect(acct.status?.spend).toMatchObject({
    byokListCostUsd: 25_010,
    byokFeesUsd: 0.5,
    sharedChargesUsd: 6,
    freeAllowanceUsd: 25_000,
    freeAllowanceRemainingUsd: 0,
  });
  expect(cond(acct, 'Ready')?.status).toBe('True');

  const capped = await until('Guardrail capped blocked', async () => {
    const o = (await crApi('guardrails', ns).get('capped')) as Obj;
    return (o.status?.spend as { blocked?: boolean } | undefined)?.blocked ? o : undefined;
  });
  expect(capped.status?.spend).toMatchObject({
    includeByokInBudgets: false,
    blocked: true,
    window: { interval: 'daily', limitUsd: 5, nonByokUsd: 6, byokUsd: 25_010, countedUsd: 6, blocked: true },
  });
  const open = await until('Guardrail open spend', async () => {
    const o = (await crApi('guardrails', ns).get('open')) as Obj;
    return o.status?.spend ? o : undefined;
  });
  // No budget: its monthly window is shown, never blocked.
  expect(open.status?.spend).toMatchObject({
    blocked: false,
    window: { interval: 'monthly', nonByokUsd: 6, byokUsd: 25_010, countedUsd: 6, blocked: false },
  });
  const ws = await until('Workspace spend', async () => {
    const o = (await crApi('workspaces', ns).get('main')) as Obj;
    return o.status?.spend ? o : undefined;
  });
  const windows =
    (
      ws.status?.spend as
        | { windows?: { interval: string; countedUsd: number; blocked: boolean; limitUsd?: number }[] }
        | undefined
    )?.windows ?? [];
  expect(windows.map((w) => [w.interval, w.countedUsd, w.limitUsd ?? null, w.blocked])).toEqual([
    ['daily', 25_016, 50_000, false],
    ['weekly', 25_016, null, false],
    ['monthly', 25_016, 100_000, false],
    ['lifetime', 25_016, null, false],
  ]);

  const table = await kubectl('get', 'byokacct,byokws,byokgr', '-n', ns);
  const line = (prefix: string) =>
    table
      .split('\n')
      .find((l) => l.startsWith(prefix))
      ?.split(/\s{2,}/) ?? [];
  const header = (word: string) =>
    table
      .split('\n')
      .find((l) => l.startsWith('NAME') && l.includes(word))
      ?.split(/\s{2,}/) ?? [];
  expect(header('BYOK MTD USD')).toEqual([
    'NAME',
    'PLAN',
    'BYOK MTD USD',
    'FEES USD',
    'ALLOWANCE LEFT USD',
    'READY',
    'REASON',
    'AGE',
  ]);
  expect(line('account.byok.gateway.dev/acme').slice(0, 5)).toEqual([
    'account.byok.gateway.dev/acme',
    'pay-as-you-go',
    '25010',
    '0.5',
    '0',
  ]);
  // Counted spend beside BYOK spend, and whether BYOK counts.
  expect(line('guardrail.byok.gateway.dev/capped').slice(0, 7)).toEqual([
    'guardrail.byok.gateway.dev/capped',
    '6',
    '25010',
    '5',
    'daily',
    'false',
    'true',
  ]);
  expect(line('workspace.byok.gateway.dev/main').slice(0, 9)).toEqual([
    'workspace.byok.gateway.dev/main',
    'true',
    '25016',
    '25010',
    '50000',
    '25016',
    '100000',
    'true',
    'false',
  ]);

  // Field ownership: status.spend belongs to the spend field manager, conditions to the reconcilers.
  const managed = JSON.parse(
    await kubectl('get', 'guardrail', 'capped', '-n', ns, '-o', 'json', '--show-managed-fields'),
  ) as {
    metadata: {
      managedFields: { manager: string; subresource?: string; fieldsV1: { 'f:status'?: Record<string, unknown> } }[];
    };
  };
  const byManager = new Map(
    managed.metadata.managedFields
      .filter((f) => f.subresource === 'status')
      .map((f) => [f.manager, Object.keys(f.fieldsV1['f:status'] ?? {}).sort()]),
  );
  expect(byManager.get(SPEND_FIELD_MANAGER)).toEqual(['f:spend']);
  expect(byManager.get('byok-operator')).toEqual(expect.arrayContaining(['f:conditions']));
  expect(byManager.get('byok-operator')).not.toContain('f:spend');
});

test('a reconcile after a spec change keeps the spend, and unchanged spend is not rewritten', async () => {
  const before = (await crApi('guardrails', ns).get('capped')) as Obj;
  await crApi('guardrails', ns).replace('capped', { ...before, spec: { ...before.spec, displayName: 'Capped CI' } });
  const after = await until('reconciled generation 2', async () => {
    const o = (await crApi('guardrails', ns).get('capped')) as Obj;
    return cond(o, 'Ready')?.observedGeneration === 2 ? o : undefined;
  });
  expect((after.status?.spend as { blocked?: boolean } | undefined)?.blocked).toBe(true);

  await run.op.waitForIdle();
  await new Promise((r) => setTimeout(r, 500));
  const settled = (await crApi('guardrails', ns).get('capped')) as Obj;
  await new Promise((r) => setTimeout(r, 1000)); // five spend intervals
  const later = (await crApi('guardrails', ns).get('capped')) as Obj;
  expect(later.metadata.resourceVersion).toBe(settled.metadata.resourceVersion);
});

// Resets, end to end: the operator's spend pass is what rebuilds a restarted Redis from status.spend. A kill -9
// and an empty restart never lower the published spend, the counters come back from the mirror, the Account gets a
// LedgerReset Warning, and budgeted admission fails closed until then.
test('a Redis restart: budgets closed, counters rebuilt from status.spend by the operator, a Warning on the Account, status never lowered', async () => {
  const { EventsV1Api } = await import('@kubernetes/client-node');
  const { keySpace, LedgerResetError, LedgerUnavailableError, readAccountMonth } = await import(
    '../../../src/ledger/index.ts'
  );
  const account = compileAccount(createAccountStateSource(run.op.informers, new VerdictStore()).snapshot(ns));
  const before = ((await crApi('accounts', ns).get('acme')) as Obj).status?.spend as { byokListCostUsd: number };
  expect(before.byokListCostUsd).toBe(25_010);
  await redis.kill();
  await redis.start();
  const at = new Date();
  const c = { account, who: { apiKeyHash: HASH, workspaceId: account.workspaces[0]?.id ?? '', userId: 'u1' }, at };
  // Right after the restart: unreachable, not validated yet, or (once rebuilt) blocked by the capped guardrail; never
  // admitted on the empty ledger.
  const early = await gate
    .admit({ ...c, maximum: { id: 'gen-after-reset', costMicros: 1, byokOnly: false } })
    .catch((e: unknown) => e);
  if (!(early instanceof LedgerResetError) && !(early instanceof LedgerUnavailableError))
    expect(early).toMatchObject({ allowed: false });
  const warning = await until(
    'LedgerReset Warning on the Account',
    async () => {
      const list = await testKubeConfig()
        .makeApiClient(EventsV1Api)
        .listNamespacedEvent({ namespace: ns, fieldSelector: 'regarding.name=acme' });
      return list.items.find((e) => e.reason === 'LedgerReset' && e.type === 'Warning');
    },
    20_000,
    200,
  );
  expect(warning.note).toMatch(
    /^the spend ledger restarted and lost spend: \d+ counters were rebuilt from status\.spend \(the largest by 25010 USD\)/,
  );
  const ledger = await createRedisLedger({ url: redis.url });
  try {
    const month = await readAccountMonth(ledger, keySpace(), account.accountId, 'pay-as-you-go', at);
    expect(month.byokListCostMicros).toBe(25_010 * USD);
  } finally {
    await ledger.close();
  }
  // The published spend was never lowered by the empty Redis.
  const after = ((await crApi('accounts', ns).get('acme')) as Obj).status?.spend as { byokListCostUsd: number };
  expect(after.byokListCostUsd).toBe(25_010);
}, 60_000);
