// Token usage as an upstream reports it is tenant input: a tenant picks its upstream (an Azure endpoint_url is any
// https host), so `usage` may be fractional, negative, huge or absent. Nothing here trusts it: counts must be
// non-negative safe integers within what the request could have produced, and when they are not (or a stream ends
// before its usage chunk) the gateway meters an estimate from what it saw, flagged as such. Pure.

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/** Why metering used an estimate instead of the upstream's own count. */
export type EstimateReason = 'missing' | 'invalid' | 'out_of_bounds';

export interface MeteredUsage extends Usage {
  /** Absent when the upstream's count was used as reported. */
  estimated?: EstimateReason;
}

/** Per-request ceilings on reported usage. */
export interface UsageBounds {
  /** The model's context length when the catalog knows it; else a generous ceiling. */
  maxPromptTokens: number;
  /** The request's max_tokens (or max_completion_tokens) when given, else the context length, else the ceiling. */
  maxCompletionTokens: number;
}

/** Ceiling when neither the catalog nor the request bounds a count: no single request is larger than this. */
export const USAGE_CEILING_TOKENS = 10_000_000;

/** About four bytes of UTF-8 text per token: the usual rule of thumb, rounded up so estimates never undercount. */
const BYTES_PER_TOKEN = 4;

const positiveInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined);

export function usageBounds(contextLength: number | null, request: { max_tokens?: unknown; max_completion_tokens?: unknown }): UsageBounds {
  const context = positiveInt(contextLength) ?? USAGE_CEILING_TOKENS;
  const asked = positiveInt(request.max_completion_tokens) ?? positiveInt(request.max_tokens);
  return { maxPromptTokens: context, maxCompletionTokens: Math.min(asked ?? context, context) };
}

/** The upstream's `usage`, when it is well-formed and within bounds; otherwise why not. */
export function readUsage(value: unknown, bounds: UsageBounds): { usage: Usage } | { problem: EstimateReason } {
  if (value === undefined || value === null) return { problem: 'missing' };
  if (typeof value !== 'object') return { problem: 'invalid' };
  const { prompt_tokens: prompt, completion_tokens: completion } = value as { prompt_tokens?: unknown; completion_tokens?: unknown };
  const count = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  if (!count(prompt) || !count(completion)) return { problem: 'invalid' };
  if ((prompt as number) > bounds.maxPromptTokens || (completion as number) > bounds.maxCompletionTokens) return { problem: 'out_of_bounds' };
  return { usage: { promptTokens: prompt as number, completionTokens: completion as number } };
}

/**
 * A best estimate from what crossed the gateway: the request body for the prompt, the delivered response bytes for
 * the completion (framing included, so it errs high, as budgets should), each clamped to its bound.
 */
export function estimateUsage(requestBytes: number, responseBytes: number, bounds: UsageBounds): Usage {
  return {
    promptTokens: Math.min(Math.ceil(requestBytes / BYTES_PER_TOKEN), bounds.maxPromptTokens),
    completionTokens: Math.min(Math.ceil(responseBytes / BYTES_PER_TOKEN), bounds.maxCompletionTokens),
  };
}

/** What a request is metered with: the upstream's count when usable, else an estimate marked with the reason. */
export function meteredUsage(reported: unknown, bounds: UsageBounds, requestBytes: number, responseBytes: number): MeteredUsage {
  const read = readUsage(reported, bounds);
  if ('usage' in read) return read.usage;
  return { ...estimateUsage(requestBytes, responseBytes, bounds), estimated: read.problem };
}

/** Output reserved for a request that sets no max_tokens on a model whose catalog entry gives no maxOutputTokens. */
export const DEFAULT_RESERVED_OUTPUT_TOKENS = 4096;

/**
 * The most tokens a request can be billed for, as admission reserves it: the prompt estimate, and max_tokens (or the
 * model's maxOutputTokens from the catalog, or DEFAULT_RESERVED_OUTPUT_TOKENS), within the usage bounds.
 */
export function reservedTokens(bounds: UsageBounds, requestBytes: number, request: { max_tokens?: unknown; max_completion_tokens?: unknown }, catalogMaxOutput: number | null): Usage {
  const asked = positiveInt(request.max_completion_tokens) ?? positiveInt(request.max_tokens);
  const output = asked ?? positiveInt(catalogMaxOutput) ?? DEFAULT_RESERVED_OUTPUT_TOKENS;
  return { promptTokens: Math.min(Math.ceil(requestBytes / BYTES_PER_TOKEN), bounds.maxPromptTokens), completionTokens: Math.min(output, bounds.maxCompletionTokens) };
}
