// Prometheus metrics of the gateway, on its own registry. The GenAI ones follow the OpenTelemetry semantic conventions
// translated to Prometheus names (docs/gateway.md, "Metrics"); the rest are the gateway's own `byok_gateway_*`.
// Labels carry provider slugs, catalog model slugs, outcomes and statuses: never account, key or credential ids, and
// never request text the catalog has not validated, so every label set is bounded by the catalog.
// The request path records through bound series (bound-metrics.ts): each (provider, model) binds its series once.
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { BoundCounter, BoundHistogram, type CounterSlot, type HistogramSlot } from './bound-metrics.ts';

export type AttemptKind = 'byok' | 'shared';
export type CostType = 'list' | 'fee' | 'charged';

/** gen_ai.operation.name of chat completions. */
const CHAT = 'chat';

// Bucket boundaries the conventions specify.
const DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
const TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5];
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

type GenAiLabel = 'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model';

/** Everything one (provider, model) records per request, bound once. */
export interface ModelSeries {
  /** gen_ai.server.request.duration; `errorType` '' on success, else an HTTP status or a stream outcome. */
  duration(seconds: number, errorType: number | string): void;
  /** gen_ai.server.time_to_first_token (streams). */
  firstToken(seconds: number): void;
  /** gen_ai.server.time_per_output_token (streams, after the first token). */
  perOutputToken(seconds: number): void;
  /** gen_ai.client.token.usage, input and output. */
  tokens(input: number, output: number): void;
  /** byok_gateway_cost_usd_total, from micros. */
  cost(kind: AttemptKind, type: CostType, micros: number): void;
}

export interface GatewayMetrics {
  registry: Registry;
  requests: BoundCounter<'status'>;
  attempts: BoundCounter<'provider' | 'kind' | 'outcome'>;
  failovers: BoundCounter<'provider' | 'kind'>;
  overhead: BoundHistogram<'stream'>;
  requestDuration: BoundHistogram<GenAiLabel | 'error_type'>;
  timeToFirstToken: BoundHistogram<GenAiLabel>;
  timePerOutputToken: BoundHistogram<GenAiLabel>;
  tokenUsage: BoundHistogram<GenAiLabel | 'gen_ai_token_type'>;
  cost: BoundCounter<'type' | 'provider' | 'model' | 'kind'>;
  budgetRefusals: Counter<'scope' | 'interval'>;
  configVersion: Gauge<'version'>;
  reloads: Counter<'what' | 'result'>;
  usageEstimated: Counter<'reason'>;
  /** Served requests whose upstream count lay outside its bounds (catalog: metered as reported; tenant: clamped). */
  usageOutOfBounds: Counter<'upstream' | 'bound'>;
  /** A request answered with this HTTP status (byok_gateway_requests_total). */
  answered(status: number): void;
  /** A finished attempt; `failedOver` when another attempt follows a failed one. */
  attempt(provider: string, kind: AttemptKind, outcome: string, failedOver: boolean): void;
  /** The gateway's own time in a request (total minus time waiting on upstreams). */
  overheadOf(streamed: boolean, seconds: number): void;
  /** The bound series of a served (provider, catalog model); '' provider when no attempt ran. */
  series(provider: string, model: string): ModelSeries;
  /** A 429 of a key's own rate limit (requests, tokens, in_flight). */
  keyRateLimited(limit: string): void;
  /** What a served request cost at list price (micros), under its key: `<namespace>/<key name>`, bounded (KEY_SERIES_MAX). */
  keySpend(key: string, micros: number): void;
  /** A 402: the budget that refused the request, by scope and window. */
  budgetRefused(scope: string, interval: string): void;
  /** A request without max_tokens served with its answer capped to what its budget granted. */
  maxTokensCapped(): void;
}

/** Keys with a spend series of their own per gateway replica; the rest share key="other". */
export const KEY_SERIES_MAX = 200;
export const OTHER_KEYS = 'other';

/** The per-key series: refusals by a key's own limits, and spend by key with its cardinality bounded. */
function keyMetrics(registers: Registry[]): Pick<GatewayMetrics, 'keyRateLimited' | 'keySpend'> {
  const rateLimited = new Counter({
    name: 'byok_gateway_key_rate_limited_total',
    help: "Requests refused with 429 by their API key's own rate limits, by limit (requests, tokens, in_flight).",
    labelNames: ['limit'],
    registers,
  });
  const spend = new BoundCounter<'key'>({
    name: 'byok_gateway_key_spend_usd_total',
    help: `List cost of served requests by API key (<namespace>/<GatewayAPIKey name>), in USD. At most ${KEY_SERIES_MAX} keys per gateway replica get their own series (the first seen since it started); the others add up under key="${OTHER_KEYS}".`,
    labelNames: ['key'],
    registers,
  });
  const slots = new Map<string, CounterSlot>();
  let others: CounterSlot | undefined;
  return {
    keyRateLimited: (limit) => rateLimited.inc({ limit }),
    keySpend(key, micros) {
      let slot = slots.get(key);
      if (!slot) {
        // Bounded cardinality: past the cap every new key shares one series (labels are `<namespace>/<name>`, never "other").
        if (slots.size < KEY_SERIES_MAX) slots.set(key, (slot = spend.bind({ key })));
        else slot = others ??= spend.bind({ key: OTHER_KEYS });
      }
      slot.inc(micros / 1e6);
    },
  };
}

export function createGatewayMetrics(opts: { defaultMetrics?: boolean } = {}): GatewayMetrics {
  const registry = new Registry();
  const registers = [registry];
  // Standard process_* / nodejs_* names, as the operator and the API server expose them.
  if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });

  const requests = new BoundCounter({
    name: 'byok_gateway_requests_total',
    help: 'Chat completion requests by HTTP status answered.',
    labelNames: ['status'],
    registers,
  });
  const attempts = new BoundCounter({
    name: 'byok_gateway_attempts_total',
    help: 'Upstream attempts by provider, kind (byok or shared) and outcome (ok, rate_limited, upstream_error, rejected, timeout, transport_error, credential_error, stream_broken).',
    labelNames: ['provider', 'kind', 'outcome'],
    registers,
  });
  const failovers = new BoundCounter({
    name: 'byok_gateway_failovers_total',
    help: "Failed attempts followed by another attempt, by the failed attempt's provider and kind.",
    labelNames: ['provider', 'kind'],
    registers,
  });
  const overhead = new BoundHistogram({
    name: 'byok_gateway_overhead_seconds',
    help: 'Time a request spent in the gateway itself (total minus time waiting on upstreams).',
    labelNames: ['stream'],
    buckets: [0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1],
    registers,
  });
  const genAi: GenAiLabel[] = ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model'];
  const requestDuration = new BoundHistogram({
    name: 'gen_ai_server_request_duration_seconds',
    help: 'GenAI server request duration (gen_ai.server.request.duration): arrival to the last byte, of requests that reached an upstream attempt; error_type is the status answered or the stream outcome.',
    labelNames: [...genAi, 'error_type'],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const timeToFirstToken = new BoundHistogram({
    name: 'gen_ai_server_time_to_first_token_seconds',
    help: 'Time to first token of successful streams (gen_ai.server.time_to_first_token): arrival to the first byte relayed, failovers included.',
    labelNames: genAi,
    buckets: TTFT_BUCKETS,
    registers,
  });
  const timePerOutputToken = new BoundHistogram({
    name: 'gen_ai_server_time_per_output_token_seconds',
    help: 'Time per output token after the first of successful streams (gen_ai.server.time_per_output_token).',
    labelNames: genAi,
    buckets: TPOT_BUCKETS,
    registers,
  });
  const tokenUsage = new BoundHistogram({
    name: 'gen_ai_client_token_usage',
    help: 'Input and output tokens per served request (gen_ai.client.token.usage), as metered: the upstream usage, or the estimate billed when it was unusable.',
    labelNames: [...genAi, 'gen_ai_token_type'],
    buckets: TOKEN_BUCKETS,
    registers,
  });
  const cost = new BoundCounter({
    name: 'byok_gateway_cost_usd_total',
    help: 'USD by type: list (catalog price of served requests), fee (BYOK fees charged) and charged (shared-capacity requests charged), by provider, model and kind (byok or shared).',
    labelNames: ['type', 'provider', 'model', 'kind'],
    registers,
  });
  const budgetRefusals = new Counter({
    name: 'byok_gateway_budget_refusals_total',
    help: "Requests refused with 402 by a budget, by the refusing budget's scope (guardrail, workspace) and window (daily, weekly, monthly, lifetime).",
    labelNames: ['scope', 'interval'],
    registers,
  });
  const capped = new Counter({
    name: 'byok_gateway_max_tokens_capped_total',
    help: "Requests without max_tokens served with their answer capped because their budget could not cover the model's longest answer (the x-byok-max-tokens-capped header).",
    registers,
  });

  const statusSlots = new Map<number, CounterSlot>();
  type AttemptSlots = Map<string, { attempt: CounterSlot; failover: CounterSlot | undefined }>;
  /** provider → kind → outcome → slots (attempt, failover). */
  const attemptSlots = new Map<string, Record<AttemptKind, AttemptSlots>>();
  const overheadSlots = { true: overhead.bind({ stream: 'true' }), false: overhead.bind({ stream: 'false' }) };
  const modelSlots = new Map<string, Map<string, ModelSeries>>();
  const refusalSlots = new Map<string, CounterSlot>();

  return {
    registry,
    requests,
    attempts,
    failovers,
    overhead,
    requestDuration,
    timeToFirstToken,
    timePerOutputToken,
    tokenUsage,
    cost,
    budgetRefusals,
    configVersion: new Gauge({
      name: 'byok_gateway_routing_config_info',
      help: 'The loaded routing config version (value 1).',
      labelNames: ['version'],
      registers,
    }),
    usageEstimated: new Counter({
      name: 'byok_gateway_usage_estimated_total',
      help: 'Served requests metered with an estimate because the upstream usage was missing, invalid or out of bounds (reason).',
      labelNames: ['reason'],
      registers,
    }),
    usageOutOfBounds: new Counter({
      name: 'byok_gateway_usage_out_of_bounds_total',
      help: 'Served requests whose upstream usage lay outside the bounds of the request (bound: above its maximum, below the delivered floor). upstream="catalog": metered as reported, so a budget may pass its limit by the excess; upstream="tenant": clamped into the bounds.',
      labelNames: ['upstream', 'bound'],
      registers,
    }),
    reloads: new Counter({
      name: 'byok_gateway_reloads_total',
      help: 'Routing config and catalog reloads by result: ok, pending (a routing config not fully projected yet, which kubelet completes), error (rejected; the last good one stays).',
      labelNames: ['what', 'result'],
      registers,
    }),

    answered(status) {
      let slot = statusSlots.get(status);
      if (!slot) statusSlots.set(status, (slot = requests.bind({ status: String(status) })));
      slot.inc();
    },
    attempt(provider, kind, outcome, failedOver) {
      let byKind = attemptSlots.get(provider);
      if (!byKind) attemptSlots.set(provider, (byKind = { byok: new Map(), shared: new Map() }));
      let slots = byKind[kind].get(outcome);
      if (!slots) {
        slots = {
          attempt: attempts.bind({ provider, kind, outcome }),
          failover: outcome === 'ok' ? undefined : failovers.bind({ provider, kind }),
        };
        byKind[kind].set(outcome, slots);
      }
      slots.attempt.inc();
      if (failedOver) slots.failover?.inc();
    },
    overheadOf(streamed, seconds) {
      (streamed ? overheadSlots.true : overheadSlots.false).observe(seconds);
    },
    series(provider, model) {
      let byModel = modelSlots.get(provider);
      if (!byModel) modelSlots.set(provider, (byModel = new Map()));
      let s = byModel.get(model);
      if (!s)
        byModel.set(
          model,
          (s = new BoundModelSeries(provider, model, {
            requestDuration,
            timeToFirstToken,
            timePerOutputToken,
            tokenUsage,
            cost,
          })),
        );
      return s;
    },
    budgetRefused(scope, interval) {
      const key = `${scope}/${interval}`;
      let slot = refusalSlots.get(key);
      if (!slot) refusalSlots.set(key, (slot = budgetRefusals.labels({ scope, interval })));
      slot.inc();
    },
    maxTokensCapped() {
      capped.inc();
    },
    ...keyMetrics(registers),
  };
}

class BoundModelSeries implements ModelSeries {
  private readonly ok: HistogramSlot;
  private readonly errors = new Map<number | string, HistogramSlot>();
  private readonly ttft: HistogramSlot;
  private readonly tpot: HistogramSlot;
  private readonly input: HistogramSlot;
  private readonly output: HistogramSlot;
  private readonly costs: Record<AttemptKind, Map<CostType, CounterSlot>> = { byok: new Map(), shared: new Map() };
  private readonly labels: Record<GenAiLabel, string>;
  private readonly metrics: Pick<
    GatewayMetrics,
    'requestDuration' | 'timeToFirstToken' | 'timePerOutputToken' | 'tokenUsage' | 'cost'
  >;

  constructor(provider: string, model: string, metrics: BoundModelSeries['metrics']) {
    this.metrics = metrics;
    this.labels = { gen_ai_operation_name: CHAT, gen_ai_provider_name: provider, gen_ai_request_model: model };
    this.ok = metrics.requestDuration.bind(this.labels);
    this.ttft = metrics.timeToFirstToken.bind(this.labels);
    this.tpot = metrics.timePerOutputToken.bind(this.labels);
    this.input = metrics.tokenUsage.bind({ ...this.labels, gen_ai_token_type: 'input' });
    this.output = metrics.tokenUsage.bind({ ...this.labels, gen_ai_token_type: 'output' });
  }

  duration(seconds: number, errorType: number | string): void {
    if (errorType === '') return this.ok.observe(seconds);
    let slot = this.errors.get(errorType);
    if (!slot)
      this.errors.set(
        errorType,
        (slot = this.metrics.requestDuration.bind({ ...this.labels, error_type: String(errorType) })),
      );
    slot.observe(seconds);
  }

  firstToken(seconds: number): void {
    this.ttft.observe(seconds);
  }

  perOutputToken(seconds: number): void {
    this.tpot.observe(seconds);
  }

  tokens(input: number, output: number): void {
    this.input.observe(input);
    this.output.observe(output);
  }

  cost(kind: AttemptKind, type: CostType, micros: number): void {
    if (!(micros > 0)) return;
    let slot = this.costs[kind].get(type);
    if (!slot)
      this.costs[kind].set(
        type,
        (slot = this.metrics.cost.bind({
          type,
          provider: this.labels.gen_ai_provider_name,
          model: this.labels.gen_ai_request_model,
          kind,
        })),
      );
    slot.inc(micros / 1_000_000);
  }
}
