// Cost of the spend ledger per request: one admit (budget read) plus one record (the increments of every window)
// for the embedded ledger and for Redis (a real redis-server on loopback), in the same run. Sequential latency
// (what one request adds) and throughput with 64 requests in flight. The account has an API-key guardrail with a
// budget, a member guardrail and a workspace budget on every interval, so admit reads and record writes the most
// keys a request can have; every second request is BYOK (two round trips on Redis: list cost, then fee).
// Prints one JSON object. Run: node bench/ledger.ts [seconds-per-measurement]
import { performance } from 'node:perf_hooks';
import type { CompiledAccount } from '../src/domain/index.ts';
import type { FinishedRequest } from '../src/gateway/spend-gate.ts';
import { createEmbeddedLedger, createRedisLedger, createSpendGate, type Ledger } from '../src/ledger/index.ts';
import { startRedis } from '../test/support/redis.ts';

const seconds = Number(process.argv[2] ?? '2');
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

async function measure(ledger: Ledger) {
  const gate = createSpendGate(ledger);
  let i = 0;
  const one = async () => {
    const at = new Date();
    const n = i++;
    const decision = await gate.admit({ account, who, at });
    if (!decision.allowed) throw new Error('bench budget blocked');
    const req: FinishedRequest = { account, who, at, generationId: `g${n}`, model: 'm', endpointId: 'e', provider: 'openai', byokCredentialId: n % 2 ? 'c' : null, promptTokens: 1, completionTokens: 1, listCostMicros: 1234 };
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
  const q = (p: number) => Number((samples[Math.min(samples.length - 1, Math.floor(p * samples.length))] ?? 0).toFixed(4));
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
    sequential: { requests: samples.length, meanMs: Number((samples.reduce((a, b) => a + b, 0) / samples.length).toFixed(4)), p50Ms: q(0.5), p99Ms: q(0.99) },
    concurrent64: { requestsPerSecond: Math.round(done / elapsed) },
  };
}

const redis = await startRedis();
try {
  const embedded = await measure(createEmbeddedLedger());
  const viaRedis = await measure(await createRedisLedger({ url: redis.url }));
  process.stdout.write(
    `${JSON.stringify({
      what: 'admit + record per request (2 guardrails with budgets, workspace budget on 4 intervals, half BYOK)',
      secondsPerMeasurement: seconds,
      embedded,
      redis: viaRedis,
      addedByRedisMs: { p50: Number((viaRedis.sequential.p50Ms - embedded.sequential.p50Ms).toFixed(4)), p99: Number((viaRedis.sequential.p99Ms - embedded.sequential.p99Ms).toFixed(4)) },
    })}\n`,
  );
} finally {
  await redis.stop();
}
