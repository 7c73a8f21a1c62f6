// POST /api/v1/chat/completions: one CompletionRequest per call, holding the request's state as fields, with its
// phases as methods: read → authenticate → plan → admit → attempt → answer. Metering runs whatever the answer.
import { hash as digestOnce, randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RateDecision, RateHold, Reservation, SpendGate } from '../contract/spend-gate.ts';
import { GATEWAY_KEY_PREFIX, MANAGEMENT_KEY_PREFIX } from '../domain/api-keys.ts';
import { listCostMicros } from '../domain/catalog.ts';
import { modelSlugHint } from '../domain/hints.ts';
import type { Attempt, CompiledAccount, CompiledApiKey, Micros, RequestIdentity, RoutePlan } from '../domain/index.ts';
import { windowOf } from '../ledger/windows.ts';
import { BundleError, type GatewayRequest, type PlanOutcome } from '../sdk/index.ts';
import {
  AttemptJournal,
  type AttemptLoopDeps,
  bufferedSink,
  ClientLink,
  failureAnswer,
  type Outcome,
  runAttempts,
  streamingSink,
} from './attempts.ts';
import {
  affordableTokens,
  CAPPED_HEADER,
  CAPPED_SHARE,
  capField,
  describeBudget,
  MIN_CAPPED_TOKENS,
  refusalReason,
} from './budget-cap.ts';
import type { GatewayCatalog } from './catalog.ts';
import { healthOutcome } from './health.ts';
import { attemptKind, type MeteredRequest } from './metering.ts';
import { type GatewayRuntime, type SpecError, specError } from './runtime.ts';
import { StreamRelay } from './stream-relay.ts';
import { type AuthOwner, type UpstreamRequest, UpstreamSetupError } from './upstream.ts';
import {
  bodyFloorTokens,
  type CostFields,
  costFields,
  type ModelLimits,
  meteredUsage,
  promptFloorTokens,
  reservedTokens,
  type Seen,
  streamFloorTokens,
  USAGE_CEILING_TOKENS,
  type UsageBounds,
  type UsageSource,
  usageBounds,
} from './usage.ts';

const PLAN_ERROR_STATUS: Record<string, number> = {
  model_not_in_catalog: 400,
  no_compliant_endpoint: 404,
  no_available_endpoint: 404,
};

/** The gateway API key's digest from `Authorization: Bearer <key>` (the scheme is case-insensitive, RFC 9110 §11.1). */
export function apiKeyHash(authorization: string | undefined): { hash: string } | SpecError {
  const key =
    authorization !== undefined && authorization.length > 7 && authorization.slice(0, 7).toLowerCase() === 'bearer '
      ? authorization.slice(7).trim()
      : '';
  if (key === '') return specError(401, 'missing gateway API key: send Authorization: Bearer <key>');
  // The other door's key: said so (the prefix only, never the key), or SDKs report a bare "invalid key".
  if (key.startsWith(MANAGEMENT_KEY_PREFIX)) {
    return specError(
      401,
      `this is a management key (${MANAGEMENT_KEY_PREFIX}…), which only the REST API takes; the gateway takes a gateway API key (${GATEWAY_KEY_PREFIX}…): create one with \`byok-operator gateway-key create\``,
      { reason: 'management_key_at_gateway' },
    );
  }
  return { hash: digestOnce('sha256', key, 'hex') };
}

/** The answer to a key the planner refuses, the same on every route that takes a key. */
export function keyRefusal(reason: Exclude<PlanOutcome, { ok: true }>['reason']): SpecError {
  switch (reason) {
    case 'no-workspace':
      return specError(403, 'the API key has no workspace and the account has no default workspace');
    // Never settled by order: the key is refused until one account holds its hash (the others' keys say Conflicting).
    case 'api-key-contested':
      return specError(
        403,
        'this gateway API key is claimed by more than one account and is refused until only one holds it',
      );
    case 'api-key-expired':
      return specError(401, 'the gateway API key has expired');
    case 'unknown-api-key':
      return specError(401, 'invalid gateway API key');
  }
}

/** OpenRouter `provider` preferences → the planner's request fields; an error message on a wrong type. */
export function providerPreferences(
  value: unknown,
): { ok: true; prefs: Partial<GatewayRequest> } | { ok: false; message: string } {
  if (value === undefined || value === null) return { ok: true, prefs: {} };
  if (typeof value !== 'object' || Array.isArray(value)) return { ok: false, message: 'provider must be an object' };
  const p = value as Record<string, unknown>;
  const prefs: Partial<GatewayRequest> = {};
  const list = (name: 'order' | 'only') => {
    const v = p[name];
    if (v === undefined || v === null) return null;
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && x.length > 0)) return false;
    return v as string[];
  };
  const order = list('order');
  const only = list('only');
  if (order === false)
    return { ok: false, message: 'provider.order must be an array of provider slugs or endpoint ids' };
  if (only === false) return { ok: false, message: 'provider.only must be an array of provider slugs or endpoint ids' };
  if (order) prefs.providerOrder = order;
  if (only) prefs.providerOnly = only;
  if (p.zdr !== undefined && p.zdr !== null) {
    if (typeof p.zdr !== 'boolean') return { ok: false, message: 'provider.zdr must be a boolean' };
    prefs.requireZdr = p.zdr;
  }
  if (p.data_collection !== undefined && p.data_collection !== null) {
    if (p.data_collection !== 'allow' && p.data_collection !== 'deny')
      return { ok: false, message: "provider.data_collection must be 'allow' or 'deny'" };
    prefs.denyDataCollection = p.data_collection === 'deny';
  }
  return { ok: true, prefs };
}

// Generation ids keep randomUUID()'s v4 shape and its uniqueness across replicas (the ledger keys reservations by
// them): the first 80 bits, version and variant included, are random per process, the last 48 count its requests.
// About 500 bytes less garbage per request than a fresh randomUUID(). Reading a generation needs the API key that
// made it, so a guessable neighbour reveals nothing.
const GENERATION_ID_PREFIX = `gen-${randomUUID().slice(0, 24)}`;
let generationCount = 0;
export const nextGenerationId = (): string =>
  `${GENERATION_ID_PREFIX}${(generationCount++).toString(16).padStart(12, '0')}`;

/** The route handler. */
export function chatCompletions(rt: GatewayRuntime): (req: FastifyRequest, reply: FastifyReply) => Promise<unknown> {
  return (req, reply) => new CompletionRequest(rt, req, reply).handle();
}

/** One chat completion request, from its body to its answer. */
export class CompletionRequest implements MeteredRequest {
  readonly started = performance.now();
  readonly at = new Date();
  readonly generationId = nextGenerationId();
  apiKeyHash = '';
  model = '';
  streamed = false;
  account!: CompiledAccount;
  identity!: RequestIdentity;
  reservation: Reservation | null = null;
  rateHold: RateHold | null = null;
  key: CompiledApiKey | undefined;
  firstByteAt: number | undefined;
  private plan!: RoutePlan;
  private catalog!: GatewayCatalog;
  private bounds!: UsageBounds;
  private limits!: ModelLimits;
  private cost!: CostFields;
  /** The per-choice max_tokens forwarded to a request that set none, when its budget could not cover the longest answer. */
  private capped: number | null = null;
  private requestBytes = 0;
  /** Whether the attempt prepared last (the one that commits) goes to a URL the tenant chose (docs/ledger.md, "What drives cost"). */
  private tenantUpstream = false;
  /** The body sent upstream: the client's without `model` and `provider`. */
  private forward: Record<string, unknown> = {};
  private prefs: Partial<GatewayRequest> = {};
  private readonly client = new ClientLink();
  private readonly journal: AttemptJournal;
  private readonly rt: GatewayRuntime;
  private readonly req: FastifyRequest;
  private readonly reply: FastifyReply;

  constructor(rt: GatewayRuntime, req: FastifyRequest, reply: FastifyReply) {
    this.rt = rt;
    this.req = req;
    this.reply = reply;
    this.journal = new AttemptJournal((a, outcome, status, last) => this.observe(a, outcome, status, last));
  }

  get responses() {
    return this.journal.responses;
  }

  get upstreamMs() {
    return this.journal.upstreamMs;
  }

  async handle(): Promise<unknown> {
    const refused = this.authenticate() ?? this.read() ?? this.route() ?? (await this.admit());
    if (refused) return this.answer(refused.error.code, refused);
    // 'close' also fires after a normal response; only an unfinished one means the client went away.
    this.reply.raw.on('close', () => {
      if (!this.reply.raw.writableFinished) this.client.leave();
    });
    return this.streamed ? this.attemptStreaming() : this.attemptBuffered();
  }

  /** The body: a JSON object with a model; `stream` a boolean; `provider` preferences well-typed. */
  private read(): SpecError | undefined {
    const body = this.req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      return specError(400, 'the request body must be a JSON object');
    const { model, provider, stream, ...rest } = body as Record<string, unknown>;
    if (typeof model !== 'string' || model === '')
      return specError(400, 'model is required (a model slug such as openai/gpt-4o)');
    if (stream !== undefined && typeof stream !== 'boolean') return specError(400, 'stream must be a boolean');
    const prefs = providerPreferences(provider);
    if (!prefs.ok) return specError(400, prefs.message);
    this.model = model;
    this.prefs = prefs.prefs;
    this.streamed = stream === true;
    const cost = costFields(rest);
    if ('error' in cost) return specError(400, cost.error);
    this.cost = cost;
    this.forward = rest;
    // UTF-8 bytes of the client's body (fastify holds a body to its content-length): an upper bound on its text tokens.
    this.requestBytes =
      Number(this.req.headers['content-length'] ?? 0) || Buffer.byteLength(JSON.stringify(body), 'utf8');
    if (this.streamed) {
      // Usage arrives only in the final chunk, and only when asked for: needed for list cost and fees.
      const asked = rest.stream_options;
      this.forward = {
        ...rest,
        stream: true,
        stream_options: { ...(typeof asked === 'object' && asked !== null ? asked : {}), include_usage: true },
      };
    }
    return undefined;
  }

  private authenticate(): SpecError | undefined {
    const who = apiKeyHash(this.req.headers.authorization);
    if ('error' in who) return who;
    this.apiKeyHash = who.hash;
    return undefined;
  }

  /** The key's account and workspace, and the plan of attempts (spec 1.1). */
  private route(): SpecError | undefined {
    const config = this.rt.routing.current();
    if (!config) return specError(503, 'the gateway has not loaded a routing config yet');
    this.catalog = this.rt.catalog.current();
    const known = config.apiKey(this.apiKeyHash);
    // The config's copy of the digest: this request's own then dies young instead of living on in its generation record.
    if (known) this.apiKeyHash = known.key.hash;
    const userId = known?.key.owner ?? null;
    const outcome = this.rt.routing.planFor(
      {
        model: this.model,
        apiKeyHash: this.apiKeyHash,
        userId,
        baseAddress: this.rt.baseAddress,
        isVideoGeneration: false,
        ...this.prefs,
      },
      this.catalog.catalog,
      this.at,
    );
    if (!outcome.ok) return keyRefusal(outcome.reason);
    this.account = outcome.account;
    this.identity = { apiKeyHash: this.apiKeyHash, workspaceId: outcome.workspaceId, userId };
    this.key = known?.key;
    const allowed = this.key?.models;
    // The key's model allowlist: before any endpoint is looked at, so a refused model says nothing about routing.
    if (allowed !== undefined && !allowed.includes(this.model)) return modelNotAllowed(this.model, allowed);
    this.plan = outcome.plan;
    if (this.plan.attempts.length === 0) {
      const code = this.plan.error?.code ?? 'no_available_endpoint';
      const status = PLAN_ERROR_STATUS[code] ?? 404;
      // `gpt-5` for `openai/gpt-5` is the usual slip with the OpenAI SDK: name the slug, same status and body shape.
      const hint =
        code === 'model_not_in_catalog'
          ? modelSlugHint(
              this.model,
              this.catalog.models.map((m) => m.model),
            )
          : '';
      return specError(status, `${code}: ${this.plan.error?.message ?? 'no endpoint to attempt'}${hint}`, {
        reason: code,
        excluded: this.plan.excluded.map((e) => ({
          ...(e.subject.kind === 'credential'
            ? { credential: e.subject.credentialId }
            : { endpoint_id: e.subject.endpointId }),
          rule: e.rule,
          reason: e.reason,
        })),
      });
    }
    // A per-request price says nothing of n choices: refused rather than guessed.
    if (
      this.cost.n > 1 &&
      this.plan.attempts.some((a) => this.catalog.endpoint(this.model, a.endpoint.id)?.price.kind === 'per-request')
    ) {
      return specError(400, `n > 1 cannot be priced: ${this.model} has an endpoint priced per request; send n: 1`);
    }
    this.limits = {
      contextLength: this.catalog.contextLength(this.model),
      maxOutputTokens: this.catalog.maxOutputTokens(this.model),
    };
    this.bounds = usageBounds(this.limits, this.cost, this.requestBytes);
    return undefined;
  }

  /** The most this request can cost within `bounds`, at the priciest endpoint of its plan. */
  private costAt(bounds: UsageBounds): Micros {
    const maxTokens = reservedTokens(bounds);
    let costMicros = 0;
    for (const a of this.plan.attempts) {
      const e = this.catalog.endpoint(this.model, a.endpoint.id);
      if (e) costMicros = Math.max(costMicros, listCostMicros(e.price, maxTokens));
    }
    return costMicros;
  }

  private boundsAt(perChoice: number): UsageBounds {
    return usageBounds(this.limits, { ...this.cost, maxTokensPerChoice: perChoice }, this.requestBytes);
  }

  /** The model's longest answer per choice: what a request without max_tokens may get. */
  private longestAnswer(): number {
    const { contextLength, maxOutputTokens } = this.limits;
    return Math.min(maxOutputTokens ?? Infinity, contextLength ?? USAGE_CEILING_TOKENS);
  }

  /**
   * Reserve at admission, settle at completion (docs/ledger.md, "Reservations"): the most this request can cost. A
   * request without max_tokens is served with less rather than refused: the ledger grants what its budgets have
   * room for, down to the prompt and MIN_CAPPED_TOKENS, and the answer is capped to what was granted.
   */
  private async admit(): Promise<SpecError | undefined> {
    const limited = await this.admitRate();
    if (limited) return limited;
    const refused = await this.admitBudget();
    // Refused by its budget after its key counted it: it was never served and leaves the key's counts.
    if (refused && this.rateHold) void this.rt.spendGate?.settleRate?.(this.rateHold, null);
    return refused;
  }

  /**
   * The key's own rate limits (docs/gateway.md, "Key controls"), counted in the ledger across replicas: requests and
   * tokens per minute, requests in flight. Tokens count the most this request can use, corrected when it finishes.
   */
  private async admitRate(): Promise<SpecError | undefined> {
    const limits = this.key?.limits;
    if (!limits) return undefined;
    const gate = this.rt.spendGate;
    const name = this.key?.name ?? this.apiKeyHash;
    let decision: RateDecision;
    try {
      if (!gate?.admitRate) throw new Error('this gateway has no ledger to count rate limits in');
      const { promptTokens, completionTokens } = reservedTokens(this.bounds);
      decision = await gate.admitRate({
        account: this.account,
        key: { name, limits },
        id: this.generationId,
        tokens: promptTokens + completionTokens,
      });
    } catch (err) {
      // Fail closed, as budgets: a limit that cannot be counted must not be bypassed.
      this.rt.log?.error({ err: err instanceof Error ? err.message : String(err) }, 'rate-limit check failed');
      this.reply.header('retry-after', '5');
      return specError(
        503,
        'the rate-limit check is unavailable; the request was not sent to any provider, retry later',
      );
    }
    if (decision.allowed) {
      this.rateHold = decision.hold;
      return undefined;
    }
    this.rt.metrics.keyRateLimited(decision.limit);
    return rateLimited(decision, this.reply);
  }

  private async admitBudget(): Promise<SpecError | undefined> {
    const gate = this.rt.spendGate;
    if (!gate) return undefined;
    const costMicros = this.costAt(this.bounds);
    const longest = this.longestAnswer();
    const floorMicros =
      this.cost.maxTokensPerChoice === null && longest > MIN_CAPPED_TOKENS
        ? this.costAt(this.boundsAt(MIN_CAPPED_TOKENS))
        : costMicros;
    // A per-request price costs the same whatever the answer: nothing to cap.
    const cappable = floorMicros < costMicros;
    let decision: Awaited<ReturnType<SpendGate['admit']>>;
    try {
      decision = await gate.admit({
        account: this.account,
        who: this.identity,
        at: this.at,
        maximum: {
          id: this.generationId,
          costMicros,
          ...(cappable ? { floorMicros, shareOfRoom: CAPPED_SHARE } : {}),
          byokOnly: this.plan.attempts.every((a) => a.kind === 'credential'),
        },
      });
    } catch (err) {
      // Fail closed: a budget that cannot be checked must not be bypassed. (The key's counts are settled by admit.)
      this.rt.log?.error({ err: err instanceof Error ? err.message : String(err) }, 'budget check failed');
      this.reply.header('retry-after', '5');
      return specError(503, 'the budget check is unavailable; the request was not sent to any provider, retry later');
    }
    if (decision.allowed) {
      this.reservation = decision.reservation;
      const granted = decision.reservation?.amountMicros ?? costMicros;
      if (cappable && granted < costMicros) {
        // The largest answer the granted amount pays for (at least MIN_CAPPED_TOKENS: the floor was granted).
        this.capped = Math.max(
          MIN_CAPPED_TOKENS,
          affordableTokens((n) => this.costAt(this.boundsAt(n)), longest, granted),
        );
        this.bounds = this.boundsAt(this.capped);
        this.reply.header(CAPPED_HEADER, String(this.capped));
        this.rt.metrics.maxTokensCapped();
      }
      return undefined;
    }
    const b = decision.blockedBy;
    this.rt.metrics.budgetRefused(b.scope, b.interval);
    const endsAt = windowOf(b.interval, this.at).endsAt;
    const room = Math.max(0, b.limitMicros - b.countedMicros - decision.heldMicros);
    const fitsMaxTokens = affordableTokens((n) => this.costAt(this.boundsAt(n)), longest, room);
    const requestMicros = cappable ? floorMicros : decision.requestMicros;
    const refusal = {
      check: b,
      heldMicros: decision.heldMicros,
      requestMicros,
      endsAt,
      fitsMaxTokens,
      uncapped: cappable,
    };
    return specError(402, `${describeBudget(refusal)}; the request was not sent to any provider`, {
      reason: refusalReason(b),
      fits_max_tokens: fitsMaxTokens,
      budget: {
        scope: b.scope,
        id: b.id,
        name: b.name,
        interval: b.interval,
        limit_micros: b.limitMicros,
        counted_micros: b.countedMicros,
        held_micros: decision.heldMicros,
        remaining_micros: Math.max(0, b.limitMicros - b.countedMicros - decision.heldMicros),
        request_max_micros: requestMicros,
        includes_byok: b.includesByok,
        resets_at: endsAt === null ? null : new Date(endsAt).toISOString(),
      },
    });
  }

  private async attemptBuffered(): Promise<unknown> {
    const result = await runAttempts(this.plan.attempts, bufferedSink, this.loopDeps(), this.journal, this.client);
    if (!result.committed) return this.allFailed();
    const { attempt, value } = result;
    this.journal.record(attempt, result.status, undefined, result.t0, 'ok', result.last);
    const source = this.source();
    const seen = this.seen(source, value.bytes, () => bodyFloorTokens(value.bytes, this.cost));
    this.rt.metering.complete(this, 200, {
      attempt,
      catalog: this.catalog,
      upstream: source,
      usage: meteredUsage(value.body.usage, this.bounds, source, seen),
    });
    value.body.id = this.generationId;
    value.body.provider = attempt.provider;
    value.body.provider_responses = this.journal.responses;
    this.reply.header('x-generation-id', this.generationId);
    return this.answer(200, value.body);
  }

  private async attemptStreaming(): Promise<unknown> {
    const result = await runAttempts(this.plan.attempts, streamingSink, this.loopDeps(), this.journal, this.client);
    if (!result.committed) return this.allFailed();
    // Committed: from here on the client has bytes and there is no failover.
    const { attempt, value: body, t0, last } = result;
    const source = this.source();
    this.firstByteAt = performance.now();
    this.reply.hijack();
    const relay = new StreamRelay(this.reply.raw, body, {
      idleTimeoutMs: this.rt.attemptTimeoutMs,
      headers:
        this.capped === null
          ? { 'x-generation-id': this.generationId }
          : { 'x-generation-id': this.generationId, [CAPPED_HEADER]: String(this.capped) },
      brokenEvent: (error) =>
        `data: ${JSON.stringify(specError(502, `the upstream stream broke after data was sent: ${error}`))}\n\n`,
      closing: () =>
        `: provider_responses ${JSON.stringify({ generation_id: this.generationId, provider_responses: this.journal.responses })}\n\n`,
      ended: (error, reported, relayed) => {
        this.journal.record(attempt, result.status, error, t0, error ? 'stream_broken' : 'ok', last);
        // Every stream that delivered bytes is metered, broken or abandoned ones included: the upstream's usage when
        // it sent a usable one, else an estimate from what was delivered (docs/ledger.md, "Streams").
        const usage = meteredUsage(
          reported,
          this.bounds,
          source,
          this.seen(source, body.bytes, () => streamFloorTokens(relayed, this.cost)),
        );
        this.rt.metering.complete(this, 200, { attempt, catalog: this.catalog, upstream: source, usage }, error);
        this.rt.metrics.answered(200);
      },
    });
    // The relay hears the client leave on its own response ('close' before the end): a link from this request's
    // ClientLink to the relay, even one cleared when the stream ended, kept each stream's buffers alive into the old
    // generation (~9 KB per stream).
    await relay.run();
    return undefined;
  }

  private loopDeps(): AttemptLoopDeps {
    const rt = this.rt;
    return {
      timeoutMs: rt.attemptTimeoutMs,
      prepare: (a) => this.prepare(a),
      setupFailure,
      send: (request, timer) => rt.transport.send(request, timer),
      transportFailure: (err) =>
        // One string for the tenant whatever happened (ECONNREFUSED, EPROTO, a private CA...): provider_responses
        // must not map the pod's network. The detail goes to the gateway's own log.
        rt.log?.warn(
          {
            generation_id: this.generationId,
            code: (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.name : 'unknown'),
          },
          'upstream transport failure',
        ),
    };
  }

  private async prepare(a: Attempt): Promise<UpstreamRequest> {
    this.tenantUpstream = false;
    const spec = this.catalog.upstream(this.model, a.endpoint.id);
    if (!spec) throw new UpstreamSetupError(`endpoint ${a.endpoint.id} is no longer in the catalog`);
    const owner: AuthOwner =
      a.kind === 'credential'
        ? { kind: 'credential', account: this.account.namespace, credentialId: a.credentialId }
        : { kind: 'shared', provider: a.provider };
    const body = this.capped === null ? this.forward : { ...this.forward, [capField(a.provider)]: this.capped };
    const request = await this.rt.auth.prepare(owner, this.rt.payloads.for(a), spec, this.model, body);
    // Attempts run one at a time: the last one prepared is the one that commits.
    this.tenantUpstream = request.tenantUrl === true;
    return request;
  }

  /** Whose count the committed answer carries: a catalog upstream (trusted) or a URL the tenant chose. */
  private source(): UsageSource {
    return this.tenantUpstream ? 'tenant' : 'catalog';
  }

  /**
   * What crossed the gateway; floors only for a tenant upstream (a catalog count is never held below itself), from
   * bytes: the body forwarded to it and what it relayed to the client (docs/ledger.md, "The floor").
   */
  private seen(source: UsageSource, responseBytes: number, completionFloor: () => number): Seen {
    if (source !== 'tenant')
      return { requestBytes: this.requestBytes, responseBytes, minPromptTokens: 0, minCompletionTokens: 0 };
    const forwardedBytes = Buffer.byteLength(JSON.stringify(this.forward), 'utf8');
    return {
      requestBytes: this.requestBytes,
      responseBytes,
      minPromptTokens: promptFloorTokens(forwardedBytes, this.cost),
      minCompletionTokens: completionFloor(),
    };
  }

  private observe(a: Attempt, outcome: Outcome, status: number | null, last: boolean): void {
    const { metrics, health } = this.rt;
    metrics.attempt(a.provider, attemptKind(a), outcome, outcome !== 'ok' && !last);
    if (a.kind === 'credential' && !this.client.gone) {
      const h = healthOutcome(status, outcome);
      if (h) health.record(a.credentialId, h);
    }
  }

  private allFailed(): unknown {
    const { status, message, type } = failureAnswer(this.journal.responses);
    this.rt.metering.complete(this, status, null);
    this.reply.header('x-generation-id', this.generationId);
    return this.answer(
      status,
      specError(
        status,
        message,
        { generation_id: this.generationId, provider_responses: this.journal.responses },
        type,
      ),
    );
  }

  private answer(status: number, payload: unknown): FastifyReply {
    this.rt.metrics.answered(status);
    return this.reply.code(status).send(payload);
  }
}

/** 403 for a model outside the key's allowlist: the error names the models the key may request. */
export function modelNotAllowed(model: string, allowed: readonly string[]): SpecError {
  return specError(403, `model ${model} is not allowed for this API key; it may request: ${allowed.join(', ')}`, {
    reason: 'model_not_allowed',
    model,
    allowed_models: [...allowed],
  });
}

const RATE_WORDS: Record<Extract<RateDecision, { allowed: false }>['limit'], string> = {
  requests: 'requests per minute',
  tokens: 'tokens per minute',
  in_flight: 'requests in flight',
};

/**
 * 429 for a key over one of its rate limits, with Retry-After: the seconds until the window has room (requests and
 * tokens per minute), 1 for requests in flight (a slot frees when one of them finishes, which nobody can know). A
 * request that alone needs more tokens than the per-minute limit gets no Retry-After: waiting never admits it.
 */
export function rateLimited(d: Extract<RateDecision, { allowed: false }>, reply: FastifyReply): SpecError {
  const retryAfter = d.limit === 'in_flight' ? 1 : d.retryAfterSeconds;
  if (retryAfter !== null) reply.header('retry-after', String(retryAfter));
  const message =
    d.limit === 'tokens' && retryAfter === null
      ? `this request may use more tokens than this API key's limit of ${d.max} tokens per minute: lower max_tokens (or the prompt) so that both fit`
      : `this API key's limit of ${d.max} ${RATE_WORDS[d.limit]} is reached (${d.used} counted); retry in ${retryAfter} s`;
  return specError(429, message, {
    reason: 'key_rate_limited',
    limit: d.limit,
    limit_value: d.max,
    used: d.used,
    retry_after_seconds: retryAfter,
  });
}

function setupFailure(err: unknown): string {
  if (err instanceof BundleError) return `credential unavailable (${err.code})`;
  if (err instanceof UpstreamSetupError) return err.message;
  // The Vertex token exchange reports its own status; anything else is summarised, never echoed.
  return `authentication setup failed (${err instanceof Error ? err.name : 'error'})`;
}
