// The generation store behind GET /api/v1/generation: a record is readable only with the API key that made it, for a
// bounded time and count, and reads back exactly as it was put (field order included: it is the wire body). The
// store keeps records in columns, so a generator holds it to a plain model (records as objects in arrival order)
// under sequences of puts, reads with the right and wrong key, settlements and the clock moving, over records on the
// columns' edges: null and zero numbers, every usage estimate, no provider, one answer that is or is not the serving
// attempt's, failover lists with errors and null statuses, a credential named "shared".
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import {
  type GenerationRecord,
  GenerationStore,
  type GenerationTicket,
  type NewGeneration,
  type ProviderResponse,
} from '../../../src/gateway/generations.ts';
import { expectEqual, expectIs, propertyRuns } from '../../support/properties.ts';

const SEED = 20261129;
const CREATED = Date.UTC(2026, 10, 23, 10, 0, 0, 123);
/** GET /api/v1/generation's fields in the order the gateway has always written them. */
const WIRE_ORDER = [
  'id',
  'model',
  'created_at',
  'streamed',
  'provider',
  'endpoint_id',
  'byok_credential_id',
  'is_byok',
  'provider_responses',
  'tokens_prompt',
  'tokens_completion',
  'usage_estimated',
  'list_cost_micros',
  'fee_micros',
  'charged_micros',
  'status',
];

function generation(id: string, over: Partial<NewGeneration> = {}): NewGeneration {
  return {
    id,
    model: 'openai/gpt-4o',
    created_at_ms: CREATED,
    streamed: false,
    provider: 'openai',
    endpoint_id: 'openai-chat',
    byok_credential_id: 'acme/openai',
    is_byok: true,
    provider_responses: [
      { provider: 'openai', endpoint_id: 'openai-chat', credential: 'acme/openai', status: 200, latency_ms: 12.3 },
    ],
    tokens_prompt: 12,
    tokens_completion: 9,
    usage_estimated: null,
    list_cost_micros: 120,
    fee_micros: null,
    charged_micros: null,
    status: 200,
    ...over,
  };
}

describe('generation store', () => {
  test('readable only with the API key that made it; bounded by count and age', () => {
    let now = 0;
    const s = new GenerationStore({ maxRecords: 2, ttlMs: 1000, now: () => now });
    s.put('a', generation('g1'));
    s.put('b', generation('g2'));
    expect(s.get('g1', 'a')?.id).toBe('g1');
    expect(s.get('g1', 'b')).toBeUndefined();
    s.put('a', generation('g3'));
    expect(s.get('g1', 'a')).toBeUndefined();
    expect(s.size).toBe(2);
    now = 1500;
    expect(s.get('g3', 'a')).toBeUndefined();
    // A put evicts what has aged out, oldest first, as well as what overflows.
    s.put('a', generation('g4'));
    expect(s.size).toBe(1);
    for (let i = 5; i < 105; i++) s.put('a', generation(`g${i}`));
    expect(s.size).toBe(2);
    expect(s.get('g104', 'a')?.id).toBe('g104');
    expect(s.get('g103', 'a')?.id).toBe('g103');
    expect(s.get('g102', 'a')).toBeUndefined();
  });

  test('reads back the wire body as put, in field order, with created_at as ISO 8601', () => {
    const s = new GenerationStore();
    const put = generation('g1', { usage_estimated: 'missing', streamed: true });
    s.put('a', put);
    const { created_at_ms: _, ...rest } = put;
    const got = s.get('g1', 'a')!;
    expect(got).toEqual({ ...rest, created_at: '2026-11-23T10:00:00.123Z' });
    expect(Object.keys(got)).toEqual(WIRE_ORDER);
  });

  test('a failover list is kept whole, and what get() returns cannot change what is stored', () => {
    const s = new GenerationStore();
    const failed = {
      provider: 'openai',
      endpoint_id: 'e1',
      credential: 'acme/a',
      status: null,
      error: 'upstream unreachable',
      latency_ms: 3,
    };
    const responses = [
      { ...failed },
      { provider: 'openai', endpoint_id: 'e2', credential: 'shared', status: 200, latency_ms: 9.5 },
    ];
    s.put('a', generation('g1', { provider_responses: responses, byok_credential_id: null, is_byok: false }));
    responses[0]!.status = 500;
    const first = s.get('g1', 'a')!;
    expect(first.provider_responses[0]).toEqual(failed);
    first.provider_responses[1]!.status = 401;
    expect(s.get('g1', 'a')!.provider_responses[1]!.status).toBe(200);
  });

  test('model names read back as put past the bound of kept names', () => {
    const s = new GenerationStore({ maxRecords: 3 });
    for (let i = 0; i < 5000; i++) s.put('a', generation(`g${i}`, { model: `vendor/model-${i % 4500}` }));
    expect([4997, 4998, 4999].map((i) => s.get(`g${i}`, 'a')?.model)).toEqual([
      'vendor/model-497',
      'vendor/model-498',
      'vendor/model-499',
    ]);
  });

  test('settle amends the record it was given for, not a newer one in its slot', () => {
    const s = new GenerationStore({ maxRecords: 1 });
    const ticket = s.put('a', generation('g1'));
    s.settle(ticket, 5, 125);
    expect(s.get('g1', 'a')).toMatchObject({ fee_micros: 5, charged_micros: 125 });
    const later = s.put('a', generation('g2'));
    s.settle(ticket, 7, 7);
    expect(s.get('g2', 'a')).toMatchObject({ fee_micros: null, charged_micros: null });
    s.settle(later, 0, 0);
    expect(s.get('g2', 'a')).toMatchObject({ fee_micros: 0, charged_micros: 0 });
  });
});

/** The store's contract written plainly: records as objects in arrival order, evicted by count and age on put. */
class ModelStore {
  private readonly order: { id: string; hash: string; at: number; record: GenerationRecord }[] = [];
  private readonly live = new Map<string, { hash: string; at: number; record: GenerationRecord }>();
  private readonly maxRecords: number;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(maxRecords: number, ttlMs: number, now: () => number) {
    this.maxRecords = maxRecords;
    this.ttlMs = ttlMs;
    this.now = now;
  }

  put(hash: string, g: NewGeneration): GenerationRecord {
    const at = this.now();
    while (this.order.length > 0 && (this.order.length >= this.maxRecords || at - this.order[0]!.at > this.ttlMs)) {
      const gone = this.order.shift()!;
      if (this.live.get(gone.id)?.record === gone.record) this.live.delete(gone.id);
    }
    const { created_at_ms, ...rest } = g;
    const record: GenerationRecord = {
      id: rest.id,
      model: rest.model,
      created_at: new Date(created_at_ms).toISOString(),
      streamed: rest.streamed,
      provider: rest.provider,
      endpoint_id: rest.endpoint_id,
      byok_credential_id: rest.byok_credential_id,
      is_byok: rest.is_byok,
      provider_responses: structuredClone([...rest.provider_responses]),
      tokens_prompt: rest.tokens_prompt,
      tokens_completion: rest.tokens_completion,
      usage_estimated: rest.usage_estimated,
      list_cost_micros: rest.list_cost_micros,
      fee_micros: rest.fee_micros,
      charged_micros: rest.charged_micros,
      status: rest.status,
    };
    this.order.push({ id: g.id, hash, at, record });
    this.live.set(g.id, { hash, at, record });
    return record;
  }

  /** Amends `record` while it is held (evicted records are gone). */
  settle(record: GenerationRecord, fee: number, charged: number): void {
    if (this.order.some((e) => e.record === record))
      Object.assign(record, { fee_micros: fee, charged_micros: charged });
  }

  get(id: string, hash: string): GenerationRecord | undefined {
    const entry = this.live.get(id);
    if (!entry || entry.hash !== hash) return undefined;
    if (this.now() - entry.at > this.ttlMs) {
      this.live.delete(id);
      return undefined;
    }
    return entry.record;
  }

  get size(): number {
    return this.live.size;
  }
}

const PROVIDERS = ['openai', 'anthropic', 'amazon-bedrock/claude-on-aws'];
const ENDPOINTS = ['e1', 'e2'];
const CREDENTIALS = ['acme/openai', 'shared', 'acme/shared'];
const nullable = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null, freq: 3 });
const micros = nullable(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2 ** 40 }), fc.constant(2 ** 53 - 1)));
const response: fc.Arbitrary<ProviderResponse> = fc
  .record({
    provider: fc.constantFrom(...PROVIDERS),
    endpoint_id: fc.constantFrom(...ENDPOINTS),
    credential: fc.constantFrom(...CREDENTIALS),
    status: nullable(fc.constantFrom(200, 401, 429, 500)),
    error: fc.option(fc.constantFrom('upstream unreachable', 'attempt timed out after 10 ms', ''), { nil: undefined }),
    latency_ms: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1e6, noNaN: true })),
  })
  .map(({ error, ...r }) => (error === undefined ? r : { ...r, error }));

const nearMiss = fc.record({
  field: fc.constantFrom('provider', 'endpoint_id', 'credential', 'error', 'none'),
  value: fc.constantFrom('other', '', 'shared'),
});

const newGeneration = (id: string): fc.Arbitrary<NewGeneration> =>
  fc
    .record({
      model: fc.constantFrom('openai/gpt-4o', 'anthropic/claude-sonnet-4', 'x'),
      created_at_ms: fc.integer({ min: 0, max: Date.UTC(2200, 0) }),
      streamed: fc.boolean(),
      serving: fc.option(
        fc.record({
          provider: fc.constantFrom(...PROVIDERS),
          endpoint_id: fc.constantFrom(...ENDPOINTS),
          byok: fc.option(fc.constantFrom(...CREDENTIALS), { nil: null }),
        }),
        { nil: null },
      ),
      // The serving attempt's own answer (the common case), or any list.
      own: fc.option(
        fc.record({
          status: nullable(fc.constantFrom(200, 201)),
          latency_ms: fc.double({ min: 0, max: 1e5, noNaN: true }),
        }),
        { nil: null },
      ),
      // Failovers, and near misses of the serving attempt's one answer: one field of it changed, or an error added.
      others: fc.array(fc.oneof(response, nearMiss), { maxLength: 3 }),
      tokens_prompt: nullable(fc.nat()),
      tokens_completion: nullable(fc.nat()),
      usage_estimated: fc.constantFrom(null, 'missing', 'invalid', 'out_of_bounds'),
      list_cost_micros: micros,
      fee_micros: micros,
      charged_micros: micros,
      status: fc.constantFrom(200, 400, 424, 502, 504),
    })
    .map(({ serving, own, others: drawn, ...g }) => {
      const servingAnswer: ProviderResponse = {
        provider: serving?.provider ?? 'openai',
        endpoint_id: serving?.endpoint_id ?? 'e1',
        credential: serving?.byok ?? 'shared',
        status: 200,
        latency_ms: 1.5,
      };
      const others = drawn.map((o) =>
        'latency_ms' in o ? o : o.field === 'none' ? servingAnswer : { ...servingAnswer, [o.field]: o.value },
      );
      const mine: ProviderResponse[] =
        serving && own
          ? [
              {
                provider: serving.provider,
                endpoint_id: serving.endpoint_id,
                credential: serving.byok ?? 'shared',
                ...own,
              },
            ]
          : [];
      return {
        id,
        ...g,
        provider: serving?.provider ?? null,
        endpoint_id: serving?.endpoint_id ?? null,
        byok_credential_id: serving?.byok ?? null,
        is_byok: serving?.byok != null,
        provider_responses: [...others, ...mine],
      };
    });

type Op =
  | { op: 'put'; key: number; again: boolean; g: NewGeneration }
  | { op: 'get'; back: number; key: number }
  | { op: 'settle'; back: number; fee: number; charged: number }
  | { op: 'tick'; ms: number };

describe('generation store against a plain model (generated)', () => {
  test('any record reads back as the model keeps it', () => {
    fc.assert(
      fc.property(newGeneration('gen-0'), (g) => {
        const store = new GenerationStore({ maxRecords: 1 });
        const model = new ModelStore(1, 3_600_000, Date.now);
        store.put('hash-a', g);
        const want = model.put('hash-a', g);
        const got = store.get('gen-0', 'hash-a');
        expectEqual(got, want);
        expectEqual(Object.keys(got!), WIRE_ORDER);
      }),
      { seed: SEED, numRuns: propertyRuns(1000) },
    );
  });

  test('every read and the size match the model', () => {
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record({
          op: fc.constant('put' as const),
          key: fc.nat(2),
          // Now and then the last id once more: a slot evicted later must not take the newer record's entry.
          again: fc.integer({ min: 0, max: 7 }).map((n) => n === 0),
          g: newGeneration(''),
        }),
      },
      { weight: 4, arbitrary: fc.record({ op: fc.constant('get' as const), back: fc.nat(5), key: fc.nat(2) }) },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constant('settle' as const), back: fc.nat(8), fee: fc.nat(), charged: fc.nat() }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant('tick' as const),
          ms: fc.constantFrom(0, 1, 400, 999, 1000, 1001, 5000),
        }),
      },
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.array(op, { minLength: 10, maxLength: 60 }), (maxRecords, ops) => {
        let now = 0;
        const store = new GenerationStore({ maxRecords, ttlMs: 1000, now: () => now });
        const model = new ModelStore(maxRecords, 1000, () => now);
        const tickets = new Map<string, [GenerationTicket, GenerationRecord]>();
        let next = 0;
        const hashes = ['hash-a', 'hash-b', 'hash-c'];
        for (const o of ops) {
          if (o.op === 'put') {
            const g = { ...o.g, id: `gen-${o.again && next > 0 ? next - 1 : next++}` };
            tickets.set(g.id, [store.put(hashes[o.key]!, g), model.put(hashes[o.key]!, g)]);
          } else if (o.op === 'get') {
            const id = `gen-${next - 1 - o.back}`;
            const got = store.get(id, hashes[o.key]!);
            const want = model.get(id, hashes[o.key]!);
            expectEqual(got, want);
            if (got) expectEqual(Object.keys(got), WIRE_ORDER);
          } else if (o.op === 'settle') {
            const ticket = tickets.get(`gen-${next - 1 - o.back}`);
            if (ticket) {
              store.settle(ticket[0], o.fee, o.charged);
              model.settle(ticket[1], o.fee, o.charged);
            }
          } else now += o.ms;
          expectIs(store.size, model.size);
        }
      }),
      { seed: SEED, numRuns: propertyRuns(400) },
    );
  });
});
