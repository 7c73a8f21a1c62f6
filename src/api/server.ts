// The REST API server (`/api/v1/byok`), wire-compatible with the public OpenRouter BYOK management API.
// buildApp wires routes onto injected dependencies (tests, bench); startApiServer adds the informers and the
// Kubernetes writer and listens.

import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import rateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type HTTPMethods } from 'fastify';
import { type Logger, pino } from 'pino';
import { parseUntrustedJson, UntrustedJsonError } from '../domain/json.ts';
import type { BYOKCredential } from '../schema/generated/types.ts';
import type { Backend } from '../service/backend.ts';
import { ApiError, errorBody, MESSAGES } from '../service/errors.ts';
import { BODY_LIMIT, REDACT_PATHS } from '../service/limits.ts';
import { sha256Hex } from '../service/management-keys.ts';
import type { ApiState, CredentialEntry } from '../service/read-model.ts';
import {
  NOT_SYNCED_MESSAGE,
  type ServiceRuntime,
  type ServiceRuntimeOptions,
  startServiceRuntime,
} from '../service/runtime.ts';
import { ByokService } from '../service/service.ts';
import { invalidUtf8Error } from '../service/validate.ts';
import { registerApiMetrics } from './metrics.ts';
import { buildOpenApiDocument, WORKSPACE_DEFAULTED_HEADER } from './openapi.ts';

export const API_PREFIX = '/api/v1';

export interface RateLimitOptions {
  max: number;
  timeWindowMs: number;
}

export interface AppDeps {
  state: ApiState;
  backend: Backend;
  observe(obj: BYOKCredential): void;
  observeDeleted(namespace: string, name: string): void;
  logger: Logger;
  /** 409 on writes to credentials not labelled managed-by byok-api. Default true. */
  gitopsGuard?: boolean;
  /** Per management key; false disables. Default 600 requests per 10 s. */
  rateLimit?: RateLimitOptions | false;
  /** Readiness for /readyz (informer caches synced and watching). Default: always ready. */
  ready?: () => boolean;
  /** The service to serve; shared with the aggregated API door so both use one write path. Default: a new one. */
  service?: ByokService;
  /** Credentials per account when its Account sets no limit. Default 1000. */
  defaultMaxCredentials?: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The account namespace of the authenticated management key. */
    account: string;
    /** SHA-256 of the bearer token, for per-key rate limiting. */
    tokenHash: string;
  }
}

const DEFAULT_RATE_LIMIT: RateLimitOptions = { max: 600, timeWindowMs: 10_000 };
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

function sendError(
  reply: FastifyReply,
  status: number,
  message: string,
  metadata: Record<string, unknown> | null = null,
): FastifyReply {
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send(errorBody(status, message, metadata));
}

/**
 * Errors Node's HTTP parser raises before a request exists (over-large headers, broken framing, timeouts):
 * answered on the raw socket, still with the spec's error body and a fixed message (never the request line).
 */
function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, MESSAGES.uriTooLong]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, MESSAGES.requestTimeout]
        : [400, MESSAGES.badRequestFraming];
  const body = JSON.stringify(errorBody(status, message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/** SHA-256 of the bearer token, or undefined without a well-formed Authorization header. */
function bearerHash(req: FastifyRequest): string | undefined {
  const header = req.headers.authorization;
  const m = typeof header === 'string' ? BEARER.exec(header) : null;
  return m ? sha256Hex(m[1] as string) : undefined;
}

/** Replaces any secret in a text before it reaches a log line. */
function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('[REDACTED]');
  return out;
}

function bodySecrets(req: FastifyRequest): string[] {
  const b = req.body as { key?: unknown } | undefined;
  return b && typeof b === 'object' && typeof b.key === 'string' ? [b.key, b.key.trim()] : [];
}

/**
 * REST follows the public API (no workspace_id: the default workspace) where a BYOKCredential without spec.workspace
 * is global: the create's answer names the workspace chosen, so the same key sent through both doors cannot differ
 * silently.
 */
function markDefaultedWorkspace(reply: FastifyReply, body: unknown, created: CredentialEntry): CredentialEntry {
  const omitted = body !== null && typeof body === 'object' && !Object.hasOwn(body, 'workspace_id');
  if (omitted && created.key.workspace_id !== null)
    void reply.header(WORKSPACE_DEFAULTED_HEADER, created.key.workspace_id);
  return created;
}

function createFastify(logger: Logger): FastifyInstance {
  return Fastify({
    loggerInstance: logger,
    bodyLimit: BODY_LIMIT,
    // Our own JSON parser (below) and error handler decide every 4xx body.
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
    clientErrorHandler,
    // Router errors: an over-long id is just an unknown credential; a malformed URL a plain 400.
    frameworkErrors: (err, _req, reply) => {
      const code = (err as { code?: string }).code;
      if (code === 'FST_ERR_MAX_PARAM_LENGTH') return sendError(reply, 404, MESSAGES.notFound);
      if (code === 'FST_ERR_BAD_URL') return sendError(reply, 400, 'Malformed URL');
      return sendError(reply, 500, MESSAGES.internal);
    },
  }) as unknown as FastifyInstance;
}

/** Only application/json is accepted. V8's JSON.parse messages quote the input, so the message is ours. */
function installJsonParser(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (req, body, done) => {
    const utf8 = invalidUtf8Error(typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
    if (utf8) {
      done(utf8, undefined);
      return;
    }
    const text = typeof body === 'string' ? body : body.toString('utf8');
    // Clients send Content-Type: application/json on every call: a DELETE (or GET) has no body to parse.
    if (text === '' && (req.method === 'DELETE' || req.method === 'GET' || req.method === 'HEAD')) {
      done(null, undefined);
      return;
    }
    if (text.trim() === '') {
      done(new ApiError(400, MESSAGES.emptyBody), undefined);
      return;
    }
    try {
      done(null, parseUntrustedJson(text));
    } catch (err) {
      if (!(err instanceof UntrustedJsonError)) throw err;
      done(new ApiError(400, err.problem.code === 'malformed' ? MESSAGES.malformedJson : err.message), undefined);
    }
  });
}

/** Paths of the API and the methods each serves: 405 with Allow for any other method, 404 elsewhere. */
const KNOWN_PATHS: readonly (readonly [url: string, pattern: RegExp, allowed: readonly string[]])[] = [
  [`${API_PREFIX}/byok`, new RegExp(`^${API_PREFIX}/byok/?$`), ['GET', 'HEAD', 'POST']],
  [`${API_PREFIX}/byok/:id`, new RegExp(`^${API_PREFIX}/byok/[^/]+/?$`), ['GET', 'HEAD', 'PATCH', 'DELETE']],
  [`${API_PREFIX}/openapi.json`, new RegExp(`^${API_PREFIX}/openapi\\.json$`), ['GET', 'HEAD']],
];

function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, req, reply) => {
    if (err instanceof ApiError) {
      for (const [h, v] of Object.entries(err.headers)) void reply.header(h, v);
      return sendError(reply, err.status, err.message, err.metadata);
    }
    const e = err as { code?: string; statusCode?: number; name?: string; message?: string; stack?: string };
    switch (e.code) {
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return sendError(reply, 415, MESSAGES.unsupportedMediaType);
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return sendError(reply, 413, MESSAGES.tooLarge, { limit_bytes: BODY_LIMIT });
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return sendError(reply, 400, MESSAGES.emptyBody);
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return sendError(reply, 400, MESSAGES.malformedJson);
      default:
        break;
    }
    const status = typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : 500;
    if (status === 500) {
      const secrets = bodySecrets(req);
      req.log.error(
        {
          err: {
            name: e.name,
            message: scrub(String(e.message ?? ''), secrets),
            stack: scrub(String(e.stack ?? ''), secrets),
          },
        },
        'request failed',
      );
      return sendError(reply, 500, MESSAGES.internal);
    }
    // Other framework 4xx (bad content-length, aborted body, ...): a fixed message per status.
    return sendError(
      reply,
      status,
      status === 413 ? MESSAGES.tooLarge : status === 415 ? MESSAGES.unsupportedMediaType : 'Bad request',
    );
  });

  // Methods fastify has no route table for (PROPFIND, LOCK, ...) land here: still 405 on the API's own paths.
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    const allow = KNOWN_PATHS.find(([, re]) => re.test(path))?.[2].join(', ');
    if (allow === undefined) return sendError(reply, 404, MESSAGES.routeNotFound);
    void reply.header('allow', allow);
    return sendError(reply, 405, `Method not allowed; use ${allow}`);
  });
}

/**
 * Known paths with any other method fastify knows (TRACE, QUERY, PROPFIND, ...): 405 with Allow, not 404. Sent
 * from onRequest, before fastify looks at a body (QUERY without Content-Type would otherwise be a 400).
 */
function registerMethodNotAllowed(app: FastifyInstance): void {
  const others = (allowed: readonly string[]): HTTPMethods[] =>
    (app.supportedMethods as HTTPMethods[]).filter((m) => !allowed.includes(m));
  for (const [url, , allowed] of KNOWN_PATHS) {
    const notAllowed = async (_req: FastifyRequest, reply: FastifyReply) => {
      void reply.header('allow', allowed.join(', '));
      return sendError(reply, 405, `Method not allowed; use ${allowed.join(', ')}`);
    };
    app.route({ method: others(allowed), url, onRequest: notAllowed, handler: notAllowed });
  }
}

type Authenticate = (req: FastifyRequest) => Promise<void>;

function registerByokRoutes(
  app: FastifyInstance,
  service: ByokService,
  authenticate: Authenticate,
  limited: object,
): void {
  const json = (reply: FastifyReply, status: number, body: string | Buffer) =>
    reply.code(status).type('application/json; charset=utf-8').send(body);
  const single = (e: CredentialEntry): Buffer => (e.single ??= Buffer.from(`{"data":${e.json}}`));

  app.route({
    method: 'GET',
    url: `${API_PREFIX}/byok`,
    preParsing: authenticate,
    config: limited,
    handler: async (req, reply) => json(reply, 200, service.list(req.account, req.query)),
  });
  app.route({
    method: 'POST',
    url: `${API_PREFIX}/byok`,
    preParsing: authenticate,
    config: limited,
    handler: async (req, reply) => {
      const idem = req.headers['idempotency-key'];
      if (Array.isArray(idem))
        throw new ApiError(400, 'Idempotency-Key must be sent at most once', { field: 'Idempotency-Key' });
      return json(
        reply,
        201,
        single(
          markDefaultedWorkspace(
            reply,
            req.body,
            await service.create(req.account, req.body, idem !== undefined ? { idempotencyKey: idem } : {}),
          ),
        ),
      );
    },
  });
  app.route<{ Params: { id: string } }>({
    method: 'GET',
    url: `${API_PREFIX}/byok/:id`,
    preParsing: authenticate,
    config: limited,
    handler: async (req, reply) => json(reply, 200, single(service.get(req.account, req.params.id))),
  });
  app.route<{ Params: { id: string } }>({
    method: 'PATCH',
    url: `${API_PREFIX}/byok/:id`,
    preParsing: authenticate,
    config: limited,
    handler: async (req, reply) => {
      return json(reply, 200, single(await service.update(req.account, req.params.id, req.body)));
    },
  });
  app.route<{ Params: { id: string } }>({
    method: 'DELETE',
    url: `${API_PREFIX}/byok/:id`,
    preParsing: authenticate,
    config: limited,
    handler: async (req, reply) => {
      await service.delete(req.account, req.params.id);
      return json(reply, 200, '{"deleted":true}');
    },
  });
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = createFastify(deps.logger);
  const service =
    deps.service ??
    new ByokService({
      state: deps.state,
      backend: deps.backend,
      observe: deps.observe,
      observeDeleted: deps.observeDeleted,
      gitopsGuard: deps.gitopsGuard ?? true,
      warn: (msg, fields) => deps.logger.warn(fields, msg),
      ...(deps.defaultMaxCredentials !== undefined ? { defaultMaxCredentials: deps.defaultMaxCredentials } : {}),
    });

  registerApiMetrics(app);

  // Declared up front so every request object has the same shape.
  app.decorateRequest('account', '');
  app.decorateRequest('tokenHash', '');
  installJsonParser(app);
  installErrorHandling(app);

  // Runs as preParsing, after the rate limiter's onRequest hook: refused and unauthenticated requests are
  // counted too (per client IP), and no body is parsed for them.
  const authenticate = async (req: FastifyRequest): Promise<void> => {
    // Before the first sync no management key is known: a 503 to retry, never a 401 that says the key is wrong.
    if (deps.ready && !deps.ready()) throw new ApiError(503, NOT_SYNCED_MESSAGE, null, { 'retry-after': '5' });
    const hash = bearerHash(req);
    if (hash === undefined) throw new ApiError(401, MESSAGES.missingAuth, null, { 'www-authenticate': 'Bearer' });
    const ns = deps.state.managementKeys.namespaceOf(hash);
    if (ns !== undefined) {
      req.account = ns;
      req.tokenHash = hash;
      return;
    }
    if (deps.state.isLiveApiKeyHash(hash)) throw new ApiError(403, MESSAGES.notManagementKey);
    throw new ApiError(401, MESSAGES.invalidAuth, null, { 'www-authenticate': 'Bearer error="invalid_token"' });
  };

  const limits = deps.rateLimit === undefined ? DEFAULT_RATE_LIMIT : deps.rateLimit;
  if (limits) {
    await app.register(rateLimit, {
      global: false,
      max: limits.max,
      timeWindow: limits.timeWindowMs,
      // A management key has its own budget; anything else (no header, wrong key, gateway key) the client IP's.
      keyGenerator: (req) => {
        const hash = bearerHash(req);
        return hash !== undefined && deps.state.managementKeys.namespaceOf(hash) !== undefined ? hash : `ip:${req.ip}`;
      },
      errorResponseBuilder: (_req, ctx) =>
        new ApiError(429, MESSAGES.rateLimited, { retry_after_seconds: Math.ceil(ctx.ttl / 1000), limit: ctx.max }),
    });
  }
  const limited = limits ? { rateLimit: { max: limits.max, timeWindow: limits.timeWindowMs } } : {};

  // Kubernetes probes, outside the OpenRouter-compatible prefix and without auth. Liveness never depends on the
  // apiserver: a process that cannot reach it yet is not ready, but restarting it would not help.
  app.get('/healthz', async (_req, reply) => reply.type('application/json; charset=utf-8').send('{"status":"ok"}'));
  app.get('/readyz', async (_req, reply) =>
    (deps.ready?.() ?? true)
      ? reply.type('application/json; charset=utf-8').send('{"status":"ready"}')
      : sendError(reply, 503, NOT_SYNCED_MESSAGE),
  );

  const openapi = JSON.stringify(buildOpenApiDocument(API_PREFIX));
  app.get(`${API_PREFIX}/openapi.json`, async (_req, reply) =>
    reply.type('application/json; charset=utf-8').send(openapi),
  );

  registerByokRoutes(app, service, authenticate, limited);
  registerMethodNotAllowed(app);
  return app;
}

/** The door's own options: where it listens and how it limits. */
export interface ApiDoorOptions {
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** The logger of a runtime of the door's own (with a shared runtime, the door logs with the runtime's). */
  logger?: Logger;
  rateLimit?: RateLimitOptions | false;
}

/**
 * Either a runtime started by the caller (the process serving both doors shares it; the door listens at once and
 * answers 503 until the caches sync), or the runtime's options: the door then starts its own runtime, owns it, and
 * returns once the caches have synced (tests and benchmarks).
 */
export type StartApiServerOptions = ApiDoorOptions &
  ({ runtime: ServiceRuntime } | Omit<ServiceRuntimeOptions, 'logger'>);

export interface ApiServer {
  /** Base URL ending in /api/v1. */
  url: string;
  close(): Promise<void>;
  /** For tests and benchmarks. */
  app: FastifyInstance;
  runtime: ServiceRuntime;
  state: ApiState;
  /** The one write path, shared with the aggregated API door in the same process. */
  service: ByokService;
  ready(): boolean;
}

export function defaultLogger(): Logger {
  return pino({
    name: 'byok-api',
    level: process.env.LOG_LEVEL ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
  });
}

export async function startApiServer(opts: StartApiServerOptions): Promise<ApiServer> {
  const owned =
    'runtime' in opts ? undefined : startServiceRuntime({ ...opts, logger: opts.logger ?? defaultLogger() });
  const runtime = 'runtime' in opts ? opts.runtime : (owned as ServiceRuntime);
  const { state, service, backend, ready } = runtime;
  const app = await buildApp({
    state,
    backend,
    observe: () => undefined,
    observeDeleted: () => undefined,
    service,
    ready,
    logger: runtime.logger,
    ...(opts.rateLimit !== undefined ? { rateLimit: opts.rateLimit } : {}),
  });
  let address: string;
  try {
    address = await app.listen({ host: opts.host ?? '127.0.0.1', port: opts.port ?? 0 });
    // A runtime of our own: the caller gets a door whose caches are filled, as a test or a benchmark expects.
    await owned?.whenSynced();
  } catch (err) {
    await app.close();
    await owned?.close();
    throw err;
  }
  return {
    url: `${address}${API_PREFIX}`,
    app,
    runtime,
    state,
    service,
    ready,
    close: async () => {
      await app.close();
      await owned?.close();
    },
  };
}
