// What a request may cost, and what it is metered at (docs/ledger.md, "What drives cost"). The rule: meter from the
// side we trust, and bound from both sides.
// - A catalog upstream (a URL the platform configured: the provider itself) is trusted: its well-formed count is
//   metered as reported, even past the bounds below (then flagged, for an alert), never clamped below itself.
// - A tenant-chosen upstream (an Azure endpoint_url: any https host the tenant names) is not: its count is clamped
//   between a floor from the bytes it was sent and relayed (never from the fields a client is expected to read) and
//   the most the request could produce.
// - Admission reserves the most the request can cost: every prompt part at an upper bound, n × the per-choice cap.
// Counts that are not counts (fractional, negative, absurd, missing) become an estimate from the bytes seen, flagged.
// Pure: no I/O, no clock.

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/** Why metering used an estimate instead of the upstream's own count. */
export type EstimateReason = 'missing' | 'invalid' | 'out_of_bounds';

/** Who reported a count: an upstream from the catalog (trusted) or one the tenant chose (`tenantUrl`). */
export type UsageSource = 'catalog' | 'tenant';

export interface MeteredUsage extends Usage {
  /** Absent when the upstream's count was used as reported. */
  estimated?: EstimateReason;
  /** The upstream's count lay outside the bounds: metered as reported (catalog) or clamped into them (tenant). */
  outOfBounds?: 'above' | 'below';
}

/** Ceiling when the catalog gives no context length: no single prompt or choice is larger than this. */
export const USAGE_CEILING_TOKENS = 10_000_000;
/** A reported count past this is not a count (no request is billed a billion tokens; list cost stays exact). */
export const MAX_REPORTED_TOKENS = 1_000_000_000;
/** OpenAI's limit on `n`. */
export const MAX_CHOICES = 128;
/**
 * The floor under a tenant-chosen upstream's count is a pure function of byte counts: what was relayed to the client
 * and what was forwarded to the upstream, less a fixed framing allowance, at one token per FLOOR_BYTES_PER_TOKEN
 * bytes. No field is read: content in whitespace, escapes, an unexpected part type or a field beside `choices` weighs
 * what its bytes weigh. Measured on o200k and cl100k: prose 3.9-5.9 bytes per token, code 5.5-5.8, JSON 3.8, CJK
 * 3-4 (6-8 escaped); an honest answer's text stays under 16 bytes per token (docs/ledger.md, "The floor").
 */
export const FLOOR_BYTES_PER_TOKEN = 16;
/** A buffered answer's framing outside its choices (id, model, usage, an Azure prompt filter report). */
export const ANSWER_FRAMING_BYTES = 1024;
/** Each choice's framing in a buffered answer (index, role, finish reason, an Azure content filter report). */
export const CHOICE_FRAMING_BYTES = 1024;
/** Each SSE event's framing: an honest event carries about one token in 200 (OpenAI) to 700 (Azure) bytes. */
export const EVENT_FRAMING_BYTES = 1024;
/** The forwarded request's framing outside its content (model settings, stream options, message roles). */
export const REQUEST_FRAMING_BYTES = 1024;
/** What one logprob entry may add per token (token, logprob, its bytes array), once plus once per top_logprobs. */
export const LOGPROB_BYTES = 256;
/** OpenAI's limit on top_logprobs. */
const MAX_TOP_LOGPROBS = 20;
/** Estimates (missing or invalid usage): about four bytes per token, rounded up, framing included: they err high. */
const ESTIMATE_BYTES_PER_TOKEN = 4;

const positiveInt = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined;

/** The fields of a request body that drive its cost, validated. */
export interface CostFields {
  /** Choices asked for (`n`, default 1): each is billed. */
  n: number;
  /** The per-choice cap the request sets: the larger of max_tokens and max_completion_tokens (providers differ on which wins). */
  maxTokensPerChoice: number | null;
  /** Content parts that are not text (image_url, file, any unknown type): each may fill the context. */
  mediaParts: number;
  /** Bytes of a `prediction` (predicted outputs): its rejected tokens are billed as completion tokens. */
  predictionBytes: number;
  /** Logprob entries per token the answer carries (1 + top_logprobs) when `logprobs` is asked for, else 0. */
  logprobEntries: number;
}

/** Content part types read as text; any other part is a media part. */
const TEXT_PARTS = new Set(['text', 'refusal']);
const SERVICE_TIERS = new Set(['auto', 'default', 'flex']);

/**
 * Reads the cost-driving fields of a chat completion body, or says why the request cannot be priced (a 400): `n` out
 * of 1..128, a cap that is not a positive integer, audio in or out (the catalog prices text tokens only), web search
 * (priced per call), a service tier that costs more than the catalog price.
 */
export function costFields(body: Record<string, unknown>): CostFields | { error: string } {
  const n = body.n ?? 1;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_CHOICES)
    return { error: `n must be an integer from 1 to ${MAX_CHOICES}` };
  let cap: number | null = null;
  for (const name of ['max_tokens', 'max_completion_tokens'] as const) {
    const v = body[name];
    if (v === undefined || v === null) continue;
    const ok = positiveInt(v);
    if (ok === undefined) return { error: `${name} must be a positive integer` };
    cap = Math.max(cap ?? 0, ok);
  }
  if (body.audio !== undefined && body.audio !== null)
    return { error: 'audio output cannot be priced: the catalog prices text tokens only' };
  if (Array.isArray(body.modalities) && body.modalities.some((m) => m !== 'text'))
    return { error: 'only the text modality can be priced: the catalog prices text tokens only' };
  if (body.web_search_options !== undefined && body.web_search_options !== null)
    return { error: 'web search cannot be priced: the catalog has no price per search' };
  const tier = body.service_tier;
  if (tier !== undefined && tier !== null && !(typeof tier === 'string' && SERVICE_TIERS.has(tier)))
    return { error: 'service_tier must be auto, default or flex: other tiers cost more than the catalog price' };
  let mediaParts = 0;
  if (Array.isArray(body.messages)) {
    for (const m of body.messages as unknown[]) {
      const content = typeof m === 'object' && m !== null ? (m as { content?: unknown }).content : undefined;
      if (!Array.isArray(content)) continue;
      for (const p of content as unknown[]) {
        const type = typeof p === 'object' && p !== null ? (p as { type?: unknown }).type : undefined;
        if (type === 'input_audio')
          return { error: 'audio input cannot be priced: the catalog prices text tokens only' };
        if (typeof type !== 'string' || !TEXT_PARTS.has(type)) mediaParts++;
      }
    }
  }
  const prediction = body.prediction;
  // Rare: a byte count of its JSON bounds its tokens (every token covers at least one byte).
  const predictionBytes =
    prediction === undefined || prediction === null ? 0 : Buffer.byteLength(JSON.stringify(prediction), 'utf8');
  // Not validated here (the provider answers a bad top_logprobs): only read, within OpenAI's limit, for the floor.
  const top = body.top_logprobs;
  const logprobEntries =
    body.logprobs === true
      ? 1 + (typeof top === 'number' && Number.isInteger(top) ? Math.min(Math.max(top, 0), MAX_TOP_LOGPROBS) : 0)
      : 0;
  return { n, maxTokensPerChoice: cap, mediaParts, predictionBytes, logprobEntries };
}

/** What the catalog says of a model. */
export interface ModelLimits {
  contextLength: number | null;
  maxOutputTokens: number | null;
}

/** The most a request can be billed for, per side: what admission reserves and what bounds a count from above. */
export interface UsageBounds {
  maxPromptTokens: number;
  maxCompletionTokens: number;
}

/**
 * Upper bounds from the request and the catalog. Prompt: its body's UTF-8 bytes (every token of a byte-level or
 * byte-fallback tokenizer covers at least one byte, and each message's JSON framing outweighs its template tokens)
 * plus, per media part, the context length (the catalog has no per-part maximum), within the context length.
 * Completion: n × the per-choice cap (the request's, the catalog's maxOutputTokens, the context length: the least),
 * plus a prediction's bytes per choice.
 */
export function usageBounds(model: ModelLimits, cost: CostFields, requestBytes: number): UsageBounds {
  const context = positiveInt(model.contextLength) ?? USAGE_CEILING_TOKENS;
  const perChoice =
    Math.min(cost.maxTokensPerChoice ?? Infinity, positiveInt(model.maxOutputTokens) ?? Infinity, context) +
    cost.predictionBytes;
  return {
    maxPromptTokens: Math.min(context, Math.max(0, Math.ceil(requestBytes)) + cost.mediaParts * context),
    maxCompletionTokens: cost.n * perChoice,
  };
}

/** What admission reserves: the upper bounds, so concurrent requests cannot together pass a limit. */
export function reservedTokens(bounds: UsageBounds): Usage {
  return { promptTokens: bounds.maxPromptTokens, completionTokens: bounds.maxCompletionTokens };
}

/** The upstream's `usage` when it is well-formed (two counts in 0..MAX_REPORTED_TOKENS); otherwise why not. */
export function readUsage(value: unknown): { usage: Usage } | { problem: 'missing' | 'invalid' } {
  if (value === undefined || value === null) return { problem: 'missing' };
  if (typeof value !== 'object') return { problem: 'invalid' };
  const { prompt_tokens: prompt, completion_tokens: completion } = value as {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
  };
  const count = (v: unknown): v is number =>
    typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= MAX_REPORTED_TOKENS;
  if (!count(prompt) || !count(completion)) return { problem: 'invalid' };
  return { usage: { promptTokens: prompt, completionTokens: completion } };
}

/** What crossed the gateway for one request, for estimates and floors. */
export interface Seen {
  requestBytes: number;
  responseBytes: number;
  /** Floors from the content (a tenant upstream's count is never below them); 0 for a catalog upstream. */
  minPromptTokens: number;
  minCompletionTokens: number;
}

/** Within [lo, hi]; the floor wins when they cross: delivered content is evidence, a request cap only a promise. */
const clamp = (v: number, lo: number, hi: number) => Math.max(lo, Math.min(v, hi));

/** What a request is metered with (the table in docs/ledger.md). */
export function meteredUsage(reported: unknown, bounds: UsageBounds, source: UsageSource, seen: Seen): MeteredUsage {
  const read = readUsage(reported);
  if ('problem' in read) {
    return {
      promptTokens: clamp(
        Math.ceil(seen.requestBytes / ESTIMATE_BYTES_PER_TOKEN),
        seen.minPromptTokens,
        bounds.maxPromptTokens,
      ),
      completionTokens: clamp(
        Math.ceil(seen.responseBytes / ESTIMATE_BYTES_PER_TOKEN),
        seen.minCompletionTokens,
        bounds.maxCompletionTokens,
      ),
      estimated: read.problem,
    };
  }
  const { promptTokens: p, completionTokens: c } = read.usage;
  const above = p > bounds.maxPromptTokens || c > bounds.maxCompletionTokens;
  if (source === 'catalog') return above ? { promptTokens: p, completionTokens: c, outOfBounds: 'above' } : read.usage;
  const below = p < seen.minPromptTokens || c < seen.minCompletionTokens;
  if (!above && !below) return read.usage;
  return {
    promptTokens: clamp(p, seen.minPromptTokens, bounds.maxPromptTokens),
    completionTokens: clamp(c, seen.minCompletionTokens, bounds.maxCompletionTokens),
    estimated: 'out_of_bounds',
    outOfBounds: above ? 'above' : 'below',
  };
}

/** Bytes per floor token of an answer: logprobs add their entries' bytes to every token. */
const answerBytesPerToken = (cost: Pick<CostFields, 'logprobEntries'>) =>
  FLOOR_BYTES_PER_TOKEN + LOGPROB_BYTES * cost.logprobEntries;

/** The floor of a buffered answer: its body's bytes less the answer's and each choice's framing. */
export function bodyFloorTokens(bodyBytes: number, cost: Pick<CostFields, 'n' | 'logprobEntries'>): number {
  return Math.ceil(
    Math.max(0, bodyBytes - ANSWER_FRAMING_BYTES - CHOICE_FRAMING_BYTES * cost.n) / answerBytesPerToken(cost),
  );
}

/** What an SSE stream relayed, as the scanner counts it (stream-relay.ts). */
export interface StreamBytes {
  /** Every byte relayed. */
  bytes: number;
  /** Summed over events: each event's bytes past EVENT_FRAMING_BYTES. */
  excessBytes: number;
  /** Events that carried a `data` field. */
  dataEvents: number;
  /** The body was one plain JSON object (an upstream that answered `stream: true` without SSE). */
  plainJson: boolean;
}

/** What an event's bytes add to a stream's `excessBytes`. */
export const eventExcessBytes = (eventBytes: number): number => Math.max(0, eventBytes - EVENT_FRAMING_BYTES);

/**
 * Events an honest stream sends without a token: per choice its role and its finish, then the usage event, [DONE]
 * and a prompt filter report. Every other event carries at least one token.
 */
const tokenlessEvents = (n: number) => 2 * n + 3;

/**
 * The floor of a stream: its events' bytes past their framing, and at least one token per data event past the
 * tokenless ones (so content cut into events under the framing allowance still counts). A plain JSON body is floored
 * as a buffered answer.
 */
export function streamFloorTokens(s: StreamBytes, cost: Pick<CostFields, 'n' | 'logprobEntries'>): number {
  if (s.plainJson) return bodyFloorTokens(s.bytes, cost);
  return Math.max(Math.ceil(s.excessBytes / answerBytesPerToken(cost)), s.dataEvents - tokenlessEvents(cost.n));
}

/**
 * The prompt's floor: the whole forwarded body's bytes (messages, tools, any field: a tenant's endpoint reads them
 * all) less the request framing and a `prediction`'s bytes (billed as completion, not prompt).
 */
export function promptFloorTokens(forwardedBytes: number, cost: Pick<CostFields, 'predictionBytes'>): number {
  return Math.ceil(Math.max(0, forwardedBytes - REQUEST_FRAMING_BYTES - cost.predictionBytes) / FLOOR_BYTES_PER_TOKEN);
}
