// meter from the side we trust, bound from both sides (docs/ledger.md, "What drives cost"). Examples
// of each row of the table; test/unit/gateway/metering.properties.test.ts generates the rest.
import { describe, expect, test } from '@jest/globals';
import {
  bodyFloorTokens,
  type CostFields,
  costFields,
  meteredUsage,
  promptFloorTokens,
  readUsage,
  reservedTokens,
  type Seen,
  streamFloorTokens,
  USAGE_CEILING_TOKENS,
  usageBounds,
} from '../../../src/gateway/usage.ts';

const fields = (body: Record<string, unknown>): CostFields => {
  const f = costFields(body);
  if ('error' in f) throw new Error(f.error);
  return f;
};
const gpt4o = { contextLength: 128_000, maxOutputTokens: null };
const seen = (over: Partial<Seen> = {}): Seen => ({
  requestBytes: 400,
  responseBytes: 400,
  minPromptTokens: 0,
  minCompletionTokens: 0,
  ...over,
});

describe('the cost-driving fields of a request', () => {
  test('n, and the larger of max_tokens and max_completion_tokens (providers differ on which one wins)', () => {
    expect(fields({})).toEqual({
      n: 1,
      maxTokensPerChoice: null,
      mediaParts: 0,
      predictionBytes: 0,
      logprobEntries: 0,
    });
    expect(fields({ n: 8, max_tokens: 500 })).toMatchObject({ n: 8, maxTokensPerChoice: 500 });
    expect(fields({ n: null, max_tokens: 900, max_completion_tokens: 50 })).toMatchObject({
      n: 1,
      maxTokensPerChoice: 900,
    });
    expect(fields({ max_tokens: null, max_completion_tokens: 50 })).toMatchObject({ maxTokensPerChoice: 50 });
  });

  test.each([
    [{ n: 0 }, 'n must be an integer from 1 to 128'],
    [{ n: 129 }, 'n must be an integer from 1 to 128'],
    [{ n: 1.5 }, 'n must be an integer from 1 to 128'],
    [{ n: '2' }, 'n must be an integer from 1 to 128'],
    [{ max_tokens: 0 }, 'max_tokens must be a positive integer'],
    [{ max_tokens: 1.5 }, 'max_tokens must be a positive integer'],
    [{ max_completion_tokens: '100' }, 'max_completion_tokens must be a positive integer'],
    [{ max_completion_tokens: 2 ** 60 }, 'max_completion_tokens must be a positive integer'],
    [
      { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } },
      'audio output cannot be priced: the catalog prices text tokens only',
    ],
    [{ modalities: ['text', 'audio'] }, 'only the text modality can be priced: the catalog prices text tokens only'],
    [
      {
        messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }],
      },
      'audio input cannot be priced: the catalog prices text tokens only',
    ],
    [{ web_search_options: {} }, 'web search cannot be priced: the catalog has no price per search'],
    [
      { service_tier: 'priority' },
      'service_tier must be auto, default or flex: other tiers cost more than the catalog price',
    ],
  ])('%j cannot be priced: %s', (body, error) => {
    expect(costFields(body)).toEqual({ error });
  });

  test('every content part that is not text is a media part, unknown types included', () => {
    const body = {
      messages: [
        { role: 'system', content: 'be brief' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image_url', image_url: { url: 'https://x.test/a.png' } },
            { type: 'file', file: { file_id: 'f' } },
            { type: 'video_url' },
            'junk',
          ],
        },
      ],
      modalities: ['text'],
      service_tier: 'flex',
    };
    expect(fields(body).mediaParts).toBe(4);
  });
});

describe('bounds and reservations', () => {
  test('n is priced: n × the per-choice cap, the least of the request, the catalog and the context', () => {
    expect(usageBounds(gpt4o, fields({ n: 8, max_tokens: 500 }), 100).maxCompletionTokens).toBe(4000);
    expect(
      usageBounds({ contextLength: 128_000, maxOutputTokens: 16_384 }, fields({ n: 2 }), 100).maxCompletionTokens,
    ).toBe(32_768);
    expect(
      usageBounds({ contextLength: 1000, maxOutputTokens: null }, fields({ max_tokens: 5000 }), 100)
        .maxCompletionTokens,
    ).toBe(1000);
    // Nothing caps it: the context (or the ceiling) is the most a choice can be, and what is reserved.
    expect(usageBounds({ contextLength: null, maxOutputTokens: null }, fields({}), 100)).toEqual({
      maxPromptTokens: 100,
      maxCompletionTokens: USAGE_CEILING_TOKENS,
    });
  });

  test('the prompt: every byte may be a token (CJK and whitespace included); every media part may fill the context', () => {
    const cjk = JSON.stringify({ model: 'm/x', messages: [{ role: 'user', content: '人工智能'.repeat(100) }] });
    const bytes = Buffer.byteLength(cjk);
    expect(usageBounds(gpt4o, fields(JSON.parse(cjk) as Record<string, unknown>), bytes).maxPromptTokens).toBe(bytes);
    const image = {
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x.test/a.png' } }] }],
    };
    expect(usageBounds(gpt4o, fields(image), 205).maxPromptTokens).toBe(128_000);
    expect(reservedTokens(usageBounds(gpt4o, fields({ ...image, n: 3, max_tokens: 10 }), 205))).toEqual({
      promptTokens: 128_000,
      completionTokens: 30,
    });
  });

  test('a prediction adds its bytes per choice (rejected predicted tokens are billed as completion)', () => {
    const f = fields({ max_tokens: 100, prediction: { type: 'content', content: 'abcd' } });
    expect(f.predictionBytes).toBe(Buffer.byteLength(JSON.stringify({ type: 'content', content: 'abcd' })));
    expect(usageBounds(gpt4o, f, 10).maxCompletionTokens).toBe(100 + f.predictionBytes);
  });
});

describe('metering: the side we trust, bounded from both sides', () => {
  const bounds = usageBounds(gpt4o, fields({ n: 8, max_tokens: 500 }), 400);

  test('a catalog count is metered as reported, even past the bounds (flagged, never clamped)', () => {
    expect(meteredUsage({ prompt_tokens: 12, completion_tokens: 3900 }, bounds, 'catalog', seen())).toEqual({
      promptTokens: 12,
      completionTokens: 3900,
    });
    expect(meteredUsage({ prompt_tokens: 12, completion_tokens: 9000 }, bounds, 'catalog', seen())).toEqual({
      promptTokens: 12,
      completionTokens: 9000,
      outOfBounds: 'above',
    });
    expect(meteredUsage({ prompt_tokens: 0, completion_tokens: 0 }, bounds, 'catalog', seen())).toEqual({
      promptTokens: 0,
      completionTokens: 0,
    });
  });

  test('a tenant count is clamped between the delivered floor and the request maximum', () => {
    const floors = seen({ minPromptTokens: 3, minCompletionTokens: 500 });
    expect(meteredUsage({ prompt_tokens: 0, completion_tokens: 0 }, bounds, 'tenant', floors)).toEqual({
      promptTokens: 3,
      completionTokens: 500,
      estimated: 'out_of_bounds',
      outOfBounds: 'below',
    });
    expect(meteredUsage({ prompt_tokens: 10 ** 8, completion_tokens: 10 ** 8 }, bounds, 'tenant', floors)).toEqual({
      promptTokens: 400,
      completionTokens: 4000,
      estimated: 'out_of_bounds',
      outOfBounds: 'above',
    });
    expect(meteredUsage({ prompt_tokens: 12, completion_tokens: 900 }, bounds, 'tenant', floors)).toEqual({
      promptTokens: 12,
      completionTokens: 900,
    });
    // Delivered content is evidence, a cap only a promise: an endpoint that ignored max_tokens is metered at the floor.
    expect(
      meteredUsage({ prompt_tokens: 12, completion_tokens: 1 }, bounds, 'tenant', seen({ minCompletionTokens: 6000 })),
    ).toMatchObject({ completionTokens: 6000, outOfBounds: 'below' });
  });

  test.each([
    [undefined, 'missing'],
    [null, 'missing'],
    ['12', 'invalid'],
    [{ prompt_tokens: 0.5, completion_tokens: 1 }, 'invalid'],
    [{ prompt_tokens: -1, completion_tokens: 1 }, 'invalid'],
    [{ prompt_tokens: 1, completion_tokens: '9' }, 'invalid'],
    [{ prompt_tokens: Number.NaN, completion_tokens: 1 }, 'invalid'],
    [{ prompt_tokens: 4e15, completion_tokens: 4e15 }, 'invalid'],
    [{ prompt_tokens: 2 ** 60, completion_tokens: 1 }, 'invalid'],
  ])(
    '%j is not a count → an estimate (%s) from the bytes seen, within the bounds and above the floor',
    (value, reason) => {
      expect(readUsage(value)).toEqual({ problem: reason });
      for (const source of ['catalog', 'tenant'] as const) {
        expect(meteredUsage(value, bounds, source, seen({ requestBytes: 4000, responseBytes: 10 ** 6 }))).toEqual({
          promptTokens: 400,
          completionTokens: 4000,
          estimated: reason,
        });
        expect(
          meteredUsage(value, bounds, source, seen({ requestBytes: 41, responseBytes: 41, minCompletionTokens: 30 })),
        ).toEqual({ promptTokens: 11, completionTokens: 30, estimated: reason });
      }
    },
  );
});

describe('the floor: a pure function of byte counts (docs/ledger.md, "The floor")', () => {
  const one = { n: 1, logprobEntries: 0 };
  test('a buffered answer: its bytes less 1 KiB for the answer and 1 KiB per choice, 16 bytes per token', () => {
    expect(bodyFloorTokens(0, one)).toBe(0);
    expect(bodyFloorTokens(2048, one)).toBe(0);
    expect(bodyFloorTokens(2049, one)).toBe(1);
    expect(bodyFloorTokens(2048 + 8000, one)).toBe(500);
    expect(bodyFloorTokens(2048 + 8000, { n: 2, logprobEntries: 0 })).toBe(436);
  });

  test('logprobs: each token may carry 256 bytes per entry (1 + top_logprobs), so the bytes per token grow with them', () => {
    expect(fields({ logprobs: true, top_logprobs: 5 }).logprobEntries).toBe(6);
    expect(fields({ logprobs: true }).logprobEntries).toBe(1);
    expect(fields({ logprobs: false, top_logprobs: 5 }).logprobEntries).toBe(0);
    expect(fields({ logprobs: true, top_logprobs: 1e9 }).logprobEntries).toBe(21);
    expect(bodyFloorTokens(2048 + 272 * 100, { n: 1, logprobEntries: 1 })).toBe(100);
  });

  test('a stream: its events past 1 KiB each, and at least one token per data event past 2n + 3 tokenless ones', () => {
    const s = (excessBytes: number, dataEvents: number) =>
      streamFloorTokens({ bytes: 0, excessBytes, dataEvents, plainJson: false }, one);
    expect(s(0, 5)).toBe(0);
    expect(s(0, 205)).toBe(200);
    expect(s(16 * 300, 205)).toBe(300);
    expect(s(17, 0)).toBe(2);
    // A plain JSON body answered to stream: true is floored as a buffered answer.
    expect(streamFloorTokens({ bytes: 2048 + 160, excessBytes: 0, dataEvents: 0, plainJson: true }, one)).toBe(10);
  });

  test('the prompt: the whole forwarded body less 1 KiB and a prediction', () => {
    expect(promptFloorTokens(1024, { predictionBytes: 0 })).toBe(0);
    expect(promptFloorTokens(1024 + 24_000, { predictionBytes: 0 })).toBe(1500);
    expect(promptFloorTokens(1024 + 24_000, { predictionBytes: 24_000 })).toBe(0);
  });
});
