// Refusals counted in the ledger (src/ledger/refusals.ts), what the operator's BudgetExceeded Events are made from:
// every 402 is one in the refusing budget window's counter, nothing is written on the request path, the tally is
// written as one add per counter, close() writes what is left, and a flush that fails keeps its counts. A real
// redis-server and the embedded ledger.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { Registry } from 'prom-client';
import { openGatewaySpendGate } from '../../../src/cli/gateway-ledger.ts';
import {
  createEmbeddedLedger,
  createRedisLedger,
  createSpendGate,
  keySpace,
  type Ledger,
  readWindows,
  windowOf,
} from '../../../src/ledger/index.ts';
import { countRefusals } from '../../../src/ledger/refusals.ts';
import { readWindowFigures } from '../../../src/ledger/spend-view.ts';
import {
  budgetGuardrail,
  ctx,
  finished,
  K1,
  K2,
  ledgerAccount,
  MONDAY,
  USD,
  WS1,
} from '../../support/ledger-fixtures.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';
import { until } from '../../support/until.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const AT = MONDAY;
const keys = keySpace();

/** An account whose key K1 is under a 1 USD daily guardrail and whose workspace has a 3 USD daily budget. */
async function setup(ledger: Ledger) {
  const acc = ledgerAccount({
    guardrails: [budgetGuardrail('g-capped', 1, 'daily', false)],
    keyGuardrail: 'g-capped',
    workspace: { budgets: [{ interval: 'daily', limitUsd: 3 }], includeByokInBudgets: false },
  });
  // What the operator's spend pass does first for every account on Redis.
  await ledger.restore(keys.validated(acc.accountId), []);
  return acc;
}

let seq = 0;
const admit = (gate: ReturnType<typeof countRefusals>, acc: ReturnType<typeof ledgerAccount>, apiKey: string) =>
  gate.admit({
    ...ctx(acc, AT, apiKey, null),
    maximum: { id: `gen-refusal-${++seq}`, costMicros: 1, byokOnly: false },
  });

async function refusedCounts(ledger: Ledger, accountId: string): Promise<{ guardrail: number; workspace: number }> {
  const figures = await readWindowFigures(
    ledger,
    keys,
    accountId,
    [
      { scope: 'guardrail', id: 'g-capped', intervals: ['daily'] },
      { scope: 'workspace', id: WS1, intervals: ['daily', 'monthly'] },
    ],
    AT,
  );
  expect(figures.get(`workspace/${WS1}`)?.monthly?.refused).toBe(0); // only the refusing window counts
  return {
    guardrail: figures.get('guardrail/g-capped')?.daily?.refused ?? -1,
    workspace: figures.get(`workspace/${WS1}`)?.daily?.refused ?? -1,
  };
}

describe.each(['redis', 'embedded'] as const)('%s ledger', (backend) => {
  test('each refusal counts once in the refusing budget window, written off the request path, one add per counter', async () => {
    const ledger = backend === 'redis' ? await createRedisLedger({ url: redis.url }) : createEmbeddedLedger();
    const adds: number[] = [];
    // Counts the ledger calls the wrapper makes (the ledger itself does the work).
    const counted: Ledger = {
      ...ledger,
      backend: ledger.backend,
      read: (k) => ledger.read(k),
      reserve: (r) => ledger.reserve(r),
      restore: (v, e) => ledger.restore(v, e),
      release: (i, a, h) => ledger.release(i, a, h),
      close: () => ledger.close(),
      add: (inc, settle, id) => (adds.push(inc.length), ledger.add(inc, settle, id)),
    };
    const gate = countRefusals(createSpendGate(ledger), counted, keys, { flushMs: 60_000 });
    const acc = await setup(ledger);
    await gate.record(finished(ctx(acc, AT, K1, null), 2 * USD, false)); // K1's guardrail (1 USD) reached; workspace at 2 of 3
    for (let i = 0; i < 25; i++) expect((await admit(gate, acc, K1)).allowed).toBe(false);
    // The request path wrote nothing: the tally waits for its flush.
    expect(adds).toEqual([]);
    expect(await refusedCounts(ledger, acc.accountId)).toEqual({ guardrail: 0, workspace: 0 });
    await gate.flushRefusals();
    expect(adds).toEqual([1]);
    expect(await refusedCounts(ledger, acc.accountId)).toEqual({ guardrail: 25, workspace: 0 });

    // K2 has no guardrail: the workspace budget refuses it once it is reached.
    await gate.record(finished(ctx(acc, AT, K2, null), 1 * USD, false));
    for (let i = 0; i < 3; i++) expect((await admit(gate, acc, K2)).allowed).toBe(false);
    expect((await admit(gate, acc, K1)).allowed).toBe(false);
    await gate.flushRefusals();
    expect(adds).toEqual([1, 1, 1]);
    expect(await refusedCounts(ledger, acc.accountId)).toEqual({ guardrail: 26, workspace: 3 });
    // Refusals are not spend: the budget windows' spend is what was recorded, nothing more.
    const spend = await readWindows(
      ledger,
      keys,
      acc.accountId,
      [{ scope: 'workspace', id: WS1, intervals: ['daily'] }],
      AT,
    );
    expect(spend.get(`workspace/${WS1}`)?.daily).toMatchObject({ nonByokMicros: 3 * USD, byokMicros: 0 });
    await gate.close();
  });
});

test('a flush that fails (Redis down) keeps its counts for the next one', async () => {
  const ledger = await createRedisLedger({ url: redis.url });
  const gate = countRefusals(createSpendGate(ledger), ledger, keys, { flushMs: 60_000 });
  const acc = await setup(ledger);
  await gate.record(finished(ctx(acc, AT, K1, null), 2 * USD, false));
  for (let i = 0; i < 4; i++) expect((await admit(gate, acc, K1)).allowed).toBe(false);
  await redis.kill();
  await gate.flushRefusals(); // fails: kept
  await redis.start();
  const reader = await createRedisLedger({ url: redis.url });
  const key = keys.refused(acc.accountId, 'guardrail', 'g-capped', windowOf('daily', AT));
  try {
    // The restarted Redis lost everything (no AOF here): a 4 can only be the kept tally, written once reconnected.
    await until(
      'the kept refusals written',
      async () => {
        await gate.flushRefusals();
        const [n] = await reader.read([key]);
        return n !== 0 ? n : undefined;
      },
      20_000,
      200,
    );
    expect(await reader.read([key])).toEqual([4]);
  } finally {
    await reader.close();
    await gate.close();
  }
}, 60_000);

test('close() writes the refusals still tallied', async () => {
  const ledger = await createRedisLedger({ url: redis.url });
  const gate = countRefusals(createSpendGate(ledger), ledger, keys, { flushMs: 60_000 });
  const acc = await setup(ledger);
  await gate.record(finished(ctx(acc, AT, K1, null), 2 * USD, false));
  for (let i = 0; i < 2; i++) expect((await admit(gate, acc, K1)).allowed).toBe(false);
  await gate.close();
  const reader = await createRedisLedger({ url: redis.url });
  try {
    expect(await refusedCounts(reader, acc.accountId)).toEqual({ guardrail: 2, workspace: 0 });
  } finally {
    await reader.close();
  }
});

test("the gateway's own wiring (cli/gateway-ledger.ts) counts its refusals", async () => {
  const gate = await openGatewaySpendGate({
    redisUrl: redis.url,
    journalDir: 'none',
    registry: new Registry(),
    logger: pino({ level: 'silent' }),
  });
  const reader = await createRedisLedger({ url: redis.url });
  try {
    const acc = await setup(reader);
    await gate.record(finished(ctx(acc, AT, K1, null), 2 * USD, false));
    for (let i = 0; i < 3; i++)
      expect(
        (
          await gate.admit({
            ...ctx(acc, AT, K1, null),
            maximum: { id: `gen-wired-${i}`, costMicros: 1, byokOnly: false },
          })
        ).allowed,
      ).toBe(false);
    await gate.close();
    expect(await refusedCounts(reader, acc.accountId)).toEqual({ guardrail: 3, workspace: 0 });
  } finally {
    await reader.close();
  }
});
