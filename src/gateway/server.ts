// The reference gateway: an OpenAI-compatible HTTP front (fastify) that authenticates gateway API keys against the
// mounted routing config, plans with the SDK and executes the plan's attempts in order with failover (spec 1.1
// rule 3), recording `provider_responses` (spec 7). This file builds the parts and holds the route table; the request
// path is completions.ts (phases) → attempts.ts (the loop) → stream-relay.ts / metering.ts.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { GATEWAY_STATUS_FORMAT } from '../contract/gateway-status.ts';
import type { SpendGate } from '../contract/spend-gate.ts';
import { type EgressAllowList, NO_EGRESS_EXCEPTIONS } from '../domain/egress.ts';
import type { BaseAddress } from '../domain/index.ts';
import { parseUntrustedJson, UntrustedJsonError } from '../domain/json.ts';
import type { RoutingConfigWatcher } from '../sdk/index.ts';
import type { AccessLog } from './access-log.ts';
import { type CatalogWatcher, watchCatalog } from './catalog.ts';
import { apiKeyHash, chatCompletions } from './completions.ts';
import { openGatewayRouting } from './delivered-routing.ts';
import { GenerationStore } from './generations.ts';
import { CredentialHealth, type GatewayStatusReport } from './health.ts';
import { Metering } from './metering.ts';
import { createGatewayMetrics, type GatewayMetrics } from './metrics.ts';
import { listModels } from './models.ts';
import { registerOpsRoutes } from './ops-routes.ts';
import { AttemptPayloads } from './payloads.ts';
import { type GatewayRuntime, specError } from './runtime.ts';
import { UpstreamTransport } from './transport.ts';
import { createUpstreamAuth } from './upstream.ts';

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
  /** The per-request line; default: through `logger.info` (access-log.ts has the direct writer the CLI uses). */
  accessLog?: AccessLog;
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
  /**
   * The operator's delivery stream (docs/gateway.md, "Delivery stream"): its base URL, the projected ServiceAccount
   * token file, and a writable directory for what it delivers. Absent: the mounted volumes alone.
   */
  deliveryStream?: { url: string; tokenFile: string; dir: string };
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

export async function startGateway(opts: GatewayOptions): Promise<RunningGateway> {
  const log = opts.logger;
  const metrics = opts.metrics ?? createGatewayMetrics();
  const baseAddress: BaseAddress = opts.region ? { region: opts.region } : 'global';
  if (opts.upstreamCaPem) setDefaultCACertificates([...getCACertificates('default'), opts.upstreamCaPem]);
  const egress = opts.egress ?? NO_EGRESS_EXCEPTIONS;
  const transport = new UpstreamTransport({ egress, upstreamCaPem: opts.upstreamCaPem });
  const generations = new GenerationStore(opts.generations ?? {});
  const health = new CredentialHealth();
  const instance = randomUUID();

  const opened = openGatewayRouting({
    configDir: opts.configDir,
    bundleDir: opts.bundleDir,
    keyDir: opts.keyDir,
    ...(opts.pollMs !== undefined ? { pollMs: opts.pollMs } : {}),
    ...(opts.deliveryStream ? { deliveryStream: opts.deliveryStream } : {}),
    instance,
    log,
    metrics,
    onServed: (config) => {
      health.retain((id) => config.credential(id) !== undefined);
      metrics.configVersion.reset();
      metrics.configVersion.set({ version: config.version.slice(0, 16) }, 1);
    },
  });
  const routing = opened.routing;
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

  const rt: GatewayRuntime = {
    log,
    metrics,
    routing,
    catalog,
    generations,
    health,
    metering: new Metering({ generations, metrics, spendGate: opts.spendGate, log, accessLog: opts.accessLog }),
    spendGate: opts.spendGate,
    // Tenant URLs (a Vertex token_uri) go through the egress-checked agent.
    auth: createUpstreamAuth({ agent: transport.tenantAgent }),
    payloads: new AttemptPayloads({ routing, egress, sharedKeysDir: opts.sharedKeysDir }),
    transport,
    baseAddress,
    attemptTimeoutMs: opts.attemptTimeoutMs ?? 60_000,
  };

  const app = Fastify({ logger: false, bodyLimit: 16 * 1024 * 1024 });
  // Request bodies are untrusted JSON, read as at the API doors: strict UTF-8 (a 400 naming the byte, not a U+FFFD
  // sent upstream), at most MAX_JSON_DEPTH levels (checked before parsing), no __proto__ key.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => {
    try {
      done(null, parseUntrustedJson(body as Buffer));
    } catch (err) {
      if (!(err instanceof UntrustedJsonError)) return done(err as Error, undefined);
      done(
        Object.assign(new Error(err.message), { statusCode: 400, code: `BYOK_${err.problem.code.toUpperCase()}` }),
        undefined,
      );
    }
  });
  // Framework-level failures (malformed JSON, oversized or wrongly typed bodies, unknown routes) in the spec 7 body too.
  app.setErrorHandler((err: { statusCode?: number; message: string; code?: string }, _req, reply) => {
    const status = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    const message =
      err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
      err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ||
      err.code === 'BYOK_MALFORMED' ||
      /JSON/.test(err.code ?? '')
        ? 'the request body is not valid JSON'
        : status === 500
          ? 'internal gateway error'
          : err.message;
    if (status === 500) log?.error({ err: err.message }, 'unhandled gateway error');
    metrics.answered(status);
    return reply.code(status).send(specError(status, message));
  });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send(specError(404, `no route ${req.method} ${req.url.split('?')[0]}`)),
  );

  const completions = chatCompletions(rt);
  app.post('/api/v1/chat/completions', completions);
  // The OpenAI SDKs' own path: a client whose base URL ends in /v1 lists models and chats on the same prefix.
  app.post('/v1/chat/completions', completions);
  app.get('/api/v1/models', listModels(rt, { keyRequired: false }));
  app.get('/v1/models', listModels(rt, { keyRequired: true }));
  app.get('/api/v1/generation', async (req, reply) => {
    const who = apiKeyHash(req.headers.authorization);
    if ('error' in who) return reply.code(401).send(who);
    if (!routing.current()?.apiKey(who.hash)) return reply.code(401).send(specError(401, 'invalid gateway API key'));
    const id = (req.query as { id?: unknown }).id;
    if (typeof id !== 'string' || id === '')
      return reply.code(400).send(specError(400, 'query parameter id is required'));
    const record = generations.get(id, who.hash);
    if (!record)
      return reply
        .code(404)
        .send(
          specError(
            404,
            `generation ${id} not found for this API key (records are kept in this gateway process for a limited time)`,
          ),
        );
    return { data: record };
  });

  // Ops routes: on a listener of their own when opsPort is set (the chart and the CLI set it), never beside tenants.
  const ops: FastifyInstance = opts.opsPort !== undefined ? Fastify({ logger: false }) : app;
  const statusReport = (): GatewayStatusReport => ({
    format: GATEWAY_STATUS_FORMAT,
    instance,
    at: Date.now(),
    routing: { version: routing.current()?.version ?? null },
    bundle: opened.inventory(),
    credentials: health.snapshot(),
    probes: health.probeSnapshot(),
    delivery: opened.delivery.report(),
  });
  registerOpsRoutes(ops, rt, {
    statusToken: opts.statusToken,
    statusReport,
    waitPast: (after, ms) => opened.delivery.waitPast(after, ms),
  });

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
      opened.close();
      catalog.close();
      await app.close();
      if (ops !== app) await ops.close();
      transport.close();
    },
  };
}
