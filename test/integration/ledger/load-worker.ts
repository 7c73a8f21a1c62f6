// One "gateway replica" for the two-process test: records `count` requests against a shared Redis ledger with
// `concurrency` in flight, then prints what the gate answered (sums) as JSON on stdout.
import { readFileSync } from 'node:fs';
import type { FinishedRequest } from '../../../src/contract/spend-gate.ts';
import type { CompiledAccount } from '../../../src/domain/index.ts';
import { createRedisLedger, createSpendGate } from '../../../src/ledger/index.ts';

const [url, accountFile, countText, concurrencyText, tag, atText] = process.argv.slice(2);
if (!url || !accountFile || !countText || !concurrencyText || !tag || !atText)
  throw new Error('usage: load-worker <redis-url> <account.json> <count> <concurrency> <tag> <request time, ISO>');
const account = JSON.parse(readFileSync(accountFile, 'utf8')) as CompiledAccount;
const count = Number(countText);
// The parent's request time: both replicas and the reader meter into the same windows.
const at = new Date(atText);

/** Request i: every third is shared capacity (i+1 micros); the others BYOK of 200 USD each. */
function requestCost(i: number): { byok: boolean; listCostMicros: number } {
  return i % 3 === 0 ? { byok: false, listCostMicros: i + 1 } : { byok: true, listCostMicros: 200_000_000 };
}

const ledger = await createRedisLedger({ url });
const gate = createSpendGate(ledger);
const sums = { fee: 0, free: 0, charged: 0, requests: 0 };
let next = 0;
async function lane(): Promise<void> {
  for (;;) {
    const i = next++;
    if (i >= count) return;
    const { byok, listCostMicros } = requestCost(i);
    const req: FinishedRequest = {
      account,
      who: { apiKeyHash: account.apiKeys[0]?.hash ?? '', workspaceId: account.workspaces[0]?.id ?? '', userId: 'u1' },
      at,
      generationId: `gen-${tag}-${i}`,
      model: 'acme/chat',
      endpointId: 'openai',
      provider: 'openai',
      byokCredentialId: byok ? 'cred-1' : null,
      promptTokens: 1,
      completionTokens: 1,
      listCostMicros,
    };
    const spend = await gate.record(req);
    sums.fee += spend.feeMicros;
    sums.free += spend.freeListCostMicros;
    sums.charged += spend.chargedMicros;
    sums.requests += 1;
  }
}
await Promise.all(Array.from({ length: Number(concurrencyText) }, lane));
await gate.close();
process.stdout.write(JSON.stringify(sums));
