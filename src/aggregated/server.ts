// The aggregated API server: HTTPS, registered with the kube-aggregator as v1.api.byok.gateway.dev. A second front
// door to the same ByokService and read model as /api/v1/byok. This file is the filter chain every request passes
// (authentication from the apiserver's front-proxy headers or a TokenReview, a SubjectAccessReview per resource
// request, a strict path parse, errors as Status); discovery.ts serves discovery and OpenAPI, and each resource's
// storage lives in registry/<resource>.ts, so a second resource is a new file there, not an edit here.
import type { KubeAccess } from '../kube/kubeconfig.ts';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { ApiError, errorBody, MESSAGES } from '../service/errors.ts';
import { BODY_LIMIT, REDACT_PATHS } from '../service/limits.ts';
import type { ByokService } from '../service/service.ts';
import type { ApiState } from '../service/state.ts';
import { kubeClient } from '../kube/client.ts';
import { DelegatedAuth, loadRequestHeaderConfig, type RequestHeaderConfig, type ResourceAttributes, type UserInfo } from './auth.ts';
import { registerDiscovery } from './discovery.ts';
import { registerByokRest, BYOK_REST_RESOURCE } from './registry/byok.ts';
import { byokKeysResource, registerByokKeys } from './registry/byokkeys.ts';
import { str } from './request.ts';
import { AGG_GROUP, AGG_PREFIX, AGG_VERSION, RESOURCE } from './resource.ts';
import { REASONS, statusBody, StatusError, statusFromApiError } from './status.ts';

export interface AggregatedServerOptions {
  /** The server's own identity: reads the authentication ConfigMap, posts TokenReviews and SubjectAccessReviews. */
  kubeConfig: KubeAccess;
  state: ApiState;
  service: ByokService;
  ready: () => boolean;
  tls: { certPem: string; keyPem: string };
  logger: Logger;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Overrides the ConfigMap (tests); undefined loads it from kube-system/extension-apiserver-authentication. */
  requestHeader?: RequestHeaderConfig;
}

export interface AggregatedServer {
  url: string;
  port: number;
  app: FastifyInstance;
  close(): Promise<void>;
}

declare module 'fastify' {
  interface FastifyRequest {
    kubeUser: UserInfo | undefined;
  }
}

const HEALTH = new Set(['/healthz', '/livez', '/readyz']);
const isResourcePath = (url: string) => url.startsWith(`${AGG_PREFIX}/`) && !url.startsWith(`${AGG_PREFIX}?`);

interface PathInfo {
  namespace: string | undefined;
  kind: typeof RESOURCE | typeof BYOK_REST_RESOURCE;
  name: string | undefined;
}

/** A namespace is a DNS-1123 label; an object name here is a DNS-1123 subdomain (our ids are UUIDs). */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/i;

/**
 * The resource a path under the group names, or undefined when it names none. Strict on purpose: every segment must
 * be present (no `namespaces//byokkeys`), decode cleanly and be a valid namespace or name, so the request the router
 * serves is exactly the one that was authorized (issue 24). Anything else under the group is refused before a
 * handler runs.
 */
function parsePath(pathname: string): PathInfo | undefined {
  if (!pathname.startsWith(`${AGG_PREFIX}/`)) return undefined;
  let rest: string[];
  try {
    rest = pathname.slice(AGG_PREFIX.length + 1).replace(/\/$/, '').split('/').map(decodeURIComponent);
  } catch {
    return undefined;
  }
  if (rest[0] === RESOURCE && rest.length === 1) return { namespace: undefined, kind: RESOURCE, name: undefined };
  if (rest[0] !== 'namespaces' || rest.length < 3 || rest.length > 4) return undefined;
  if (rest[2] !== RESOURCE && rest[2] !== BYOK_REST_RESOURCE) return undefined;
  const [, namespace, kind, name] = rest as [string, string, PathInfo['kind'], string | undefined];
  if (!NAMESPACE.test(namespace) || (name !== undefined && !OBJECT_NAME.test(name))) return undefined;
  return { namespace, kind, name };
}

function verbOf(method: string, info: PathInfo, query: Record<string, unknown>): string {
  switch (method) {
    case 'GET':
    case 'HEAD':
      if (info.name !== undefined) return 'get';
      return query.watch === 'true' || query.watch === '1' ? 'watch' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      // On the collection path: `deletecollection`, a verb of its own in RBAC, as for built-in resources.
      return info.name !== undefined ? 'delete' : 'deletecollection';
    default:
      return method.toLowerCase();
  }
}

export async function startAggregatedServer(opts: AggregatedServerOptions): Promise<AggregatedServer> {
  const log = opts.logger.child({ component: 'aggregated-api' }, { redact: { paths: REDACT_PATHS, censor: '[REDACTED]' } });
  const client = kubeClient(opts.kubeConfig);
  // Without read access to the ConfigMap only bearer tokens work until a later re-read succeeds; start anyway.
  const requestHeader =
    opts.requestHeader ??
    (await loadRequestHeaderConfig(client).catch((err: unknown) => {
      log.warn({ code: (err as { status?: number }).status }, 'could not read kube-system/extension-apiserver-authentication (needs the extension-apiserver-authentication-reader Role)');
      return undefined;
    }));
  if (!requestHeader) log.warn('no requestheader-client-ca-file in kube-system/extension-apiserver-authentication: only bearer tokens are accepted');
  const auth = new DelegatedAuth({ client, requestHeader });
  // The front-proxy CA and allowed names can rotate: re-read them, keeping the last good copy on errors.
  const refresh = opts.requestHeader
    ? undefined
    : setInterval(() => {
        loadRequestHeaderConfig(client).then(
          (c) => c && auth.setRequestHeader(c),
          (err: unknown) => log.warn({ code: (err as { status?: number }).status }, 'could not re-read kube-system/extension-apiserver-authentication'),
        );
      }, 60_000);
  refresh?.unref();
  const { service, state } = opts;

  const app = Fastify({
    loggerInstance: log,
    bodyLimit: BODY_LIMIT,
    https: { key: opts.tls.keyPem, cert: opts.tls.certPem, requestCert: true, rejectUnauthorized: false, minVersion: 'TLSv1.2' },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 300 },
  }) as unknown as FastifyInstance;
  app.decorateRequest('kubeUser', undefined);

  // Every body is read raw: the handlers decide by content type (merge patch, JSON patch, apply YAML, ...).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_req, body, done) => done(null, body));

  const sendStatus = (reply: FastifyReply, e: StatusError) => reply.code(e.code).type('application/json').send(statusBody(e.code, e.reason, e.message, e.details));
  const sendRestError = (reply: FastifyReply, status: number, message: string, metadata: Record<string, unknown> | null = null) =>
    reply.code(status).type('application/json; charset=utf-8').send(errorBody(status, message, metadata));

  app.setErrorHandler((err: unknown, req, reply) => {
    const rest = parsePath(req.url.split('?')[0] ?? '')?.kind === BYOK_REST_RESOURCE;
    if (err instanceof StatusError) return rest ? sendRestError(reply, err.code, err.message) : sendStatus(reply, err);
    if (err instanceof ApiError) {
      if (rest) {
        for (const [h, v] of Object.entries(err.headers)) void reply.header(h, v);
        return sendRestError(reply, err.status, err.message, err.metadata);
      }
      return sendStatus(reply, statusFromApiError(err, str((req.params as Record<string, unknown> | undefined)?.name)));
    }
    const e = err as { code?: string; statusCode?: number; name?: string };
    if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return rest ? sendRestError(reply, 413, MESSAGES.tooLarge, { limit_bytes: BODY_LIMIT }) : sendStatus(reply, new StatusError(413, 'RequestEntityTooLarge', MESSAGES.tooLarge));
    const status = typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : 500;
    if (status === 500) req.log.error({ err: { name: e.name, code: e.code } }, 'request failed');
    const message = status === 500 ? MESSAGES.internal : 'Bad request';
    return rest ? sendRestError(reply, status, message) : sendStatus(reply, new StatusError(status, REASONS[status] ?? 'Unknown', message));
  });
  app.setNotFoundHandler((req, reply) => {
    // Never 503 under /apis (that marks the group stale); unknown paths are plain 404s.
    return sendStatus(reply, new StatusError(404, 'NotFound', `the server could not find the requested resource (${req.method} ${(req.url.split('?')[0] ?? '').slice(0, 200)})`));
  });

  app.addHook('onRequest', async (req) => {
    const path = req.url.split('?')[0] ?? '';
    if (HEALTH.has(path)) return;
    const distinct = req.raw.headersDistinct;
    const result = await auth.authenticate(req.raw.socket as TLSSocket, req.headers, distinct);
    if (!result.ok) {
      log.info({ method: req.method, path: path.slice(0, 200), reason: result.reason }, 'unauthenticated request');
      throw new StatusError(401, 'Unauthorized', 'Unauthorized');
    }
    req.kubeUser = result.user;
    if (!isResourcePath(path)) return; // discovery and OpenAPI: any authenticated user, like system:discovery
    const info = parsePath(path);
    // Deny by default: a path under the group that names no resource is never handed to a handler.
    if (!info) throw new StatusError(404, 'NotFound', `the server could not find the requested resource (${req.method} ${path.slice(0, 200)})`);
    const attrs: ResourceAttributes = {
      ...(info.namespace !== undefined ? { namespace: info.namespace } : {}),
      verb: verbOf(req.method, info, req.query as Record<string, unknown>),
      group: AGG_GROUP,
      version: AGG_VERSION,
      // The OpenRouter-shaped path is its own resource, `byok`: the kube-apiserver authorizes it so before proxying.
      resource: info.kind,
      ...(info.name !== undefined ? { name: info.name } : {}),
    };
    const decision = await auth.authorize(result.user, attrs);
    if (!decision.allowed) {
      const where = info.namespace !== undefined ? ` in the namespace "${info.namespace}"` : ' at the cluster scope';
      throw new StatusError(
        403,
        'Forbidden',
        `${info.kind}.${AGG_GROUP}${info.name ? ` "${info.name}"` : ''} is forbidden: User "${result.user.username}" cannot ${attrs.verb} resource "${info.kind}" in API group "${AGG_GROUP}"${where}`,
        { ...(info.name ? { name: info.name } : {}), group: AGG_GROUP, kind: info.kind },
      );
    }
  });

  // ---- health ----
  const ok = (reply: FastifyReply) => reply.type('text/plain; charset=utf-8').send('ok');
  app.get('/healthz', async (_req, reply) => ok(reply));
  app.get('/livez', async (_req, reply) => ok(reply));
  app.get('/readyz', async (_req, reply) => (opts.ready() ? ok(reply) : reply.code(503).type('text/plain; charset=utf-8').send('informer caches not synced')));

  // ---- discovery, OpenAPI and the resources ----
  registerDiscovery(app, [byokKeysResource]);
  const byokKeys = registerByokKeys(app, { service, state, log });
  registerByokRest(app, service);

  let address: string;
  try {
    address = await app.listen({ host: opts.host ?? '127.0.0.1', port: opts.port ?? 0 });
  } catch (err) {
    if (refresh) clearInterval(refresh);
    byokKeys.close();
    throw err;
  }
  const port = (app.server.address() as { port: number }).port;
  log.info({ url: address }, 'aggregated API server listening');
  return {
    url: address,
    port,
    app,
    close: async () => {
      if (refresh) clearInterval(refresh);
      byokKeys.close();
      // Open watches would hold close() forever.
      app.server.closeAllConnections?.();
      await app.close();
    },
  };
}
