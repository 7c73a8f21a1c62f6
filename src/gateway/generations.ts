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

interface StoredGeneration {
  apiKeyHash: string;
  at: number;
  record: GenerationRecord;
}

export class GenerationStore {
  private readonly records = new Map<string, StoredGeneration>();
  /**
   * The same entries in arrival order, a ring: evicting the oldest is O(1) (a Map walked from its front skips its
   * deleted slots). One object per record serves both, as every request's record outlives several scavenges.
   */
  private readonly order: (StoredGeneration | undefined)[];
  private oldest = 0;
  private held = 0;
  private readonly maxRecords: number;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(opts: { maxRecords?: number; ttlMs?: number; now?: () => number } = {}) {
    this.maxRecords = opts.maxRecords ?? 10_000;
    this.ttlMs = opts.ttlMs ?? 60 * 60 * 1000;
    this.now = opts.now ?? Date.now;
    this.order = Array.from({ length: this.maxRecords }, () => undefined);
  }

  put(apiKeyHash: string, record: GenerationRecord): void {
    const at = this.now();
    while (this.held > 0 && (this.held >= this.maxRecords || at - this.order[this.oldest]!.at > this.ttlMs)) {
      this.records.delete(this.order[this.oldest]!.record.id);
      this.order[this.oldest] = undefined;
      this.oldest = (this.oldest + 1) % this.maxRecords;
      this.held--;
    }
    const entry: StoredGeneration = { apiKeyHash, at, record };
    this.order[(this.oldest + this.held) % this.maxRecords] = entry;
    this.held++;
    this.records.set(record.id, entry);
  }

  /** The record when it exists, is fresh and was made with this API key; undefined otherwise (no existence leak). */
  get(id: string, apiKeyHash: string): GenerationRecord | undefined {
    const entry = this.records.get(id);
    if (!entry || entry.apiKeyHash !== apiKeyHash) return undefined;
    if (this.now() - entry.at > this.ttlMs) {
      this.records.delete(id);
      return undefined;
    }
    return entry.record;
  }

  get size(): number {
    return this.records.size;
  }
}
