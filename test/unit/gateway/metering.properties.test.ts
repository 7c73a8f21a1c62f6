// Metering trusts the side it can trust and bounds both sides (docs/ledger.md, "What drives
// cost"). This generator draws (request, upstream answer) pairs: n, max_tokens against max_completion_tokens, image
// and file parts, text in ASCII, CJK, emoji and whitespace, streams in any chunking, usage honest, inflated, deflated,
// zero, absent or malformed, from catalog (trusted) and tenant-chosen upstreams. An oracle written here from the
// documented table, not from the code, says what each pair may be metered at; the properties check the code against
// it. A second property runs the embedded ledger through the spend gate under generated admit/settle interleavings.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import type { Reservation } from '../../../src/contract/spend-gate.ts';
import { type EndpointPrice, listCostMicros, type Micros, priceMicros } from '../../../src/domain/index.ts';
import { SseUsageScanner } from '../../../src/gateway/sse-scanner.ts';
import {
  bodyFloorTokens,
  type CostFields,
  costFields,
  meteredUsage,
  promptFloorTokens,
  reservedTokens,
  streamFloorTokens,
  usageBounds,
} from '../../../src/gateway/usage.ts';
import { createEmbeddedLedger } from '../../../src/ledger/embedded.ts';
import { createSpendGate } from '../../../src/ledger/spend-gate.ts';
import { account, guardrail, K1, WS1 } from '../../support/fixtures/domain.ts';
import { expectEqual, propertyRuns } from '../../support/properties.ts';

/** Fixed seed: a failure names its case, and every run checks the same cases. */
const SEED = 32_0402;
// A tenth of the cases (30) showed no slack at all: never fewer than 150, or the floors below would fail or prove little.
const INTERLEAVINGS = Math.max(150, propertyRuns(300));
const RUNS = 3000;

// ---- The documented table (docs/ledger.md), as the oracle reads it. ----------------------------------------------

/** No request is ever bounded by more than this when the catalog gives no context length. */
const CEILING = 10_000_000;
/** The floor (tenant upstreams): one token per 16 bytes relayed or forwarded, past 1 KiB of framing per answer, choice, event or request. */
const FLOOR_BYTES_PER_TOKEN = 16;
const FRAMING = 1024;

const floorTokens = (u: number) => Math.ceil(u / FLOOR_BYTES_PER_TOKEN);
const utf8 = (s: string) => Buffer.byteLength(s, 'utf8');
/** Bytes of a text as a JSON string's content (escapes included). */
const jsonBytes = (s: string) => utf8(JSON.stringify(s)) - 2;

type Part =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string } }
  | { type: 'file'; file: { file_id: string } };
interface Message {
  role: 'system' | 'user' | 'assistant';
  content: string | Part[];
}
interface Model {
  contextLength: number | null;
  maxOutputTokens: number | null;
}
/** A generated request with what an honest provider bills for it. */
interface Case {
  model: Model;
  body: { messages: Message[]; n?: number; max_tokens?: number; max_completion_tokens?: number; stream?: boolean };
  /** Which cap the provider honours when both are set (OpenAI: max_completion_tokens; others may honour max_tokens). */
  honours: 'max_tokens' | 'max_completion_tokens';
  honestPrompt: number;
  /** What each choice delivered, and the honest count of each. */
  choices: { content: string; tokens: number }[];
  source: 'catalog' | 'tenant';
  usage: { kind: 'honest' | 'inflated' | 'deflated' | 'zero' | 'absent' | 'malformed'; value: unknown };
  /** Cut points of the SSE body, as fractions. */
  cuts: number[];
}

const requestBytes = (c: Case) => utf8(JSON.stringify({ model: 'm/x', ...c.body }));
const nOf = (c: Case) => c.body.n ?? 1;
const textsOf = (c: Case) =>
  c.body.messages.flatMap((m) =>
    typeof m.content === 'string' ? [m.content] : m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])),
  );
const mediaOf = (c: Case) =>
  c.body.messages.reduce(
    (sum, m) => sum + (typeof m.content === 'string' ? 0 : m.content.filter((p) => p.type !== 'text').length),
    0,
  );
const contextOf = (c: Case) => c.model.contextLength ?? CEILING;

/** The table's bounds for a case. */
function oracle(c: Case) {
  const context = contextOf(c);
  const asked = Math.max(c.body.max_tokens ?? 0, c.body.max_completion_tokens ?? 0) || null;
  const perChoice = Math.min(asked ?? Infinity, c.model.maxOutputTokens ?? Infinity, context);
  // A stream: each event's bytes past its framing, and a token per data event past 2n + 3; a body: its bytes past
  // the framing of the answer and of each choice.
  const events = sseEvents(c);
  const delivered = c.body.stream
    ? Math.max(
        floorTokens(events.reduce((s, e) => s + Math.max(0, utf8(e) - FRAMING), 0)),
        events.length - (2 * nOf(c) + 3),
      )
    : floorTokens(Math.max(0, utf8(bufferedBody(c)) - FRAMING - FRAMING * nOf(c)));
  return {
    minPrompt: floorTokens(Math.max(0, utf8(JSON.stringify(c.body)) - FRAMING)),
    maxPrompt: Math.min(context, requestBytes(c) + mediaOf(c) * context),
    minCompletion: delivered,
    maxCompletion: nOf(c) * perChoice,
  };
}

/** How a stream splits a choice's content: 16 code points per event (an honest event carries at least one token). */
function pieces(content: string): string[] {
  const cps = [...content];
  const out: string[] = [];
  for (let i = 0; i < cps.length || i === 0; i += 16) out.push(cps.slice(i, i + 16).join(''));
  return out;
}

/** A well-formed count: a non-negative safe integer no request can exceed (the code says 1e9). */
const validCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= 1e9;
const reportedOf = (c: Case): { prompt: number; completion: number } | null => {
  const u = c.usage.value as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  if (typeof u !== 'object' || u === null) return null;
  return validCount(u.prompt_tokens) && validCount(u.completion_tokens)
    ? { prompt: u.prompt_tokens, completion: u.completion_tokens }
    : null;
};

// ---- Generators. --------------------------------------------------------------------------------------------------

const WORDS = [
  'the',
  'a',
  'of',
  'model',
  'token',
  'implementation',
  'configuration',
  'responsibilities',
  'x',
  'é',
  'naïve',
];
const text = fc.oneof(
  fc.array(fc.constantFrom(...WORDS), { maxLength: 60 }).map((w) => w.join(' ')),
  // CJK: about one token per character, three bytes each (bytes / 4 undercounts it).
  fc.string({ unit: fc.integer({ min: 0x4e00, max: 0x9fff }).map((cp) => String.fromCodePoint(cp)), maxLength: 200 }),
  // Whitespace-heavy, rulers, emoji and anything else.
  fc.string({ unit: fc.constantFrom(' ', '\n', '\t', '-', '=', 'x', '  '), maxLength: 300 }),
  fc.string({ unit: 'grapheme', maxLength: 80 }),
  fc.string({ unit: 'binary', maxLength: 80 }),
);
const part: fc.Arbitrary<Part> = fc.oneof(
  { weight: 3, arbitrary: text.map((t) => ({ type: 'text' as const, text: t })) },
  { weight: 2, arbitrary: fc.webUrl().map((url) => ({ type: 'image_url' as const, image_url: { url } })) },
  { weight: 1, arbitrary: fc.constant({ type: 'file' as const, file: { file_id: 'file-abc' } }) },
);
const message: fc.Arbitrary<Message> = fc.record({
  role: fc.constantFrom('system' as const, 'user' as const, 'assistant' as const),
  content: fc.oneof(text, fc.array(part, { minLength: 1, maxLength: 4 })),
});
const model: fc.Arbitrary<Model> = fc.record({
  contextLength: fc.oneof(fc.constant(null), fc.constantFrom(4096, 8192, 128_000, 400_000)),
  maxOutputTokens: fc.oneof(fc.constant(null), fc.constantFrom(1024, 4096, 16_384)),
});
const cap = fc.option(fc.integer({ min: 1, max: 5000 }), { nil: undefined });

/** Truncates to at most `max` bytes as JSON text: content an honest provider delivers within its count. */
function within(t: string, max: number): string {
  let bytes = 0;
  let out = '';
  for (const ch of t) {
    bytes += jsonBytes(ch);
    if (bytes > max) break;
    out += ch;
  }
  return out;
}

const caseArb: fc.Arbitrary<Case> = fc
  .record({
    model,
    messages: fc.array(message, { minLength: 1, maxLength: 4 }),
    n: fc.oneof(
      { weight: 3, arbitrary: fc.constant(undefined) },
      { weight: 3, arbitrary: fc.integer({ min: 1, max: 8 }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 128 }) },
    ),
    max_tokens: cap,
    max_completion_tokens: cap,
    stream: fc.boolean(),
    honours: fc.constantFrom('max_tokens' as const, 'max_completion_tokens' as const),
    // Per image or file part, what the provider bills (85 low detail .. 1,105 high detail for one image; a file more).
    mediaTokens: fc.integer({ min: 85, max: 3000 }),
    textShare: fc.double({ min: 0, max: 1, noNaN: true }),
    // Eight texts, reused round the choices: generating one per possible choice (128) was most of this file's time,
    // and the choices still differ by their shares below.
    choiceTexts: fc.array(text, { minLength: 8, maxLength: 8 }),
    choiceShares: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 128, maxLength: 128 }),
    source: fc.constantFrom('catalog' as const, 'tenant' as const),
    usageKind: fc.constantFrom(
      'honest' as const,
      'honest' as const,
      'inflated' as const,
      'deflated' as const,
      'zero' as const,
      'absent' as const,
      'malformed' as const,
    ),
    factor: fc.integer({ min: 2, max: 1000 }),
    malformed: fc.constantFrom<unknown>(
      '12',
      null,
      [],
      { prompt_tokens: -1, completion_tokens: 5 },
      { prompt_tokens: 0.5, completion_tokens: 1 },
      { prompt_tokens: 1, completion_tokens: '9' },
      { prompt_tokens: Number.NaN, completion_tokens: 1 },
      { prompt_tokens: 4e15, completion_tokens: 4e15 },
      { prompt_tokens: 2 ** 60, completion_tokens: 1 },
    ),
    cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 }),
    // A tenant endpoint that delivers far more than the request allows (it ignored max_tokens).
    overlong: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  })
  .map((g): Case => {
    const body: Case['body'] = { messages: g.messages };
    if (g.n !== undefined) body.n = g.n;
    if (g.max_tokens !== undefined) body.max_tokens = g.max_tokens;
    if (g.max_completion_tokens !== undefined) body.max_completion_tokens = g.max_completion_tokens;
    if (g.stream) body.stream = true;
    const partial: Case = {
      model: g.model,
      body,
      honours: g.honours,
      honestPrompt: 0,
      choices: [],
      source: g.source,
      usage: { kind: 'absent', value: undefined },
      cuts: g.cuts,
    };
    // Honest prompt: each text between 1/16 and all of its UTF-8 bytes (every token covers at least one byte), each
    // message's framing (4 tokens, fewer than its JSON framing bytes), each media part as billed.
    const texts = textsOf(partial);
    const textTokens = texts.reduce(
      (s, t) => s + floorTokens(utf8(t)) + Math.floor(g.textShare * (utf8(t) - floorTokens(utf8(t)))),
      0,
    );
    const honestPrompt = textTokens + 4 * g.messages.length + mediaOf(partial) * g.mediaTokens;
    // Honest completion: each choice within the cap the provider honours (and the model's limits).
    const honoured =
      (g.honours === 'max_tokens' ? g.max_tokens : g.max_completion_tokens) ?? g.max_tokens ?? g.max_completion_tokens;
    const perChoice = Math.min(
      honoured ?? 20_000,
      g.model.maxOutputTokens ?? Infinity,
      g.model.contextLength ?? CEILING,
    );
    const choices = Array.from({ length: body.n ?? 1 }, (_, i) => {
      const tokens = Math.max(1, Math.floor(g.choiceShares[i]! * perChoice));
      const allowance = tokens * FLOOR_BYTES_PER_TOKEN * (g.overlong && g.source === 'tenant' ? 50 : 1);
      return { content: within(g.choiceTexts[i % g.choiceTexts.length]!, allowance), tokens };
    });
    const completion = choices.reduce((s, ch) => s + ch.tokens, 0);
    const honest = {
      prompt_tokens: honestPrompt,
      completion_tokens: completion,
      total_tokens: honestPrompt + completion,
    };
    const value =
      g.usageKind === 'honest'
        ? honest
        : g.usageKind === 'inflated'
          ? { prompt_tokens: honestPrompt * g.factor, completion_tokens: completion * g.factor }
          : g.usageKind === 'deflated'
            ? {
                prompt_tokens: Math.floor(honestPrompt / g.factor),
                completion_tokens: Math.floor(completion / g.factor),
              }
            : g.usageKind === 'zero'
              ? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }
              : g.usageKind === 'absent'
                ? undefined
                : g.malformed;
    return { ...partial, honestPrompt, choices, usage: { kind: g.usageKind, value } };
  })
  // An honest provider refuses a prompt past the context: no answer to meter.
  .filter((c) => c.honestPrompt <= contextOf(c));

/** The buffered answer's JSON text. */
const bufferedBody = (c: Case) =>
  JSON.stringify({
    id: 'chatcmpl-x',
    object: 'chat.completion',
    choices: c.choices.map((ch, index) => ({
      index,
      message: { role: 'assistant', content: ch.content },
      finish_reason: 'stop',
    })),
    ...(c.usage.value === undefined ? {} : { usage: c.usage.value }),
  });

/** The SSE answer's events: each choice's content in pieces, then the usage chunk (when any), then [DONE]. */
function sseEvents(c: Case): string[] {
  const events: string[] = [];
  c.choices.forEach((ch, index) => {
    for (const piece of pieces(ch.content))
      events.push(
        `data: ${JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk', choices: [{ index, delta: { content: piece } }] })}\n\n`,
      );
  });
  if (c.usage.value !== undefined)
    events.push(`data: ${JSON.stringify({ id: 'chatcmpl-x', choices: [], usage: c.usage.value })}\n\n`);
  events.push('data: [DONE]\n\n');
  return events;
}
const sseBody = (c: Case) => sseEvents(c).join('');

/** Cuts bytes anywhere (inside a UTF-8 sequence too), as a network may. */
function chunked(body: string, cuts: number[]): Buffer[] {
  const bytes = Buffer.from(body, 'utf8');
  const at = [...new Set(cuts.map((f) => Math.floor(f * bytes.length)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const to of [...at, bytes.length]) {
    out.push(bytes.subarray(from, to));
    from = to;
  }
  return out;
}

// ---- The code under test, behind one adapter. ---------------------------------------------------------------------

interface Metered {
  promptTokens: number;
  completionTokens: number;
}

/** The cost fields as the gateway reads them (every generated body is priceable). */
function fieldsOf(c: Case): CostFields {
  const f = costFields(c.body as unknown as Record<string, unknown>);
  if ('error' in f) throw new Error(f.error);
  return f;
}
const boundsOf = (c: Case) => usageBounds(c.model, fieldsOf(c), requestBytes(c));

/** The code under test, called as src/gateway/completions.ts calls it. */
const impl = {
  reserve(c: Case): Metered {
    return reservedTokens(boundsOf(c));
  },
  /** What the gateway meters for the answer, buffered or streamed. */
  meter(c: Case): Metered {
    const tenant = c.source === 'tenant';
    const seen = (responseBytes: number, completionFloor: number) => ({
      requestBytes: requestBytes(c),
      responseBytes,
      minPromptTokens: tenant ? promptFloorTokens(utf8(JSON.stringify(c.body)), fieldsOf(c)) : 0,
      minCompletionTokens: tenant ? completionFloor : 0,
    });
    if (!c.body.stream) {
      const text = bufferedBody(c);
      const body = JSON.parse(text) as { usage?: unknown };
      return meteredUsage(
        body.usage,
        boundsOf(c),
        c.source,
        seen(utf8(text), bodyFloorTokens(utf8(text), fieldsOf(c))),
      );
    }
    const scanner = new SseUsageScanner();
    const sse = sseBody(c);
    for (const chunk of chunked(sse, c.cuts)) scanner.scan(chunk);
    const reported = scanner.finish();
    return meteredUsage(reported, boundsOf(c), c.source, seen(utf8(sse), streamFloorTokens(scanner, fieldsOf(c))));
  },
  /** The usage a stream reported and the byte counts of its floor, read in the case's chunking. */
  stream(c: Case): { usage: unknown; bytes: number; excessBytes: number; dataEvents: number } {
    const scanner = new SseUsageScanner();
    for (const chunk of chunked(sseBody(c), c.cuts)) scanner.scan(chunk);
    const usage = scanner.finish();
    return { usage, bytes: scanner.bytes, excessBytes: scanner.excessBytes, dataEvents: scanner.dataEvents };
  },
};

const label = (c: Case) =>
  `${c.source} ${c.usage.kind} n=${nOf(c)} max_tokens=${c.body.max_tokens} max_completion_tokens=${c.body.max_completion_tokens} stream=${c.body.stream === true}`;

describe('metering bounds both sides (properties, seed 320402)', () => {
  test('what is metered lies within the documented bounds: a tenant count between the delivered floor and the request maximum', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const o = oracle(c);
        const m = impl.meter(c);
        const reported = reportedOf(c);
        if (c.source === 'catalog' && reported) return; // the next property
        // Tenant counts, and estimates from either side: at least the floor, at most the maximum (or the floor past it).
        expectEqual(
          {
            case: label(c),
            prompt: m.promptTokens >= o.minPrompt,
            completion: m.completionTokens >= o.minCompletion,
          },
          { case: label(c), prompt: true, completion: true },
        );
        expectEqual(
          {
            case: label(c),
            prompt: m.promptTokens <= Math.max(o.maxPrompt, o.minPrompt),
            completion: m.completionTokens <= Math.max(o.maxCompletion, o.minCompletion),
          },
          { case: label(c), prompt: true, completion: true },
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('a trusted (catalog) count is never clamped below itself', () => {
    fc.assert(
      fc.property(
        caseArb.filter((c) => c.source === 'catalog' && reportedOf(c) !== null),
        (c) => {
          const m = impl.meter(c);
          const r = reportedOf(c)!;
          expectEqual(
            { case: label(c), prompt: m.promptTokens, completion: m.completionTokens },
            {
              case: label(c),
              prompt: r.prompt,
              completion: r.completion,
            },
          );
        },
      ),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('the reservation covers what an honest provider bills, and anything a tenant count is metered at', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const r = impl.reserve(c);
        const honestCompletion = c.choices.reduce((s, ch) => s + ch.tokens, 0);
        expectEqual(
          {
            case: label(c),
            prompt: r.promptTokens >= c.honestPrompt,
            completion: r.completionTokens >= honestCompletion,
          },
          { case: label(c), prompt: true, completion: true },
        );
        if (c.source === 'tenant') {
          const m = impl.meter(c);
          expectEqual(
            {
              case: label(c),
              prompt: m.promptTokens <= r.promptTokens,
              completion: m.completionTokens <= r.completionTokens,
            },
            { case: label(c), prompt: true, completion: true },
          );
        }
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('a stream reports the same usage and floor bytes however its bytes are cut', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const events = sseEvents(c);
        // null is no usage, as absent is.
        const usage =
          c.usage.value === undefined || c.usage.value === null
            ? undefined
            : (JSON.parse(JSON.stringify(c.usage.value)) as unknown);
        const excessBytes = events.reduce((s, e) => s + Math.max(0, utf8(e) - FRAMING), 0);
        expectEqual(impl.stream(c), { usage, bytes: utf8(sseBody(c)), excessBytes, dataEvents: events.length });
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});

// ---- The ledger: admissions under generated interleavings. ---------------------------------------------------------

describe('no budget admits more than its limit plus the documented slack (embedded ledger, spend gate)', () => {
  const price: EndpointPrice = priceMicros({
    kind: 'per-token',
    promptUsdPerMillionTokens: '2.5',
    completionUsdPerMillionTokens: '10',
  });
  const cost = (u: Metered): Micros => listCostMicros(price, u);

  test('concurrent admit/settle interleavings', async () => {
    // Across the run: the property is not vacuous (requests were admitted and refused, some ran past their hold).
    const seenOverall = { admitted: 0, refused: 0, slack: 0, concurrent: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.array(caseArb, { minLength: 1, maxLength: 25 }),
        fc.integer({ min: 1_000, max: 2_000_000 }),
        fc.array(fc.nat(), { minLength: 50, maxLength: 50 }),
        async (cases, limitMicros, schedule) => {
          const ledger = createEmbeddedLedger();
          const gate = createSpendGate(ledger);
          const g = guardrail(
            'g',
            {},
            { limitUsd: limitMicros / 1_000_000, resetInterval: 'monthly', includeByokInBudgets: true },
          );
          const acct = account([], {
            accountId: 'acct-prop',
            guardrails: [g],
            apiKeys: [{ hash: K1, workspaceId: WS1, guardrailId: 'g', expiresAt: null }],
          });
          const who = { apiKeyHash: K1, workspaceId: WS1, userId: null };
          const at = new Date('2026-11-23T12:00:00Z');
          const inFlight: { c: Case; reservation: Reservation | null; id: string }[] = [];
          let next = 0;
          let step = 0;
          let counted = 0;
          let slack = 0;
          try {
            while (next < cases.length || inFlight.length > 0) {
              const pick = schedule[step++ % schedule.length]!;
              if (next < cases.length && (inFlight.length === 0 || pick % 3 !== 0)) {
                const c = cases[next]!;
                const id = `gen-${next++}`;
                const d = await gate.admit({
                  account: acct,
                  who,
                  at,
                  maximum: { id, costMicros: cost(impl.reserve(c)), byokOnly: false },
                });
                if (d.allowed) inFlight.push({ c, reservation: d.reservation, id });
                if (d.allowed) seenOverall.admitted++;
                else seenOverall.refused++;
                seenOverall.concurrent = Math.max(seenOverall.concurrent, inFlight.length);
                continue;
              }
              const [done] = inFlight.splice(pick % inFlight.length, 1);
              const metered = impl.meter(done!.c);
              const actual = cost(metered);
              // The documented slack: what a provider bills past the bounds it was asked to honour.
              const o = oracle(done!.c);
              const reported = reportedOf(done!.c);
              const outOfBounds =
                done!.c.source === 'catalog'
                  ? reported !== null && (reported.prompt > o.maxPrompt || reported.completion > o.maxCompletion)
                  : o.minCompletion > o.maxCompletion || o.minPrompt > o.maxPrompt;
              if (outOfBounds) slack += Math.max(0, actual - cost(impl.reserve(done!.c)));
              if (actual > cost(impl.reserve(done!.c))) seenOverall.slack++;
              counted += actual;
              await gate.record({
                account: acct,
                who,
                at,
                reservation: done!.reservation,
                generationId: done!.id,
                model: 'acme/chat',
                endpointId: 'openai',
                provider: 'openai',
                byokCredentialId: null,
                promptTokens: metered.promptTokens,
                completionTokens: metered.completionTokens,
                listCostMicros: actual,
              });
              expect({ within: counted <= limitMicros + slack, limitMicros, slack, counted }).toMatchObject({
                within: true,
              });
            }
          } finally {
            await gate.close();
          }
        },
      ),
      { seed: SEED, numRuns: INTERLEAVINGS },
    );
    // The cases reached what they are for: many admissions and refusals, some slack, some true concurrency (the
    // floors scale with the number of cases, a tenth of them under `npm run verify`).
    const perCase = INTERLEAVINGS / 300;
    expect(seenOverall.admitted).toBeGreaterThan(500 * perCase);
    expect(seenOverall.refused).toBeGreaterThan(500 * perCase);
    expect(seenOverall.slack).toBeGreaterThan(0);
    expect(seenOverall.concurrent).toBeGreaterThan(5 * perCase);
  });
});
