// What happens when a request is over, answered or not: usage → list cost → the generation record, the request's
// log line and metrics, and the spend report to the ledger (settling the admission's reservation, or giving it back).
// The ledger write is off the response path: its result only amends the generation record.
import type { Logger } from 'pino';
import type { RateHold, Reservation, SpendGate } from '../contract/spend-gate.ts';
import { listCostMicros } from '../domain/catalog.ts';
import type { Attempt, CompiledAccount, CompiledApiKey, RequestIdentity } from '../domain/index.ts';
import { type AccessLog, pinoAccessLog } from './access-log.ts';
import type { GatewayCatalog } from './catalog.ts';
import type { GenerationStore, GenerationTicket, NewGeneration, ProviderResponse } from './generations.ts';
import type { GatewayMetrics } from './metrics.ts';
import { CLIENT_WENT_AWAY } from './stream-relay.ts';
import type { MeteredUsage, UsageSource } from './usage.ts';

/** The metric label of an attempt: the account's own credential, or the platform's shared capacity. */
export const attemptKind = (a: Attempt): 'byok' | 'shared' => (a.kind === 'credential' ? 'byok' : 'shared');

/** The request as metering needs it. */
export interface MeteredRequest {
  generationId: string;
  model: string;
  /** sha256 of the gateway API key (hex). */
  apiKeyHash: string;
  account: CompiledAccount;
  identity: RequestIdentity;
  at: Date;
  /** performance.now() when the request arrived. */
  started: number;
  streamed: boolean;
  reservation: Reservation | null;
  /** What the key's rate limits counted at admission (null: the key has none). */
  rateHold?: RateHold | null;
  /** The key's compiled entry (its name labels the key spend metric). */
  key?: CompiledApiKey | undefined;
  responses: readonly ProviderResponse[];
  /** Time spent waiting on upstreams. */
  upstreamMs: number;
  /** performance.now() when a stream's first byte was committed to the client. */
  firstByteAt?: number | undefined;
}

export interface Served {
  attempt: Attempt;
  usage: MeteredUsage;
  catalog: GatewayCatalog;
  /** Whose count `usage` came from: a catalog upstream (trusted) or a URL the tenant chose. */
  upstream: UsageSource;
}

export class Metering {
  private readonly generations: GenerationStore;
  private readonly metrics: GatewayMetrics;
  private readonly spendGate: SpendGate | undefined;
  private readonly log: Logger | undefined;
  private readonly accessLog: AccessLog;

  constructor(deps: {
    generations: GenerationStore;
    metrics: GatewayMetrics;
    spendGate?: SpendGate | undefined;
    log?: Logger | undefined;
    accessLog?: AccessLog | undefined;
  }) {
    this.generations = deps.generations;
    this.metrics = deps.metrics;
    this.spendGate = deps.spendGate;
    this.log = deps.log;
    this.accessLog = deps.accessLog ?? pinoAccessLog(deps.log);
  }

  /** Records a finished request; `served` is absent when no attempt answered. */
  complete(req: MeteredRequest, status: number, served: Served | null, streamError?: string): void {
    const usage = served?.usage ?? null;
    const endpoint = served ? served.catalog.endpoint(req.model, served.attempt.endpoint.id) : undefined;
    let listCost: number | null = null;
    try {
      listCost = endpoint && usage ? listCostMicros(endpoint.price, usage) : null;
    } catch (err) {
      // Bounded usage cannot overflow the pricing math; if a catalog price still does, the answer stands, unmetered.
      this.log?.error(
        { generation_id: req.generationId, err: err instanceof Error ? err.message : String(err) },
        'list cost failed',
      );
    }
    if (usage?.estimated) {
      this.metrics.usageEstimated.inc({ reason: usage.estimated });
      this.log?.warn(
        {
          generation_id: req.generationId,
          reason: usage.estimated,
          prompt_tokens: usage.promptTokens,
          completion_tokens: usage.completionTokens,
        },
        'upstream usage unusable: metered an estimate',
      );
    }
    if (usage?.outOfBounds && served) {
      // A catalog upstream billed past what the request allows (metered as reported: budgets may pass their limit by
      // it), or a tenant's endpoint answered outside its bounds (clamped): either way someone should look.
      this.metrics.usageOutOfBounds.inc({ upstream: served.upstream, bound: usage.outOfBounds });
      this.log?.warn(
        {
          generation_id: req.generationId,
          upstream: served.upstream,
          bound: usage.outOfBounds,
          provider: served.attempt.provider,
          prompt_tokens: usage.promptTokens,
          completion_tokens: usage.completionTokens,
        },
        served.upstream === 'catalog'
          ? 'upstream usage out of bounds: metered as reported'
          : 'tenant upstream usage out of bounds: clamped',
      );
    }
    const attempt = served?.attempt ?? null;
    const record: NewGeneration = {
      id: req.generationId,
      model: req.model,
      created_at_ms: req.at.getTime(),
      streamed: req.streamed,
      provider: attempt?.provider ?? null,
      endpoint_id: attempt?.endpoint.id ?? null,
      byok_credential_id: attempt?.kind === 'credential' ? attempt.credentialId : null,
      is_byok: attempt?.kind === 'credential',
      // The store keeps the common one answer as numbers and copies any other list.
      provider_responses: req.responses,
      tokens_prompt: usage?.promptTokens ?? null,
      tokens_completion: usage?.completionTokens ?? null,
      usage_estimated: usage?.estimated ?? null,
      list_cost_micros: listCost,
      fee_micros: null,
      charged_micros: null,
      status,
    };
    const ticket = this.generations.put(req.apiKeyHash, record);
    const now = performance.now();
    const total = now - req.started;
    const overheadMs = Math.max(0, total - req.upstreamMs);
    this.metrics.overheadOf(req.streamed, overheadMs / 1000);
    this.observe(req, status, attempt, usage, listCost, now, streamError);
    this.accessLog.write({
      generationId: req.generationId,
      account: req.account.namespace,
      apiKeyHash: req.apiKeyHash,
      model: req.model,
      status,
      stream: req.streamed,
      streamError,
      providerResponses: req.responses,
      durationMs: total,
      overheadMs,
    });
    this.report(req, ticket, attempt, usage, listCost);
    // The key's in-flight slot frees now, and its tokens per minute count what was used (0 when nothing answered).
    if (req.rateHold)
      void this.spendGate?.settleRate?.(req.rateHold, usage ? usage.promptTokens + usage.completionTokens : 0);
    if (listCost !== null && listCost > 0 && req.key?.name)
      this.metrics.keySpend(`${req.account.namespace}/${req.key.name}`, listCost);
  }

  /** The GenAI series of the request: duration, time to first token, tokens, list cost (docs/gateway.md, "Metrics"). */
  private observe(
    req: MeteredRequest,
    status: number,
    attempt: Attempt | null,
    usage: MeteredUsage | null,
    listCost: number | null,
    now: number,
    streamError: string | undefined,
  ): void {
    // The model passed the planner (it is a catalog slug); the provider is the serving attempt's, else the last tried.
    const provider = attempt?.provider ?? req.responses[req.responses.length - 1]?.provider ?? '';
    const series = this.metrics.series(provider, req.model);
    const errorType =
      streamError !== undefined
        ? streamError === CLIENT_WENT_AWAY
          ? 'client_closed'
          : 'stream_broken'
        : status >= 400
          ? status
          : '';
    series.duration((now - req.started) / 1000, errorType);
    if (!attempt || !usage) return;
    series.tokens(usage.promptTokens, usage.completionTokens);
    if (listCost !== null) series.cost(attemptKind(attempt), 'list', listCost);
    if (req.firstByteAt !== undefined && streamError === undefined) {
      series.firstToken((req.firstByteAt - req.started) / 1000);
      if (usage.completionTokens > 1 && !usage.estimated)
        series.perOutputToken((now - req.firstByteAt) / 1000 / (usage.completionTokens - 1));
    }
  }

  private report(
    req: MeteredRequest,
    ticket: GenerationTicket,
    attempt: Attempt | null,
    usage: MeteredUsage | null,
    listCost: number | null,
  ): void {
    const gate = this.spendGate;
    if (!gate) return;
    if (!attempt || !usage || listCost === null) {
      void gate.release(req.reservation);
      return;
    }
    gate
      .record({
        reservation: req.reservation,
        account: req.account,
        who: req.identity,
        at: req.at,
        generationId: req.generationId,
        ...(req.key?.name ? { keyName: req.key.name } : {}),
        model: req.model,
        endpointId: attempt.endpoint.id,
        provider: attempt.provider,
        byokCredentialId: attempt.kind === 'credential' ? attempt.credentialId : null,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        listCostMicros: listCost,
      })
      .then(
        (spend) => {
          this.generations.settle(ticket, spend.feeMicros, spend.chargedMicros);
          const series = this.metrics.series(attempt.provider, req.model);
          const kind = attemptKind(attempt);
          series.cost(kind, 'fee', spend.feeMicros);
          series.cost(kind, 'charged', spend.chargedMicros);
        },
        (err: unknown) =>
          this.log?.error(
            { generation_id: req.generationId, err: err instanceof Error ? err.message : String(err) },
            'spend record failed',
          ),
      );
  }
}
