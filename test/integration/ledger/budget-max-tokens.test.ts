// Budgets that serve ordinary SDK calls (docs/ledger.md, "Requests without max_tokens"): two real gateway processes
// on one real redis-server, a model whose longest answer (128,000 tokens, 1.28 USD) is far past a 0.05 USD daily
// budget, and a loopback upstream that bills every token it is allowed (the worst case). A request without
// max_tokens is served with its answer capped to what the budget has left (and says so in a header), concurrency
// across replicas never spends past the limit, and each 402 says which of its two reasons it is, in words.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  budgetKey,
  type GatewayProcess,
  recorded,
  type SpendStack,
  startSpendStack,
  stopGateway,
} from '../../support/gateway-fleet.ts';

let stack: SpendStack;
let gateways: GatewayProcess[];
/** 0.05 USD a day each: the burst, the texts, a stream. */
const LIMIT_MICROS = 50_000;

beforeAll(async () => {
  stack = await startSpendStack('budget-cap', {
    budgetsUsd: [0.05, 0.05, 0.05],
    maxOutputTokens: 128_000,
    behavior: 'bills-honestly',
  });
  gateways = [await stack.gateway(), await stack.gateway()];
}, 120_000);

afterAll(async () => {
  for (const g of gateways ?? []) await stopGateway(g);
  await stack?.close();
});

interface Answer {
  status: number;
  capped: string | null;
  body: {
    error?: {
      message: string;
      metadata: { reason?: string; fits_max_tokens?: number; budget?: Record<string, unknown> };
    };
  };
  text: string;
}

async function ask(gw: GatewayProcess, key: string, extra: Record<string, unknown> = {}): Promise<Answer> {
  const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }], ...extra }),
  });
  const text = await res.text();
  const json = res.status !== 200 || extra.stream !== true;
  return {
    status: res.status,
    capped: res.headers.get('x-byok-max-tokens-capped'),
    body: json ? (JSON.parse(text) as Answer['body']) : {},
    text,
  };
}

/** The max_completion_tokens the upstream was sent, per request it saw (in order). */
const forwardedCaps = (): (number | undefined)[] =>
  stack.upstreams.bodies
    .filter((b) => b.includes('"messages"'))
    .map((b) => (JSON.parse(b.slice(b.indexOf('{'))) as { max_completion_tokens?: number }).max_completion_tokens);

describe('a request without max_tokens under a budget smaller than its longest answer', () => {
  test('is served, capped to what is left, across two replicas at once, and never spends past the limit', async () => {
    const was = await recorded(stack.redis.url);
    const before = { ids: was.ids.size, micros: was.byokListMicros };
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) => ask(gateways[i % 2]!, budgetKey(0), i % 3 === 0 ? { stream: true } : {})),
    );
    const served = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 402);
    process.stderr.write(
      `[budget-cap] 24 concurrent requests without max_tokens: ${served.length} served (caps ${served.map((a) => a.capped).join(', ')}), ${refused.length} refused\n`,
    );
    // Each capped request is granted half of what is left: several are served at once, not only the first.
    expect(served.length).toBeGreaterThanOrEqual(3);
    expect(served.length + refused.length).toBe(24);
    for (const a of served) expect(Number(a.capped)).toBeGreaterThanOrEqual(16);
    for (const a of refused) expect(a.body.error?.metadata.reason).toMatch(/^(request_over_budget|budget_reached)$/);
    // The upstream was sent each cap as max_completion_tokens (the OpenAI field its reasoning models take).
    expect(
      forwardedCaps()
        .filter((c) => c !== undefined)
        .sort(),
    ).toEqual(served.map((a) => Number(a.capped)).sort());
    // What was spent (the upstream billed every token it was allowed) stays within the limit, once all is recorded.
    for (let i = 0; i < 100 && (await recorded(stack.redis.url)).ids.size < before.ids + served.length; i++)
      await new Promise((r) => setTimeout(r, 100));
    const counted = (await recorded(stack.redis.url)).byokListMicros - before.micros;
    process.stderr.write(`[budget-cap] spent ${counted} of ${LIMIT_MICROS} micros\n`);
    expect(counted).toBeGreaterThan(0);
    expect(counted).toBeLessThanOrEqual(LIMIT_MICROS);
    // Each replica counts the requests it capped.
    let cappedTotal = 0;
    for (const g of gateways)
      cappedTotal += Number(
        /^byok_gateway_max_tokens_capped_total (\d+)$/m.exec(await (await fetch(`${g.opsUrl}/metrics`)).text())?.[1] ??
          0,
      );
    expect(cappedTotal).toBe(served.length);
  });
});

test('a streamed answer carries the cap in its header too, and the upstream got it', async () => {
  const before = forwardedCaps().length;
  const r = await ask(gateways[1]!, budgetKey(2), { stream: true });
  expect(r.status).toBe(200);
  expect(r.text).toContain('data: [DONE]');
  // Half of 0.05 USD less the prompt, at 10 USD per million tokens.
  expect(Number(r.capped)).toBeGreaterThan(2400);
  expect(forwardedCaps().slice(before)).toEqual([Number(r.capped)]);
});

describe('the two refusals, each in its own words', () => {
  test('a max_tokens larger than what is left: what it would need, what is left, and the max_tokens that fits; that one is served', async () => {
    const big = await ask(gateways[0]!, budgetKey(1), { max_tokens: 100_000 });
    expect(big.status).toBe(402);
    const m = big.body.error!;
    expect(m.metadata.reason).toBe('request_over_budget');
    expect(m.message).toMatch(
      /^request over budget: this request would need up to 1\.0\d+ USD and today's \(UTC\) daily budget of guardrail "pilot-1" has 0\.05 USD left \(0 of 0\.05 USD counted, BYOK included\); a max_tokens of at most \d+ would fit, or wait: it resets at \d{4}-\d\d-\d\dT00:00:00Z; the request was not sent to any provider$/,
    );
    expect(m.message).not.toMatch(/window|d20\d\d-/);
    const fits = m.metadata.fits_max_tokens!;
    expect(m.message).toContain(`a max_tokens of at most ${fits} would fit`);
    // The figure is exact: that max_tokens is served, one more would not have been.
    const ok = await ask(gateways[1]!, budgetKey(1), { max_tokens: fits });
    expect(ok.status).toBe(200);
    expect(ok.capped).toBeNull();
  });

  test('then without max_tokens, below the least answer: what it needs at least, in words', async () => {
    const r = await ask(gateways[0]!, budgetKey(1));
    expect(r.status).toBe(402);
    expect(r.body.error!.metadata.reason).toBe('request_over_budget');
    expect(r.body.error!.message).toMatch(
      /^request over budget: this request needs at least 0\.000\d+ USD \(its prompt and a 16-token answer\) and today's \(UTC\) daily budget of guardrail "pilot-1" has 0\.000\d+ USD left/,
    );
  });
});
