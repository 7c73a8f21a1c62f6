// In-process generation records for GET /api/v1/generation: bounded by count and age, readable only with the API
// key that made the request. Lost on restart and not shared between replicas (documented in docs/gateway.md).
import type { Micros } from '../domain/index.ts';

export interface ProviderResponse {
  provider: string;
  endpoint_id: string;
  /** BYOK credential id, or "shared" for the platform's own capacity. */
  credential: string;
  /** Upstream HTTP status; null when the attempt failed before a status (see error). */
  status: number | null;
  /** Set when there was no usable status: timeout, transport error, credential not decryptable, broken stream. */
  error?: string;
  latency_ms: number;
}

export interface GenerationRecord {
  id: string;
  model: string;
  created_at: string;
  streamed: boolean;
  /** The endpoint and credential that served the request; null when every attempt failed. */
  provider: string | null;
  endpoint_id: string | null;
  byok_credential_id: string | null;
  is_byok: boolean;
  provider_responses: ProviderResponse[];
  tokens_prompt: number | null;
  tokens_completion: number | null;
  /** Why the token counts are an estimate (missing, invalid, out_of_bounds usage from the upstream); null: as reported. */
  usage_estimated: 'missing' | 'invalid' | 'out_of_bounds' | null;
  list_cost_micros: Micros | null;
  /** From the SpendGate's record(); null without a SpendGate or until it answered. */
  fee_micros: Micros | null;
  charged_micros: Micros | null;
  status: number;
}

/** A record as the gateway puts it: created_at as epoch milliseconds, made an ISO string only when read. */
export type NewGeneration = Omit<GenerationRecord, 'created_at' | 'provider_responses'> & {
  created_at_ms: number;
  provider_responses: readonly ProviderResponse[];
};

/** Where a record was put, for settle(): its slot, checked against its id (the slot may hold a newer record by then). */
export interface GenerationTicket {
  readonly slot: number;
  readonly id: string;
}

const ESTIMATES = [null, 'missing', 'invalid', 'out_of_bounds'] as const;
const STREAMED = 1;
const BYOK = 2;
/** provider_responses is the serving attempt's one answer, so its status and latency say all of it. */
const ONE_ANSWER = 4;
const ESTIMATE_SHIFT = 3;

/** The numbers of a record: its offsets in a slot's row of `nums`, NaN for null. */
const Num = {
  At: 0,
  Created: 1,
  TokensPrompt: 2,
  TokensCompletion: 3,
  ListCost: 4,
  Fee: 5,
  Charged: 6,
  Status: 7,
  AnswerStatus: 8,
  AnswerLatency: 9,
} as const;
type Num = (typeof Num)[keyof typeof Num];
const ROW = 10;

/**
 * Model names kept at most. A record reaches the store only after the planner found the model in the catalog, so
 * the names are catalog slugs; the bound, with a fresh start when reached, keeps catalogs replaced over months from
 * adding up.
 */
const MAX_MODEL_NAMES = 4096;

const toNum = (v: number | null): number => (v === null ? Number.NaN : v);
const fromNum = (v: number): number | null => (Number.isNaN(v) ? null : v);

/**
 * Records in columns: every request's record lives up to an hour, long past the young generation, so as objects
 * each would be promoted and then marked by every full GC. Here a record is a ring slot across typed columns;
 * strings are references to the compiled config's (provider, endpoint, credential, key digest) and to one copy of
 * each model name, and a request's one answer (the common case) is two numbers. get() builds the record the API
 * returns (docs/gateway.md, "Generations, spend, logs, metrics").
 */
export class GenerationStore {
  private readonly slots = new Map<string, number>();
  private readonly ids: (string | undefined)[];
  private readonly keyHashes: (string | undefined)[];
  private readonly models: (string | undefined)[];
  private readonly providers: (string | null)[];
  private readonly endpointIds: (string | null)[];
  private readonly credentialIds: (string | null)[];
  /** provider_responses when it is not ONE_ANSWER: failovers, errors. */
  private readonly responses: (ProviderResponse[] | undefined)[];
  private readonly nums: Float64Array;
  private readonly flags: Uint8Array;
  private readonly modelNames = new Map<string, string>();
  private oldest = 0;
  private held = 0;
  private readonly maxRecords: number;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(opts: { maxRecords?: number; ttlMs?: number; now?: () => number } = {}) {
    this.maxRecords = opts.maxRecords ?? 10_000;
    this.ttlMs = opts.ttlMs ?? 60 * 60 * 1000;
    this.now = opts.now ?? Date.now;
    const column = <T>(empty: T): T[] => Array.from({ length: this.maxRecords }, () => empty);
    this.ids = column(undefined);
    this.keyHashes = column(undefined);
    this.models = column(undefined);
    this.providers = column(null);
    this.endpointIds = column(null);
    this.credentialIds = column(null);
    this.responses = column(undefined);
    this.nums = new Float64Array(this.maxRecords * ROW);
    this.flags = new Uint8Array(this.maxRecords);
  }

  put(apiKeyHash: string, record: NewGeneration): GenerationTicket {
    const at = this.now();
    while (this.held > 0 && (this.held >= this.maxRecords || at - this.numAt(this.oldest, Num.At) > this.ttlMs)) {
      this.evict(this.oldest);
      this.oldest = (this.oldest + 1) % this.maxRecords;
      this.held--;
    }
    const slot = (this.oldest + this.held) % this.maxRecords;
    this.held++;
    this.ids[slot] = record.id;
    this.keyHashes[slot] = apiKeyHash;
    this.models[slot] = this.modelName(record.model);
    this.providers[slot] = record.provider;
    this.endpointIds[slot] = record.endpoint_id;
    this.credentialIds[slot] = record.byok_credential_id;
    const n = slot * ROW;
    const nums = this.nums;
    nums[n + Num.At] = at;
    nums[n + Num.Created] = record.created_at_ms;
    nums[n + Num.TokensPrompt] = toNum(record.tokens_prompt);
    nums[n + Num.TokensCompletion] = toNum(record.tokens_completion);
    nums[n + Num.ListCost] = toNum(record.list_cost_micros);
    nums[n + Num.Fee] = toNum(record.fee_micros);
    nums[n + Num.Charged] = toNum(record.charged_micros);
    nums[n + Num.Status] = record.status;
    let flags = (record.streamed ? STREAMED : 0) | (record.is_byok ? BYOK : 0);
    flags |= ESTIMATES.indexOf(record.usage_estimated) << ESTIMATE_SHIFT;
    const answer = oneAnswer(record);
    if (answer) {
      flags |= ONE_ANSWER;
      nums[n + Num.AnswerStatus] = toNum(answer.status);
      nums[n + Num.AnswerLatency] = answer.latency_ms;
      this.responses[slot] = undefined;
    } else {
      this.responses[slot] = record.provider_responses.map((r) => ({ ...r }));
    }
    this.flags[slot] = flags;
    this.slots.set(record.id, slot);
    return { slot, id: record.id };
  }

  /** The spend a record's ledger write answered with, once it has; nothing when the record is gone. */
  settle(ticket: GenerationTicket, feeMicros: Micros, chargedMicros: Micros): void {
    if (this.ids[ticket.slot] !== ticket.id) return;
    this.nums[ticket.slot * ROW + Num.Fee] = feeMicros;
    this.nums[ticket.slot * ROW + Num.Charged] = chargedMicros;
  }

  /** The record when it exists, is fresh and was made with this API key; undefined otherwise (no existence leak). */
  get(id: string, apiKeyHash: string): GenerationRecord | undefined {
    const slot = this.slots.get(id);
    if (slot === undefined || this.keyHashes[slot] !== apiKeyHash) return undefined;
    if (this.now() - this.numAt(slot, Num.At) > this.ttlMs) {
      this.slots.delete(id);
      return undefined;
    }
    return this.record(slot);
  }

  get size(): number {
    return this.slots.size;
  }

  private record(slot: number): GenerationRecord {
    const flags = this.flags[slot]!;
    const num = (k: Num) => this.numAt(slot, k);
    const provider = this.providers[slot]!;
    const endpointId = this.endpointIds[slot]!;
    const credentialId = this.credentialIds[slot]!;
    return {
      id: this.ids[slot]!,
      model: this.models[slot]!,
      created_at: new Date(num(Num.Created)).toISOString(),
      streamed: (flags & STREAMED) !== 0,
      provider,
      endpoint_id: endpointId,
      byok_credential_id: credentialId,
      is_byok: (flags & BYOK) !== 0,
      provider_responses:
        (flags & ONE_ANSWER) !== 0
          ? [
              {
                provider: provider!,
                endpoint_id: endpointId!,
                credential: credentialId ?? 'shared',
                status: fromNum(num(Num.AnswerStatus)),
                latency_ms: num(Num.AnswerLatency),
              },
            ]
          : this.responses[slot]!.map((r) => ({ ...r })),
      tokens_prompt: fromNum(num(Num.TokensPrompt)),
      tokens_completion: fromNum(num(Num.TokensCompletion)),
      usage_estimated: ESTIMATES[flags >> ESTIMATE_SHIFT]!,
      list_cost_micros: fromNum(num(Num.ListCost)),
      fee_micros: fromNum(num(Num.Fee)),
      charged_micros: fromNum(num(Num.Charged)),
      status: num(Num.Status),
    };
  }

  private evict(slot: number): void {
    const id = this.ids[slot]!;
    // Out of the map already when get() found it expired; another slot's when its id was put again since.
    if (this.slots.get(id) === slot) this.slots.delete(id);
    this.ids[slot] = undefined;
    this.keyHashes[slot] = undefined;
    this.models[slot] = undefined;
    this.responses[slot] = undefined;
  }

  private numAt(slot: number, k: Num): number {
    return this.nums[slot * ROW + k]!;
  }

  /** The request's model string, parsed from its body, is replaced by one kept copy per name. */
  private modelName(model: string): string {
    const known = this.modelNames.get(model);
    if (known !== undefined) return known;
    if (this.modelNames.size >= MAX_MODEL_NAMES) this.modelNames.clear();
    this.modelNames.set(model, model);
    return model;
  }
}

/** The record's one provider response, when it is the serving attempt's answer without an error. */
function oneAnswer(record: NewGeneration): ProviderResponse | undefined {
  if (record.provider_responses.length !== 1) return undefined;
  const r = record.provider_responses[0]!;
  const fits =
    r.error === undefined &&
    r.provider === record.provider &&
    r.endpoint_id === record.endpoint_id &&
    r.credential === (record.byok_credential_id ?? 'shared');
  return fits ? r : undefined;
}
