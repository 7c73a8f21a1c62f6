// Cost of the spend journal per fsync policy: the synchronous append a finished request pays before
// its response completes (none: write(2) into the page cache; batch: the same, plus one fdatasync per 10 ms on the
// thread pool; record: write + fdatasync before returning), the bytes per record, and the heap a record waiting in
// the replay queue keeps. Then the spend gate on a real redis-server, admit + record per request, without a
// journal and with each policy, in the same run. Prints one JSON object. Run: node bench/journal.ts [seconds]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { FinishedRequest } from '../src/contract/spend-gate.ts';
import type { CompiledAccount } from '../src/domain/index.ts';
import { type FsyncPolicy, SpendJournal } from '../src/ledger/gate/journal.ts';
import { GateKeyCache } from '../src/ledger/gate/key-cache.ts';
import { spendRecordOf } from '../src/ledger/gate/spend-record.ts';
import { createRedisLedger, createSpendGate, keySpace } from '../src/ledger/index.ts';
import { startRedis } from '../test/support/redis.ts';

setFlagsFromString('--expose_gc');
const gc = runInNewContext('gc') as () => void;
const seconds = Number(process.argv[2] ?? '2');
const POLICIES: FsyncPolicy[] = ['none', 'batch', 'record'];
const hash = 'b'.repeat(64);
const budget = { limitUsd: 1e9, resetInterval: 'daily' as const, includeByokInBudgets: true };
const policy = { requireZdr: false, denyDataCollection: false, allowedProviders: null, ignoredProviders: [] };
// bench/ledger.ts's account: two guardrails with budgets and a workspace budget on every interval (the most keys).
const account: CompiledAccount = {
  namespace: 'bench',
  accountId: 'bench-journal',
  plan: 'pay-as-you-go',
  privacy: { denyDataCollection: false, alwaysZdr: false },
  credentials: [],
  guardrails: [
    { id: 'g-key', name: 'g-key', budget, dataPolicy: policy },
    { id: 'g-member', name: 'g-member', budget, dataPolicy: policy },
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
const finished = (n: number, at: Date, reservation: FinishedRequest['reservation'] = null): FinishedRequest => ({
  account,
  who,
  at,
  generationId: `gen-${n}-${'x'.repeat(28)}`,
  model: 'm',
  endpointId: 'e',
  provider: 'openai',
  byokCredentialId: n % 2 ? 'c' : null,
  promptTokens: 1,
  completionTokens: 1,
  listCostMicros: 1234,
  reservation,
});
const quantiles = (samples: number[]) => {
  samples.sort((a, b) => a - b);
  const q = (p: number) =>
    Number(((samples[Math.min(samples.length - 1, Math.floor(p * samples.length))] ?? 0) * 1000).toFixed(1));
  return { n: samples.length, p50Us: q(0.5), p99Us: q(0.99), maxUs: q(1) };
};

/** Appends (record, then its ack, as the gate does when the ledger answers) for `seconds`. */
async function appends(fsync: FsyncPolicy) {
  const dir = mkdtempSync(join(tmpdir(), 'byok-bench-journal-'));
  const { journal } = SpendJournal.open({ dir, fsync });
  const cache = new GateKeyCache(keySpace());
  const at = new Date();
  const samples: number[] = [];
  const until = performance.now() + seconds * 1000;
  let n = 0;
  while (performance.now() < until) {
    const plan = spendRecordOf(finished(n++, at), cache);
    const t = performance.now();
    journal.record(plan);
    samples.push(performance.now() - t);
    journal.done(plan.id);
    // Let the batched fsync and the ack flush run, as between requests.
    if (n % 64 === 0) await new Promise((r) => setImmediate(r));
  }
  const bytesPerRecord = Math.round(journal.stats.bytes / journal.stats.appends);
  const { fsyncs } = journal.stats;
  journal.close();
  rmSync(dir, { recursive: true, force: true });
  return { ...quantiles(samples), appendsPerSecond: Math.round(n / seconds), fsyncs, bytesPerRecord };
}

/** Heap kept per record waiting in the replay queue (its plan; the promise callbacks are extra, ~100 B). */
function queuedHeapBytes(): number {
  const cache = new GateKeyCache(keySpace());
  const at = new Date();
  const keep: unknown[] = [];
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < 50_000; i++) keep.push(spendRecordOf(finished(i, at), cache));
  gc();
  const per = (process.memoryUsage().heapUsed - before) / keep.length;
  return Math.round(per);
}

async function gateOnRedis(url: string, fsync: FsyncPolicy | null, round: number) {
  const dir = mkdtempSync(join(tmpdir(), 'byok-bench-gate-journal-'));
  const ledger = await createRedisLedger({ url });
  await ledger.restore(keySpace().validated(account.accountId), []);
  const gate = createSpendGate(ledger, fsync ? { journal: { dir, fsync } } : {});
  let i = 0;
  const one = async () => {
    const at = new Date();
    const id = `gen-g${fsync ?? 'off'}-r${round}-${i++}`;
    const d = await gate.admit({ account, who, at, maximum: { id, costMicros: 5000, byokOnly: false } });
    if (!d.allowed) throw new Error('blocked');
    await gate.record({ ...finished(i, at, d.reservation), generationId: id });
  };
  for (let w = 0; w < 300; w++) await one();
  const samples: number[] = [];
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) {
    const t = performance.now();
    await one();
    samples.push(performance.now() - t);
  }
  let done = 0;
  const stopAt = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (performance.now() < stopAt) {
        await one();
        done++;
      }
    }),
  );
  await gate.close();
  rmSync(dir, { recursive: true, force: true });
  const q = quantiles(samples);
  return {
    sequentialP50Ms: q.p50Us / 1000,
    sequentialP99Ms: q.p99Us / 1000,
    concurrent64PerSecond: Math.round(done / seconds),
  };
}

const journalAppend: Record<string, unknown> = {};
for (const p of POLICIES) journalAppend[p] = await appends(p);
const redis = await startRedis();
const gate: Record<string, unknown> = {};
try {
  // Interleaved twice, so load drift on a shared machine hits every variant alike.
  for (const round of [1, 2]) {
    for (const p of [null, ...POLICIES])
      gate[`${p ?? 'no journal'} #${round}`] = await gateOnRedis(redis.url, p, round);
  }
} finally {
  await redis.stop();
}
process.stdout.write(
  `${JSON.stringify({
    what: 'spend journal append per fsync policy (the synchronous part a request pays), bytes per record, heap per queued record; the spend gate on Redis (admit with reservation + record) without and with a journal',
    secondsPerMeasurement: seconds,
    journalAppend,
    queuedRecordHeapBytes: queuedHeapBytes(),
    gateOnRedis: gate,
  })}\n`,
);
