// Two gateway processes (separate Node child processes) share one Redis under concurrent load: no increment is
// lost, and the free allowance is crossed exactly once across both (the month-to-date before each request is exact).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { byokFeeMicros, FREE_ALLOWANCE_MICROS } from '../../../src/domain/billing.ts';
import { createRedisLedger, keySpace, readAccountMonth, readWindows } from '../../../src/ledger/index.ts';
import { budgetGuardrail, ledgerAccount, MONDAY, WS1 } from '../../support/ledger-fixtures.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';

const run = promisify(execFile);
let redis: RedisServer;
const dir = mkdtempSync(join(tmpdir(), 'byok-ledger-procs-'));
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const requestCost = (i: number) =>
  i % 3 === 0 ? { byok: false, listCostMicros: i + 1 } : { byok: true, listCostMicros: 200_000_000 };

test('N requests across two processes on one Redis: every total equals the sum', async () => {
  const PER_PROCESS = 300;
  const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 1_000_000, 'daily', true)], keyGuardrail: 'g' });
  const file = join(dir, 'account.json');
  writeFileSync(file, JSON.stringify(acc));
  const worker = join(import.meta.dirname, 'load-worker.ts');
  const outputs = await Promise.all(
    ['a', 'b'].map((tag) =>
      run(process.execPath, [worker, redis.url, file, String(PER_PROCESS), '16', tag, MONDAY.toISOString()], {
        timeout: 90_000,
      }),
    ),
  );
  const sums = outputs.map(
    (o) => JSON.parse(o.stdout) as { fee: number; free: number; charged: number; requests: number },
  );
  expect(sums.map((s) => s.requests)).toEqual([PER_PROCESS, PER_PROCESS]);

  let byokTotal = 0;
  let sharedTotal = 0;
  for (let i = 0; i < PER_PROCESS; i++) {
    const c = requestCost(i);
    if (c.byok) byokTotal += c.listCostMicros;
    else sharedTotal += c.listCostMicros;
  }
  byokTotal *= 2;
  sharedTotal *= 2;
  const keys = keySpace();
  const ledger = await createRedisLedger({ url: redis.url });
  try {
    const month = await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', MONDAY);
    expect(month.byokListCostMicros).toBe(byokTotal); // 400 BYOK requests of 200 USD = 80,000 USD
    expect(month.chargedMicros).toBe(sharedTotal);
    const allowance = FREE_ALLOWANCE_MICROS['pay-as-you-go'];
    // Exactly the allowance was free across both processes, and the fees are 5% of everything above it (the
    // allowance is a multiple of the request size, so no request straddles and per-request rounding is exact).
    expect(sums[0]!.free + sums[1]!.free).toBe(allowance);
    expect(month.feesMicros).toBe(sums[0]!.fee + sums[1]!.fee);
    expect(month.feesMicros).toBe(byokFeeMicros(byokTotal - allowance));
    expect(sums[0]!.charged + sums[1]!.charged).toBe(sharedTotal);
    const spend = await readWindows(
      ledger,
      keys,
      acc.accountId,
      [
        { scope: 'guardrail', id: 'g', intervals: ['daily', 'weekly', 'monthly', 'lifetime'] },
        { scope: 'workspace', id: WS1, intervals: ['daily', 'lifetime'] },
      ],
      MONDAY,
    );
    for (const w of Object.values(spend.get('guardrail/g') ?? {}))
      expect(w).toEqual({ nonByokMicros: sharedTotal, byokMicros: byokTotal });
    expect(spend.get(`workspace/${WS1}`)).toEqual({
      daily: { nonByokMicros: sharedTotal, byokMicros: byokTotal },
      lifetime: { nonByokMicros: sharedTotal, byokMicros: byokTotal },
    });
  } finally {
    await ledger.close();
  }
}, 120_000);

// Reservations across processes: 200 concurrent requests over two replicas against a limit that fits 50
// admit at most 50, and the spend recorded equals the sum of the served requests.
test('reservations across two processes: 200 at once against a limit that fits 50 admit 50; the recorded spend is their sum', async () => {
  const ks = keySpace;
  const COST = 100_000;
  const acc = ledgerAccount({
    workspace: { budgets: [{ interval: 'daily', limitUsd: 5 }], includeByokInBudgets: false },
  });
  const file = join(dir, 'account-reserve.json');
  writeFileSync(file, JSON.stringify(acc));
  const ledger = await createRedisLedger({ url: redis.url });
  try {
    await ledger.restore(ks().validated(acc.accountId), []); // what the operator's spend pass does
    const worker = join(import.meta.dirname, 'reserve-worker.ts');
    const env = { ...process.env, BURST_AT: String(Date.now() + 1500) };
    const outputs = await Promise.all(
      ['a', 'b'].map((tag) =>
        run(process.execPath, [worker, redis.url, file, '100', String(COST), tag, MONDAY.toISOString()], {
          timeout: 60_000,
          env,
        }),
      ),
    );
    const admitted = outputs.map((o) => (JSON.parse(o.stdout) as { admitted: number }).admitted);
    process.stderr.write(`[two processes] reservations: ${admitted.join(' + ')} of 200 admitted where 50 fit\n`);
    expect(admitted[0]! + admitted[1]!).toBe(50);
    const spend = await readWindows(
      ledger,
      ks(),
      acc.accountId,
      [{ scope: 'workspace', id: WS1, intervals: ['daily'] }],
      MONDAY,
    );
    expect(spend.get(`workspace/${WS1}`)?.daily?.nonByokMicros).toBe(50 * COST);
  } finally {
    await ledger.close();
  }
}, 120_000);
