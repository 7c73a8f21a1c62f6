// The reference gateway: an OpenAI-compatible HTTP front (fastify) that authenticates gateway API keys against the
// mounted routing config, plans with the SDK and executes the plan's attempts in order with failover (spec 1.1
// rule 3), recording `provider_responses` (spec 7). Built only on the SDK and the domain core.
import { hash as digestOnce, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import {
  listCostMicros,
  microsToUsd,
  validatePayload,
  type BudgetCheck,
  type Attempt,
  type BaseAddress,
  type CompiledAccount,
  type ProviderPayload,
  type RoutePlan,
} from '../domain/index.ts';
import { BundleError, watchRoutingConfig, type GatewayRequest, type RoutingConfigWatcher } from '../sdk/index.ts';
import { watchCatalog, type CatalogWatcher, type GatewayCatalog } from './catalog.ts';
import { GenerationStore, type GenerationRecord, type ProviderResponse } from './generations.ts';
import { bundleInventory, CredentialHealth, healthOutcome, type GatewayStatusReport, type ProbeResult } from './health.ts';
import { createGatewayMetrics, type GatewayMetrics } from './metrics.ts';
import type { Reservation, SpendGate } from './spend-gate.ts';
import { createUpstreamAuth, sharedKeyFileName, UpstreamSetupError, type AuthOwner, type UpstreamAuth, type UpstreamRequest } from './upstream.ts';
import { UpstreamBody } from './upstream-body.ts';
import { tenantHttpsAgent } from './egress.ts';
import { NO_EGRESS_EXCEPTIONS, type EgressAllowList } from '../domain/egress.ts';
import { meteredUsage, reservedTokens, usageBounds, type MeteredUsage, type UsageBounds } from './usage.ts';
import { parseUntrustedJson, UntrustedJsonError } from '../domain/json.ts';

export interface GatewayOptions {
  /** Mounted routing ConfigMaps (index + shards), bundle Secrets and the bundle key Secret. */
  configDir: string;
  bundleDir: string;
  keyDir: string;
  /** The catalog JSON file (see docs/gateway.md). */
  catalogFile: string;
  /** The platform's own provider keys, one file per provider slug (`/` written as `__`). Absent: no shared capacity. */
  sharedKeysDir?: string;
  /** Per attempt: until the whole response (non-streaming) or the first byte (streaming). Default 60 s. */
  attemptTimeoutMs?: number;
  /** Budgets and fees; without it the gateway runs without either. */
  spendGate?: SpendGate;
  logger?: Logger;
  host?: string;
  /** 0 = any free port. Default 8080. */
  port?: number;
  /**
   * Port of the ops routes (/healthz, /readyz, /metrics, /byok/status, /byok/probe), on their own listener so none of
   * them is reachable on the tenant-facing port (0 = any free port). Absent: served on `port` (library use, tests).
   */
  opsPort?: number;
  /** PEM of extra CAs trusted for upstream TLS (process-wide: also used by the Vertex token exchange). */
  upstreamCaPem?: string;
  /** Serve a region-specific address (rule 9): only endpoints pinned to this region. */
  region?: string;
  generations?: { maxRecords?: number; ttlMs?: number };
  /** Poll interval of the routing config and catalog (default 1000 ms). */
  pollMs?: number;
  metrics?: GatewayMetrics;
  /**
   * Bearer token the operator sends to GET /byok/status (per-credential outcome counters and what this pod has loaded).
   * Without it the endpoint answers 404: it lists credential ids, so it is never open on the tenant-facing port.
   */
  statusToken?: string;
  /**
   * What tenant URLs (an Azure endpoint_url, a Vertex token_uri) may reach beyond the egress policy; default none
   * (docs/gateway.md, "Egress policy").
   */
  egress?: EgressAllowList;
}

export interface RunningGateway {
  url: string;
  /** Where the ops routes are: their own listener (opsPort), or `url`. */
  opsUrl: string;
  app: FastifyInstance;
  metrics: GatewayMetrics;
  routing: RoutingConfigWatcher;
  catalog: CatalogWatcher;
  generations: GenerationStore;
  health: CredentialHealth;
  /** What GET /byok/status answers. */
  statusReport(): GatewayStatusReport;
  close(): Promise<void>;
}

interface SpecError {
  error: { code: number; message: string; metadata: Record<string, unknown> | null };
}

const specError = (code: number, message: string, metadata: Record<string, unknown> | null = null): SpecError => ({ error: { code, message, metadata } });

class AttemptTimeout extends Error {
  constructor(ms: number) {
    super(`no response within ${ms} ms`);
    this.name = 'AttemptTimeout';
  }
}

type Outcome = 'ok' | 'rate_limited' | 'upstream_error' | 'rejected' | 'timeout' | 'transport_error' | 'credential_error' | 'stream_broken';

const outcomeOfStatus = (status: number): Outcome => (status < 300 ? 'ok' : status === 429 ? 'rate_limited' : status >= 500 ? 'upstream_error' : 'rejected');

/** OpenRouter `provider` preferences → the planner's request fields; an error message on a wrong type. */
function providerPreferences(value: unknown): { ok: true; prefs: Partial<GatewayRequest> } | { ok: false; message: string } {
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
  if (order === false) return { ok: false, message: 'provider.order must be an array of provider slugs or endpoint ids' };
  if (only === false) return { ok: false, message: 'provider.only must be an array of provider slugs or endpoint ids' };
  if (order) prefs.providerOrder = order;
  if (only) prefs.providerOnly = only;
  if (p.zdr !== undefined && p.zdr !== null) {
    if (typeof p.zdr !== 'boolean') return { ok: false, message: 'provider.zdr must be a boolean' };
    prefs.requireZdr = p.zdr;
  }
  if (p.data_collection !== undefined && p.data_collection !== null) {
    if (p.data_collection !== 'allow' && p.data_collection !== 'deny') return { ok: false, message: "provider.data_collection must be 'allow' or 'deny'" };
    prefs.denyDataCollection = p.data_collection === 'deny';
  }
  return { ok: true, prefs };
}

const PLAN_ERROR_STATUS: Record<string, number> = { model_not_in_catalog: 400, no_compliant_endpoint: 404, no_available_endpoint: 404 };

export async function startGateway(opts: GatewayOptions): Promise<RunningGateway> {
  const log = opts.logger;
  const metrics = opts.metrics ?? createGatewayMetrics();
  const attemptTimeoutMs = opts.attemptTimeoutMs ?? 60_000;
  const baseAddress: BaseAddress = opts.region ? { region: opts.region } : 'global';
  if (opts.upstreamCaPem) setDefaultCACertificates([...getCACertificates('default'), opts.upstreamCaPem]);
  const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 1024 });
  const tlsOptions = { keepAlive: true, maxSockets: 1024, ...(opts.upstreamCaPem ? { ca: [...getCACertificates('default'), opts.upstreamCaPem] } : {}) };
  const httpsAgent = new HttpsAgent(tlsOptions);
  const egress = opts.egress ?? NO_EGRESS_EXCEPTIONS;
  // Tenant URLs resolve through the egress policy at connect time; catalog URLs are the operator's and trusted.
  const tenantAgent = tenantHttpsAgent(egress, tlsOptions);
  const auth: UpstreamAuth = createUpstreamAuth({ agent: tenantAgent });
  const generations = new GenerationStore(opts.generations ?? {});
  const health = new CredentialHealth();
  const inventory = bundleInventory(opts.bundleDir, opts.keyDir);
  const instance = randomUUID();

  const routing = watchRoutingConfig({
    configDir: opts.configDir,
    bundleDir: opts.bundleDir,
    keyDir: opts.keyDir,
    ...(opts.pollMs !== undefined ? { pollMs: opts.pollMs } : {}),
    // Saves two readlink calls per attempt; a missing envelope or key still forces a fresh look.
    generationCheckMs: 100,
    onReload: (config) => {
      health.retain((id) => config.credential(id) !== undefined);
      metrics.configVersion.reset();
      metrics.configVersion.set({ version: config.version.slice(0, 16) }, 1);
      metrics.reloads.inc({ what: 'routing', result: 'ok' });
      log?.info({ version: config.version, accounts: config.accounts.size }, 'routing config loaded');
    },
    onError: (err) => {
      metrics.reloads.inc({ what: 'routing', result: 'error' });
      log?.warn({ code: (err as { code?: string }).code, err: err.message }, 'routing config rejected; keeping the last good one');
    },
  });
  const catalog = watchCatalog(opts.catalogFile, {
    ...(opts.pollMs !== undefined ? { pollMs: opts.pollMs } : {}),
    onReload: (c) => {
      metrics.reloads.inc({ what: 'catalog', result: 'ok' });
      log?.info({ models: c.models.length }, 'catalog reloaded');
    },
    onError: (err) => {
      metrics.reloads.inc({ what: 'catalog', result: 'error' });
      log?.warn({ err: err.message }, 'catalog rejected; keeping the last good one');
    },
  });

  /** The payload an attempt authenticates with: decrypted now (BYOK) or read now (shared); never kept. */
  const payloadFor = (attempt: Attempt): ProviderPayload => {
    if (attempt.kind === 'credential') {
      const text = routing.decryptCredential(attempt.credentialId);
      // Validated again with this gateway's egress policy: a payload stored under an older policy gets no exception.
      const parsed = validatePayload(attempt.provider, text, { egress });
      if (!parsed.ok) throw new UpstreamSetupError('the credential payload does not parse for its provider');
      return parsed.payload;
    }
    if (!opts.sharedKeysDir) throw new UpstreamSetupError(`no shared key configured for provider ${attempt.provider}`);
    let text: string;
    try {
      text = readFileSync(join(opts.sharedKeysDir, sharedKeyFileName(attempt.provider)), 'utf8');
    } catch {
      throw new UpstreamSetupError(`no shared key configured for provider ${attempt.provider}`);
    }
    const parsed = validatePayload(attempt.provider, text);
    if (!parsed.ok) throw new UpstreamSetupError(`the shared key of provider ${attempt.provider} does not parse`);
    return parsed.payload;
  };

  /** Sends one upstream request; resolves with the response head. The timer is the caller's. */
  /** Sends one upstream request under the attempt timer; resolves with the response head. */
  const send = (req: UpstreamRequest, timer: AttemptTimer): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const isHttps = req.url.protocol === 'https:';
      const fn = isHttps ? httpsRequest : httpRequest;
      const r = fn(req.url, {
        method: 'POST',
        agent: isHttps ? (req.tenantUrl ? tenantAgent : httpsAgent) : httpAgent,
        headers: { ...req.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(req.body), accept: 'application/json, text/event-stream' },
      });
      timer.attach(r);
      r.once('response', resolve);
      r.once('error', reject);
      r.end(req.body);
    });

  /** One cheapest authenticated call with a credential (docs/gateway.md, "Probes"); never echoes provider text. */
  const probeCredential = async (credentialId: string): Promise<ProbeResult | SpecError> => {
    const found = routing.current()?.credential(credentialId);
    if (!found) return specError(404, `credential ${credentialId} is not in the loaded routing config`);
    const provider = found.credential.provider;
    const cat = catalog.current();
    const model = cat.models.find((m) => m.endpoints.some((e) => e.provider === provider && e.region === null)) ?? cat.models.find((m) => m.endpoints.some((e) => e.provider === provider));
    const endpoint = model?.endpoints.find((e) => e.provider === provider && e.region === null) ?? model?.endpoints.find((e) => e.provider === provider);
    const spec = model && endpoint ? cat.upstream(model.model, endpoint.id) : undefined;
    if (!model || !spec) return specError(409, `the catalog has no endpoint of provider ${provider} to probe`);
    const at = Date.now();
    let request: Awaited<ReturnType<UpstreamAuth['probe']>>;
    try {
      const parsed = validatePayload(provider, routing.decryptCredential(credentialId), { egress });
      if (!parsed.ok) return specError(409, 'the credential payload does not parse for its provider');
      request = await auth.probe({ kind: 'credential', account: found.account.namespace, credentialId }, parsed.payload, spec, model.model);
    } catch (err) {
      // A refused Vertex token exchange reports its HTTP status (400 invalid_grant, 401, 403): the key is refused.
      const status = (err as { status?: unknown; response?: { status?: unknown } }).response?.status ?? (err as { status?: unknown }).status;
      if (typeof status === 'number' && status >= 400 && status < 500 && status !== 429) return { at, outcome: 'unauthorized', status };
      if (status === 429) return { at, outcome: 'rateLimited', status };
      return { at, outcome: 'upstreamError', status: typeof status === 'number' ? status : null };
    }
    if (request === null) return { at, outcome: 'ok', status: null };
    const status = await new Promise<number | null>((resolve) => {
      const isHttps = request.url.protocol === 'https:';
      const r = (isHttps ? httpsRequest : httpRequest)(request.url, { method: 'GET', agent: isHttps ? (request.tenantUrl ? tenantAgent : httpsAgent) : httpAgent, headers: { ...request.headers, accept: 'application/json' }, timeout: attemptTimeoutMs });
      r.once('response', (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? null));
        res.once('error', () => resolve(res.statusCode ?? null));
      });
      r.once('timeout', () => r.destroy(new Error('timeout')));
      r.once('error', () => resolve(null));
      r.end();
    });
    if (status === null) return { at, outcome: 'upstreamError', status };
    // A models list the provider does not serve (404, 405) still passed authentication.
    const outcome = healthOutcome(status, status < 300 ? 'ok' : status >= 500 ? 'upstream_error' : 'rejected') ?? 'ok';
    return { at, outcome, status };
  };

  const readAll = (res: IncomingMessage): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
      res.once('error', reject);
      res.once('aborted', () => reject(new Error('upstream connection closed mid-response')));
    });

  const app = Fastify({ logger: false, bodyLimit: 16 * 1024 * 1024 });

  const authenticate = (authorization: string | undefined): { hash: string } | SpecError => {
    // The scheme is case-insensitive (RFC 9110 §11.1), as at the REST door.
    const key = authorization !== undefined && authorization.length > 7 && authorization.slice(0, 7).toLowerCase() === 'bearer ' ? authorization.slice(7).trim() : '';
    if (key === '') return specError(401, 'missing gateway API key: send Authorization: Bearer <key>');
    return { hash: digestOnce('sha256', key, 'hex') };
  };

  // Request bodies are untrusted JSON, read as at the API doors: strict UTF-8 (a 400 naming the byte, not a U+FFFD
  // sent upstream), at most MAX_JSON_DEPTH levels (checked before parsing), no __proto__ key.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => {
    try {
      done(null, parseUntrustedJson(body as Buffer));
    } catch (err) {
      if (!(err instanceof UntrustedJsonError)) return done(err as Error, undefined);
      done(Object.assign(new Error(err.message), { statusCode: 400, code: `BYOK_${err.problem.code.toUpperCase()}` }), undefined);
    }
  });

  // Framework-level failures (malformed JSON, oversized or wrongly typed bodies, unknown routes) in the spec 7 body too.
  app.setErrorHandler((err: { statusCode?: number; message: string; code?: string }, _req, reply) => {
    const status = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    const message =
      err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || err.code === 'BYOK_MALFORMED' || /JSON/.test(err.code ?? '')
        ? 'the request body is not valid JSON'
        : status === 500
          ? 'internal gateway error'
          : err.message;
    if (status === 500) log?.error({ err: err.message }, 'unhandled gateway error');
    metrics.requests.inc({ status: String(status) });
    return reply.code(status).send(specError(status, message));
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send(specError(404, `no route ${req.method} ${req.url.split('?')[0]}`)));

  // Ops routes: on a listener of their own when opsPort is set (the chart and the CLI set it), never beside tenants.
  const ops: FastifyInstance = opts.opsPort !== undefined ? Fastify({ logger: false }) : app;
  ops.get('/healthz', async () => 'ok\n');
  const statusReport = (): GatewayStatusReport => ({
    format: 'byok-gateway-status/v1',
    instance,
    at: Date.now(),
    routing: { version: routing.current()?.version ?? null },
    bundle: inventory(),
    credentials: health.snapshot(),
    probes: health.probeSnapshot(),
  });
  const statusAuth = opts.statusToken ? digestOnce('sha256', `Bearer ${opts.statusToken}`, 'buffer') : undefined;
  // Digests of equal length, compared in constant time.
  const statusAllowed = (authorization: string | undefined) => statusAuth !== undefined && authorization !== undefined && timingSafeEqual(digestOnce('sha256', authorization, 'buffer'), statusAuth);
  ops.get('/byok/status', async (req, reply) => {
    if (!statusAuth) return reply.code(404).send(specError(404, 'no route GET /byok/status'));
    if (!statusAllowed(req.headers.authorization)) return reply.code(401).send(specError(401, 'the status endpoint needs the operator\'s status token'));
    return statusReport();
  });
  // The operator asks one pod to probe an idle credential (spec: the gateway owns upstream auth and egress).
  ops.post('/byok/probe', async (req, reply) => {
    if (!statusAuth) return reply.code(404).send(specError(404, 'no route POST /byok/probe'));
    if (!statusAllowed(req.headers.authorization)) return reply.code(401).send(specError(401, 'the probe endpoint needs the operator\'s status token'));
    const id = (req.body as { credentialId?: unknown } | null)?.credentialId;
    if (typeof id !== 'string') return reply.code(400).send(specError(400, 'credentialId is required'));
    const result = await probeCredential(id);
    if ('error' in result) return reply.code(result.error.code).send(result);
    health.recordProbe(id, result);
    log?.info({ credential: id, outcome: result.outcome, status: result.status }, 'credential probed');
    return result;
  });
  ops.get('/readyz', async (_req, reply) => (routing.current() ? 'ok\n' : reply.code(503).send('no routing config loaded yet\n')));
  ops.get('/metrics', async (_req, reply) => reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()));

  app.get('/api/v1/models', async () => ({
    data: catalog.current().models.map((m) => ({
      id: m.model,
      name: m.name ?? m.model,
      context_length: m.contextLength,
      endpoints: m.endpoints.map((e) => ({
        id: e.id,
        provider: e.provider,
        region: e.region,
        zdr: e.zdr,
        data_collection: e.dataCollection,
        pricing:
          e.pricing.kind === 'per-token'
            ? { prompt: perToken(e.pricing.promptUsdPerMillionTokens), completion: perToken(e.pricing.completionUsdPerMillionTokens), request: '0' }
            : { prompt: '0', completion: '0', request: String(e.pricing.usdPerRequest) },
      })),
    })),
  }));

  app.get('/api/v1/generation', async (req, reply) => {
    const who = authenticate(req.headers.authorization);
    if ('error' in who) return reply.code(401).send(who);
    const config = routing.current();
    const key = config?.apiKey(who.hash);
    if (!key) return reply.code(401).send(specError(401, 'invalid gateway API key'));
    const id = (req.query as { id?: unknown }).id;
    if (typeof id !== 'string' || id === '') return reply.code(400).send(specError(400, 'query parameter id is required'));
    const record = generations.get(id, who.hash);
    if (!record) return reply.code(404).send(specError(404, `generation ${id} not found for this API key (records are kept in this gateway process for a limited time)`));
    return { data: record };
  });

  app.post('/api/v1/chat/completions', async (req, reply) => {
    const started = performance.now();
    const who = authenticate(req.headers.authorization);
    if ('error' in who) return finish(reply, 401, who);
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return finish(reply, 400, specError(400, 'the request body must be a JSON object'));
    const { model, provider, stream, ...rest } = body as Record<string, unknown>;
    if (typeof model !== 'string' || model === '') return finish(reply, 400, specError(400, 'model is required (a model slug such as openai/gpt-4o)'));
    if (stream !== undefined && typeof stream !== 'boolean') return finish(reply, 400, specError(400, 'stream must be a boolean'));
    const prefs = providerPreferences(provider);
    if (!prefs.ok) return finish(reply, 400, specError(400, prefs.message));
    const config = routing.current();
    if (!config) return finish(reply, 503, specError(503, 'the gateway has not loaded a routing config yet'));
    const cat = catalog.current();
    const found = config.apiKey(who.hash);
    const userId = found?.key.owner ?? null;
    const now = new Date();
    const outcome = routing.planFor({ model, apiKeyHash: who.hash, userId, baseAddress, isVideoGeneration: false, ...prefs.prefs }, cat.catalog, now);
    if (!outcome.ok) {
      if (outcome.reason === 'no-workspace') return finish(reply, 403, specError(403, 'the API key has no workspace and the account has no default workspace'));
      return finish(reply, 401, specError(401, outcome.reason === 'api-key-expired' ? 'the gateway API key has expired' : 'invalid gateway API key'));
    }
    const identity = { apiKeyHash: who.hash, workspaceId: outcome.workspaceId, userId };
    const plan = outcome.plan;
    if (plan.attempts.length === 0) {
      const code = plan.error?.code ?? 'no_available_endpoint';
      return finish(reply, PLAN_ERROR_STATUS[code] ?? 404, specError(PLAN_ERROR_STATUS[code] ?? 404, `${code}: ${plan.error?.message ?? 'no endpoint to attempt'}`, {
        reason: code,
        excluded: plan.excluded.map((e) => ({ ...(e.subject.kind === 'credential' ? { credential: e.subject.credentialId } : { endpoint_id: e.subject.endpointId }), rule: e.rule, reason: e.reason })),
      }));
    }
    const bounds = usageBounds(cat.contextLength(model), rest);
    const requestBytes = Number(req.headers['content-length'] ?? 0) || JSON.stringify(body).length;
    const generationId = `gen-${randomUUID()}`;
    let reservation: Reservation | null = null;
    if (opts.spendGate) {
      // Reserve at admission, settle at completion (docs/ledger.md, "Reservations"): the most this request can cost.
      const maxTokens = reservedTokens(bounds, requestBytes, rest, cat.maxOutputTokens(model));
      const costMicros = plan.attempts.reduce((max, a) => {
        const e = cat.endpoint(model, a.endpoint.id);
        return e ? Math.max(max, listCostMicros(e.pricing, maxTokens)) : max;
      }, 0);
      let decision: Awaited<ReturnType<SpendGate['admit']>>;
      try {
        decision = await opts.spendGate.admit({
          account: outcome.account,
          who: identity,
          at: now,
          maximum: { id: generationId, costMicros, byokOnly: plan.attempts.every((a) => a.kind === 'credential') },
        });
      } catch (err) {
        // Fail closed: a budget that cannot be checked must not be bypassed.
        log?.error({ err: err instanceof Error ? err.message : String(err) }, 'budget check failed');
        reply.header('retry-after', '5');
        return finish(reply, 503, specError(503, 'the budget check is unavailable; the request was not sent to any provider, retry later'));
      }
      if (!decision.allowed) {
        const b = decision.blockedBy;
        const remaining = Math.max(0, b.limitMicros - b.countedMicros - decision.heldMicros);
        return finish(
          reply,
          402,
          specError(402, `${describeBudget(b, decision.heldMicros, decision.requestMicros)}; the request was not sent to any provider`, {
            budget: {
              scope: b.scope,
              id: b.id,
              name: b.name,
              interval: b.interval,
              limit_micros: b.limitMicros,
              counted_micros: b.countedMicros,
              held_micros: decision.heldMicros,
              remaining_micros: remaining,
              request_max_micros: decision.requestMicros,
              includes_byok: b.includesByok,
            },
          }),
        );
      }
      reservation = decision.reservation;
    }
    const ctx: RequestContext = {
      bounds,
      requestBytes,
      reservation,
      generationId,
      model,
      hash: who.hash,
      account: outcome.account,
      identity,
      at: now,
      started,
      upstreamMs: 0,
      responses: [],
      clientGone: false,
      onClientGone: undefined,
      streamed: stream === true,
    };
    // 'close' also fires after a normal response; only an unfinished one means the client went away.
    reply.raw.once('close', () => {
      if (reply.raw.writableFinished) return;
      ctx.clientGone = true;
      ctx.onClientGone?.();
    });
    const forward: Record<string, unknown> = { ...rest };
    if (stream === true) {
      forward.stream = true;
      // Usage arrives only in the final chunk, and only when asked for: needed for list cost and fees.
      forward.stream_options = { ...(typeof rest.stream_options === 'object' && rest.stream_options !== null ? rest.stream_options : {}), include_usage: true };
      return executeStream(reply, plan, cat, ctx, forward);
    }
    return executeOnce(reply, plan, cat, ctx, forward);
  });

  interface RequestContext {
    /** What admission held against the request's budgets; settled by the spend record, or given back. */
    reservation: Reservation | null;
    /** Ceilings on the usage an upstream may report for this request (its model's context, its max_tokens). */
    bounds: UsageBounds;
    /** Size of the client's request body: the prompt estimate when usage is missing or unusable. */
    requestBytes: number;
    generationId: string;
    model: string;
    hash: string;
    account: CompiledAccount;
    identity: { apiKeyHash: string; workspaceId: string; userId: string | null };
    at: Date;
    started: number;
    upstreamMs: number;
    responses: ProviderResponse[];
    clientGone: boolean;
    /** Tears down the upstream request in flight when the client disconnects. */
    onClientGone: (() => void) | undefined;
    streamed: boolean;
  }

  const finish = (reply: FastifyReply, status: number, payload: unknown) => {
    metrics.requests.inc({ status: String(status) });
    return reply.code(status).send(payload);
  };

  const kindOf = (a: Attempt) => (a.kind === 'credential' ? 'byok' : 'shared');

  const recordAttempt = (ctx: RequestContext, a: Attempt, status: number | null, error: string | undefined, t0: number, outcome: Outcome, last: boolean) => {
    const latency = performance.now() - t0;
    ctx.upstreamMs += latency;
    const entry: ProviderResponse = {
      provider: a.provider,
      endpoint_id: a.endpoint.id,
      credential: a.kind === 'credential' ? a.credentialId : 'shared',
      status,
      latency_ms: Math.round(latency * 10) / 10,
    };
    if (error !== undefined) entry.error = error;
    ctx.responses.push(entry);
    metrics.attempts.inc({ provider: a.provider, kind: kindOf(a), outcome });
    if (a.kind === 'credential' && !ctx.clientGone) {
      const h = healthOutcome(status, outcome);
      if (h) health.record(a.credentialId, h);
    }
    if (outcome !== 'ok' && !last) metrics.failovers.inc({ provider: a.provider, kind: kindOf(a) });
  };

  /** Prepares an attempt's upstream request; a failure is recorded and returns undefined. */
  const prepare = async (ctx: RequestContext, a: Attempt, cat: GatewayCatalog, forward: Record<string, unknown>, last: boolean): Promise<UpstreamRequest | undefined> => {
    const t0 = performance.now();
    try {
      const spec = cat.upstream(ctx.model, a.endpoint.id);
      if (!spec) throw new UpstreamSetupError(`endpoint ${a.endpoint.id} is no longer in the catalog`);
      const owner: AuthOwner = a.kind === 'credential' ? { kind: 'credential', account: ctx.account.namespace, credentialId: a.credentialId } : { kind: 'shared', provider: a.provider };
      return await auth.prepare(owner, payloadFor(a), spec, ctx.model, forward);
    } catch (err) {
      const message =
        err instanceof BundleError
          ? `credential unavailable (${err.code})`
          : err instanceof UpstreamSetupError
            ? err.message
            : // The Vertex token exchange reports its own status; anything else is summarised, never echoed.
              `authentication setup failed (${err instanceof Error ? err.name : 'error'})`;
      recordAttempt(ctx, a, null, message, t0, 'credential_error', last);
      return undefined;
    }
  };

  const failureOf = (err: unknown, ctx: RequestContext): { error: string; outcome: Outcome } => {
    if (err instanceof AttemptTimeout) return { error: err.message, outcome: 'timeout' };
    if (ctx.clientGone) return { error: 'client went away', outcome: 'transport_error' };
    // One string for the tenant whatever happened (ECONNREFUSED, EPROTO, a private CA...): provider_responses must not
    // map the pod's network. The detail goes to the gateway's own log.
    log?.warn({ generation_id: ctx.generationId, code: (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.name : 'unknown') }, 'upstream transport failure');
    return { error: 'upstream unreachable', outcome: 'transport_error' };
  };

  interface AttemptTimer {
    attach(r: ClientRequest): void;
    timedOut(): boolean;
    clear(): void;
  }

  /** The per-attempt deadline; plain timers and destroy() (AbortSignals cost a DOMException each on this path). */
  const withTimeout = (ctx: RequestContext): AttemptTimer => {
    let request: ClientRequest | undefined;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      request?.destroy(new AttemptTimeout(attemptTimeoutMs));
    }, attemptTimeoutMs);
    ctx.onClientGone = () => request?.destroy(new Error('client went away'));
    return {
      attach: (r) => {
        request = r;
      },
      timedOut: () => timedOut,
      clear: () => {
        clearTimeout(timer);
        ctx.onClientGone = undefined;
      },
    };
  };

  const allFailed = (reply: FastifyReply, ctx: RequestContext) => {
    // The last status an upstream actually answered; attempts that never got one (timeouts, missing keys) do not mask it.
    const answered = ctx.responses.findLast((r) => r.status !== null);
    const last = ctx.responses[ctx.responses.length - 1];
    // An upstream's 4xx/5xx is passed on; its 1xx, 3xx or unusable 2xx is not an answer for the client: 502 (the
    // upstream's code stays in provider_responses).
    const status = answered?.status != null && answered.status >= 400 && answered.status <= 599 ? answered.status : last?.error?.startsWith('no response within') ? 504 : 502;
    const message = answered
      ? `every attempt failed; the last upstream status was ${answered.status} (${answered.provider})`
      : `every attempt failed without an upstream status; the last (${last?.provider ?? 'none'}): ${last?.error ?? 'unknown'}`;
    complete(ctx, status, null, null, null);
    reply.header('x-generation-id', ctx.generationId);
    return finish(reply, status, specError(status, message, { generation_id: ctx.generationId, provider_responses: ctx.responses }));
  };

  const executeOnce = async (reply: FastifyReply, plan: RoutePlan, cat: GatewayCatalog, ctx: RequestContext, forward: Record<string, unknown>) => {
    for (let i = 0; i < plan.attempts.length; i++) {
      if (ctx.clientGone) break;
      const a = plan.attempts[i]!;
      const last = i === plan.attempts.length - 1;
      const prepared = await prepare(ctx, a, cat, forward, last);
      if (!prepared) continue;
      const t0 = performance.now();
      const timer = withTimeout(ctx);
      let res: IncomingMessage | undefined;
      try {
        res = await send(prepared, timer);
        const raw = await readAll(res);
        timer.clear();
        if (res.statusCode! >= 200 && res.statusCode! < 300) {
          let parsed: Record<string, unknown>;
          try {
            parsed = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
          } catch {
            recordAttempt(ctx, a, res.statusCode!, 'invalid JSON in the upstream response', t0, 'upstream_error', last);
            continue;
          }
          recordAttempt(ctx, a, res.statusCode!, undefined, t0, 'ok', last);
          complete(ctx, 200, a, meteredUsage(parsed.usage, ctx.bounds, ctx.requestBytes, raw.length), cat);
          parsed.id = ctx.generationId;
          parsed.provider = a.provider;
          parsed.provider_responses = ctx.responses;
          reply.header('x-generation-id', ctx.generationId);
          return finish(reply, 200, parsed);
        }
        recordAttempt(ctx, a, res.statusCode!, undefined, t0, outcomeOfStatus(res.statusCode!), last);
      } catch (err) {
        timer.clear();
        res?.destroy();
        const f = failureOf(timer.timedOut() ? new AttemptTimeout(attemptTimeoutMs) : err, ctx);
        recordAttempt(ctx, a, null, f.error, t0, f.outcome, last);
        if (ctx.clientGone) break;
      }
    }
    return allFailed(reply, ctx);
  };

  const executeStream = async (reply: FastifyReply, plan: RoutePlan, cat: GatewayCatalog, ctx: RequestContext, forward: Record<string, unknown>) => {
    for (let i = 0; i < plan.attempts.length; i++) {
      if (ctx.clientGone) break;
      const a = plan.attempts[i]!;
      const last = i === plan.attempts.length - 1;
      const prepared = await prepare(ctx, a, cat, forward, last);
      if (!prepared) continue;
      const t0 = performance.now();
      const timer = withTimeout(ctx);
      let res: IncomingMessage | undefined;
      let body: UpstreamBody;
      try {
        res = await send(prepared, timer);
        if (res.statusCode! < 200 || res.statusCode! >= 300) {
          await readAll(res).catch(() => undefined);
          timer.clear();
          recordAttempt(ctx, a, res.statusCode!, undefined, t0, outcomeOfStatus(res.statusCode!), last);
          continue;
        }
        body = new UpstreamBody(res);
        await body.first();
        timer.clear();
      } catch (err) {
        timer.clear();
        res?.destroy();
        const timedOut = timer.timedOut();
        const f = failureOf(timedOut ? new AttemptTimeout(attemptTimeoutMs) : err, ctx);
        const status = res?.statusCode ?? null;
        recordAttempt(ctx, a, status, status !== null && !timedOut ? 'stream broke before the first byte' : f.error, t0, status !== null && !timedOut ? 'stream_broken' : f.outcome, last);
        if (ctx.clientGone) break;
        continue;
      }
      // Committed: from here on the client has bytes and there is no failover.
      return pipeStream(reply, a, res, body, t0, cat, ctx, last);
    }
    return allFailed(reply, ctx);
  };

  const pipeStream = (reply: FastifyReply, a: Attempt, res: IncomingMessage, body: UpstreamBody, t0: number, cat: GatewayCatalog, ctx: RequestContext, last: boolean) => {
    reply.hijack();
    const out: ServerResponse = reply.raw;
    out.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-generation-id': ctx.generationId });
    let reported: unknown;
    let pending = '';
    /** Whether what the client has so far ends on an SSE event boundary (a blank line). */
    let atBoundary = true;
    let lastByte = 0x0a;
    const scan = (chunk: Buffer) => {
      const text = pending + chunk.toString('utf8');
      const cut = text.lastIndexOf('\n\n');
      if (cut < 0) {
        pending = text;
        return;
      }
      pending = text.slice(cut + 2);
      if (!text.includes('"usage"')) return;
      for (const event of text.slice(0, cut).split('\n\n')) {
        if (!event.includes('"usage"')) continue;
        for (const line of event.split('\n')) {
          if (!line.startsWith('data:')) continue;
          try {
            const u = (JSON.parse(line.slice(5)) as { usage?: unknown }).usage;
            if (u !== undefined && u !== null) reported = u;
          } catch {
            // Not JSON (e.g. [DONE]): nothing to read.
          }
        }
      }
    };
    let idle: NodeJS.Timeout | undefined;
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => res.destroy(new AttemptTimeout(attemptTimeoutMs)), attemptTimeoutMs);
    };
    let done = false;
    return new Promise<void>((resolve) => {
      const end = (error: string | undefined) => {
        if (done) return;
        done = true;
        clearTimeout(idle);
        const clientGone = ctx.clientGone || out.destroyed;
        // A trailing event without its blank line is still read for usage; so is an upstream that answered
        // `stream: true` with a plain JSON completion (the whole body is that one object).
        if (pending.length > 0) {
          const tail = pending;
          scan(Buffer.from('\n\n'));
          if (reported === undefined && tail.trimStart().startsWith('{')) {
            try {
              reported = (JSON.parse(tail) as { usage?: unknown }).usage;
            } catch {
              // A cut body: estimated below.
            }
          }
        }
        recordAttempt(ctx, a, res.statusCode ?? 200, error, t0, error ? 'stream_broken' : 'ok', last);
        // Every stream that delivered bytes is metered, broken or abandoned ones included: the upstream's usage when
        // it sent a usable one, else an estimate from what was delivered (docs/ledger.md, "Streams").
        complete(ctx, 200, a, meteredUsage(reported, ctx.bounds, ctx.requestBytes, body.bytes), cat, error);
        if (!clientGone) {
          if (error) out.write(`${atBoundary ? '' : '\n\n'}data: ${JSON.stringify(specError(502, `the upstream stream broke after data was sent: ${error}`))}\n\n`);
          atBoundary ||= error !== undefined;
          // The closing comment is an event of its own, even after a body that did not end on an event boundary.
          out.end(`${atBoundary ? '' : '\n\n'}: provider_responses ${JSON.stringify({ generation_id: ctx.generationId, provider_responses: ctx.responses })}\n\n`);
        }
        metrics.requests.inc({ status: '200' });
        resolve();
      };
      ctx.onClientGone = () => {
        end('client went away');
        body.destroy();
      };
      armIdle();
      body.pipe({
        chunk: (c) => {
          armIdle();
          scan(c);
          if (c.length > 0) {
            atBoundary = c[c.length - 1] === 0x0a && (c.length >= 2 ? c[c.length - 2] : lastByte) === 0x0a;
            lastByte = c[c.length - 1]!;
          }
          if (out.write(c)) return true;
          out.once('drain', () => body.resume());
          return false;
        },
        end,
      });
    });
  };

  /** Stores the generation, logs the request line, and reports spend (asynchronously, off the response path). */
  const complete = (ctx: RequestContext, status: number, served: Attempt | null, usage: MeteredUsage | null, cat: GatewayCatalog | null, streamError?: string) => {
    const endpoint = served && cat ? cat.endpoint(ctx.model, served.endpoint.id) : undefined;
    let listCost: number | null = null;
    try {
      listCost = endpoint && usage ? listCostMicros(endpoint.pricing, usage) : null;
    } catch (err) {
      // Bounded usage cannot overflow the pricing math; if a catalog price still does, the answer stands, unmetered.
      log?.error({ generation_id: ctx.generationId, err: err instanceof Error ? err.message : String(err) }, 'list cost failed');
    }
    if (usage?.estimated) {
      metrics.usageEstimated.inc({ reason: usage.estimated });
      log?.warn({ generation_id: ctx.generationId, reason: usage.estimated, prompt_tokens: usage.promptTokens, completion_tokens: usage.completionTokens }, 'upstream usage unusable: metered an estimate');
    }
    const record: GenerationRecord = {
      id: ctx.generationId,
      model: ctx.model,
      created_at: ctx.at.toISOString(),
      streamed: ctx.streamed,
      provider: served?.provider ?? null,
      endpoint_id: served?.endpoint.id ?? null,
      byok_credential_id: served?.kind === 'credential' ? served.credentialId : null,
      is_byok: served?.kind === 'credential',
      provider_responses: ctx.responses,
      tokens_prompt: usage?.promptTokens ?? null,
      tokens_completion: usage?.completionTokens ?? null,
      usage_estimated: usage?.estimated ?? null,
      list_cost_micros: listCost,
      fee_micros: null,
      charged_micros: null,
      status,
    };
    generations.put(ctx.hash, record);
    const total = performance.now() - ctx.started;
    const overheadMs = Math.max(0, total - ctx.upstreamMs);
    metrics.overhead.observe({ stream: String(ctx.streamed) }, overheadMs / 1000);
    log?.info(
      {
        generation_id: ctx.generationId,
        account: ctx.account.namespace,
        api_key_hash: ctx.hash.slice(0, 12),
        model: ctx.model,
        status,
        stream: ctx.streamed,
        ...(streamError ? { stream_error: streamError } : {}),
        provider_responses: ctx.responses,
        duration_ms: Math.round(total * 10) / 10,
        overhead_ms: Math.round(overheadMs * 100) / 100,
      },
      'chat completion',
    );
    if (opts.spendGate && !(served && usage && listCost !== null)) void opts.spendGate.release(ctx.reservation);
    if (opts.spendGate && served && usage && listCost !== null) {
      opts.spendGate
        .record({
          reservation: ctx.reservation,
          account: ctx.account,
          who: ctx.identity,
          at: ctx.at,
          generationId: ctx.generationId,
          model: ctx.model,
          endpointId: served.endpoint.id,
          provider: served.provider,
          byokCredentialId: served.kind === 'credential' ? served.credentialId : null,
          promptTokens: usage.promptTokens,
          completionTokens: usage.completionTokens,
          listCostMicros: listCost,
        })
        .then(
          (spend) => {
            record.fee_micros = spend.feeMicros;
            record.charged_micros = spend.chargedMicros;
          },
          (err: unknown) => log?.error({ generation_id: ctx.generationId, err: err instanceof Error ? err.message : String(err) }, 'spend record failed'),
        );
    }
  };

  const urlOf = (a: AddressInfo) => {
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${a.port}`;
  };
  await app.listen({ host: opts.host ?? '0.0.0.0', port: opts.port ?? 8080 });
  const url = urlOf(app.server.address() as AddressInfo);
  if (ops !== app) await ops.listen({ host: opts.host ?? '0.0.0.0', port: opts.opsPort ?? 8081 });
  return {
    url,
    opsUrl: ops === app ? url : urlOf(ops.server.address() as AddressInfo),
    app,
    metrics,
    routing,
    catalog,
    generations,
    health,
    statusReport,
    async close() {
      routing.close();
      catalog.close();
      await app.close();
      if (ops !== app) await ops.close();
      httpAgent.destroy();
      httpsAgent.destroy();
      tenantAgent.destroy();
    },
  };
}

function perToken(usdPerMillion: string | number): string {
  return String(Number(usdPerMillion) / 1_000_000);
}

function describeBudget(b: BudgetCheck, heldMicros: number, requestMicros: number): string {
  const what = `the ${b.interval} budget of ${b.scope} "${b.name}"`;
  const left = Math.max(0, b.limitMicros - b.countedMicros - heldMicros);
  const counted = `${microsToUsd(b.countedMicros)} of ${microsToUsd(b.limitMicros)} USD counted${b.includesByok ? ', BYOK included' : ''}${heldMicros > 0 ? `, ${microsToUsd(heldMicros)} USD held by requests in flight` : ''}`;
  if (b.countedMicros + heldMicros >= b.limitMicros) return `budget exhausted: ${what} has reached its limit (${counted})`;
  return `budget exceeded: this request may cost up to ${microsToUsd(requestMicros)} USD and ${what} has ${microsToUsd(left)} USD left (${counted}); lower max_tokens or wait for the ${b.interval} window to reset`;
}
