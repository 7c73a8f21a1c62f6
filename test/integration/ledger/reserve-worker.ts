// One "gateway replica" for the two-process reservation test: `count` requests at once, each admitted with its
// maximum cost reserved, served after a short upstream delay, and recorded (settling the reservation). Prints how many
// were admitted as JSON on stdout.
import { readFileSync } from 'node:fs';
import type { CompiledAccount } from '../../../src/domain/index.ts';
import { createRedisLedger, createSpendGate } from '../../../src/ledger/index.ts';

const [url, accountFile, countText, costText, tag, atText] = process.argv.slice(2);
if (!url || !accountFile || !countText || !costText || !tag || !atText)
  throw new Error('usage: reserve-worker <redis-url> <account.json> <count> <cost-micros> <tag> <request time, ISO>');
const account = JSON.parse(readFileSync(accountFile, 'utf8')) as CompiledAccount;
const cost = Number(costText);
// The parent's request time: a burst across midnight UTC would otherwise meet two daily windows, each with room.
const at = new Date(atText);
const gate = createSpendGate(await createRedisLedger({ url }));
const who = { apiKeyHash: account.apiKeys[0]?.hash ?? '', workspaceId: account.workspaces[0]?.id ?? '', userId: null };
// Both processes start their burst at the same wall-clock moment, so their admissions interleave.
const startAt = Number(process.env.BURST_AT ?? Date.now());
await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now())));
const results = await Promise.all(
  Array.from({ length: Number(countText) }, async (_, i) => {
    const id = `gen-${tag}-${i}`;
    const d = await gate.admit({ account, who, at, maximum: { id, costMicros: cost, byokOnly: false } });
    if (!d.allowed) return false;
    await new Promise((r) => setTimeout(r, 20));
    await gate.record({
      account,
      who,
      at,
      generationId: id,
      model: 'acme/chat',
      endpointId: 'openai',
      provider: 'openai',
      byokCredentialId: null,
      promptTokens: 1,
      completionTokens: 1,
      listCostMicros: cost,
      reservation: d.reservation,
    });
    return true;
  }),
);
await gate.close();
process.stdout.write(JSON.stringify({ admitted: results.filter(Boolean).length }));
