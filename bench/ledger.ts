// Cost of the spend ledger per request: one admit (budget read) plus one record (the increments of every window)
// for the embedded ledger and for Redis (a real redis-server on loopback), in the same run. Sequential latency
// (what one request adds) and throughput with 64 requests in flight. The account has an API-key guardrail with a
// budget, a member guardrail and a workspace budget on every interval, so admit reads and record writes the most
// keys a request can have; every second request is BYOK (two round trips on Redis: list cost, then fee).
// With and without reservations (admit reserves the request's maximum cost, record settles it), and the
// concurrency scenario: N requests at once over two gates (two replicas' worth of connections) against a workspace
// budget that fits 50, with and without reservations: admitted count and overshoot.
// Prints one JSON object. Run: node bench/ledger.ts [seconds-per-measurement]
import { performance } from 'node:perf_hooks';
import type { FinishedRequest } from '../src/contract/spend-gate.ts';
import type { CompiledAccount } from '../src/domain/index.ts';
import {
  createEmbeddedLedger,
  createRedisLedger,
  createSpendGate as currentGate,
  keySpace,
  type Ledger,
} from '../src/ledger/index.ts';
import { startRedis } from '../test/support/redis.ts';

const seconds = Number(process.argv[2] ?? '2');
// LEDGER_BENCH_GATE=<module exporting createSpendGate>: measure another build of the gate (e.g. the one before a
// refactor) in the same conditions.
const createSpendGate: typeof currentGate = process.env.LEDGER_BENCH_GATE
  ? ((await import(process.env.LEDGER_BENCH_GATE)) as { createSpendGate: typeof currentGate }).createSpendGate
  : currentGate;
const hash = 'b'.repeat(64);
const budget = (limitUsd: number) => ({ limitUsd, resetInterval: 'daily' as const, includeByokInBudgets: true });
const policy = { requireZdr: false, denyDataCollection: false, allowedProviders: null, ignoredProviders: [] };
const account: CompiledAccount = {
  namespace: 'bench',
  accountId: 'bench-account',
  plan: 'pay-as-you-go',
  privacy: { denyDataCollection: false, alwaysZdr: false },
  credentials: [],
  guardrails: [
    { id: 'g-key', name: 'g-key', budget: budget(1e9), dataPolicy: policy },
    { id: 'g-member', name: 'g-member', budget: budget(1e9), dataPolicy: policy },
  ],
  workspaces: [
    {
      id: 'ws',
      name: 'ws',
      displayName: null,
      isDefault: true,
      budgets: (['daily', 'weekly', 'monthly', 'lifetime'] as const).map((interval) => ({ interval, limitUsd: 1e9 })),
      includeByokInBudgets: true,
      defaultGuardrailId: null,
      members: [{ userId: 'u1', guardrailId: 'g-member' }],
    },
  ],
  apiKeys: [{ hash, workspaceId: 'ws', guardrailId: 'g-key', expiresAt: null }],
};
const who = { apiKeyHash: hash, workspaceId: 'ws', userId: 'u1' };

/** What the operator's spend pass does for each account on a running Redis: validate it (nothing to restore here). */
const validate = (ledger: Ledger, accountId: string) => ledger.restore(keySpace().validated(accountId), []);

async function measure(ledger: Ledger, reserve: boolean) {
  await validate(ledger, account.accountId);
  const gate = createSpendGate(ledger);
  let i = 0;
  const one = async () => {
    const at = new Date();
    const n = i++;
    const generationId = `g${reserve ? 'r' : ''}${n}`;
    const decision = await gate.admit({
      account,
      who,
      at,
      ...(reserve ? { maximum: { id: generationId, costMicros: 5000, byokOnly: false } } : {}),
    });
    if (!decision.allowed) throw new Error('bench budget blocked');
    const req: FinishedRequest = {
      account,
      who,
      at,
      generationId,
      model: 'm',
      endpointId: 'e',
      provider: 'openai',
      byokCredentialId: n % 2 ? 'c' : null,
      promptTokens: 1,
      completionTokens: 1,
      listCostMicros: 1234,
      reservation: decision.reservation,
    };
    await gate.record(req);
  };
  for (let w = 0; w < 500; w++) await one(); // warm-up
  const samples: number[] = [];
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) {
    const t = performance.now();
    await one();
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  const q = (p: number) =>
    Number((samples[Math.min(samples.length - 1, Math.floor(p * samples.length))] ?? 0).toFixed(4));
  let done = 0;
  const started = performance.now();
  const stopAt = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (performance.now() < stopAt) {
        await one();
        done++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  await gate.close();
  return {
    sequential: {
      requests: samples.length,
      meanMs: Number((samples.reduce((a, b) => a + b, 0) / samples.length).toFixed(4)),
      p50Ms: q(0.5),
      p99Ms: q(0.99),
    },
    concurrent64: { requestsPerSecond: Math.round(done / elapsed) },
  };
}

/** N requests at once over the gates against a limit that fits 50: each is admitted, takes 20 ms upstream, is recorded. */
async function concurrency(makeLedgers: () => Promise<Ledger[]>, n: number, reserve: boolean) {
  const COST = 100_000;
  const ledgers = await makeLedgers();
  const gates = ledgers.map((l) => createSpendGate(l));
  const acct: CompiledAccount = {
    ...account,
    accountId: `burst-${n}-${reserve}-${Math.random()}`,
    guardrails: [],
    apiKeys: [{ hash, workspaceId: 'ws', guardrailId: null, expiresAt: null }],
    workspaces: [
      {
        ...account.workspaces[0]!,
        members: [],
        budgets: [{ interval: 'daily', limitUsd: 5 }],
        includeByokInBudgets: false,
      },
    ],
  };
  const w = { apiKeyHash: hash, workspaceId: 'ws', userId: null };
  await validate(ledgers[0]!, acct.accountId);
  let seq = 0;
  const results = await Promise.all(
    Array.from({ length: n }, async (_, k) => {
      const gate = gates[k % gates.length]!;
      const at = new Date();
      const id = `burst-${++seq}`;
      const d = await gate.admit({
        account: acct,
        who: w,
        at,
        ...(reserve ? { maximum: { id, costMicros: COST, byokOnly: false } } : {}),
      });
      if (!d.allowed) return false;
      await new Promise((r) => setTimeout(r, 20));
      await gate.record({
        account: acct,
        who: w,
        at,
        generationId: id,
        model: 'm',
        endpointId: 'e',
        provider: 'openai',
        byokCredentialId: null,
        promptTokens: 1,
        completionTokens: 1,
        listCostMicros: COST,
        reservation: d.reservation,
      });
      return true;
    }),
  );
  for (const g of gates) await g.close();
  const admitted = results.filter(Boolean).length;
  return { concurrency: n, fit: 50, admitted, overshootPercent: Math.round(((admitted - 50) / 50) * 1000) / 10 };
}

const redis = await startRedis();
try {
  const embedded = await measure(createEmbeddedLedger(), false);
  const embeddedReserve = await measure(createEmbeddedLedger(), true);
  const viaRedis = await measure(await createRedisLedger({ url: redis.url }), false);
  const viaRedisReserve = await measure(await createRedisLedger({ url: redis.url }), true);
  const scenarios: Record<string, unknown[]> = { embedded: [], redis: [] };
  for (const n of [10, 50, 200, 1000]) {
    for (const reserve of [false, true]) {
      // Embedded is one replica by design: one gate; Redis: two gates (two replicas' connections).
      scenarios.embedded!.push({
        reservations: reserve,
        ...(await concurrency(async () => [createEmbeddedLedger()], n, reserve)),
      });
      scenarios.redis!.push({
        reservations: reserve,
        ...(await concurrency(
          async () => Promise.all([0, 1].map(() => createRedisLedger({ url: redis.url }))),
          n,
          reserve,
        )),
      });
    }
  }
  process.stdout.write(
    `${JSON.stringify({
      what: 'admit + record per request (2 guardrails with budgets, workspace budget on 4 intervals, half BYOK), without and with reservations; and N concurrent requests over two gates against a limit that fits 50',
      secondsPerMeasurement: seconds,
      embedded,
      embeddedWithReservations: embeddedReserve,
      redis: viaRedis,
      redisWithReservations: viaRedisReserve,
      addedByRedisMs: {
        p50: Number((viaRedis.sequential.p50Ms - embedded.sequential.p50Ms).toFixed(4)),
        p99: Number((viaRedis.sequential.p99Ms - embedded.sequential.p99Ms).toFixed(4)),
      },
      addedByReservationsMs: {
        embedded: {
          p50: Number((embeddedReserve.sequential.p50Ms - embedded.sequential.p50Ms).toFixed(4)),
          p99: Number((embeddedReserve.sequential.p99Ms - embedded.sequential.p99Ms).toFixed(4)),
        },
        redis: {
          p50: Number((viaRedisReserve.sequential.p50Ms - viaRedis.sequential.p50Ms).toFixed(4)),
          p99: Number((viaRedisReserve.sequential.p99Ms - viaRedis.sequential.p99Ms).toFixed(4)),
        },
      },
      concurrency: scenarios,
    })}\n`,
  );
} finally {
  await redis.stop();
}
