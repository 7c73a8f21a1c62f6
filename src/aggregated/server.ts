// The aggregated API server: HTTPS, registered with the kube-aggregator as v1.api.byok.gateway.dev. A second front
// door to the same ByokService and read model as /api/v1/byok. This file is the filter chain every request passes
// (authentication from the apiserver's front-proxy headers or a TokenReview, a SubjectAccessReview per resource
// request, a strict path parse, errors as Status); discovery.ts serves discovery and OpenAPI from the resources'
// details, the generic verb handlers (handlers/) serve each resource, and each resource's strategy, storage, table
// and OpenAPI live in registry/<resource>/, so a second resource is a folder there plus its entry below.

import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { kubeClient } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { ApiError, errorBody, MESSAGES } from '../service/errors.ts';
import { BODY_LIMIT, REDACT_PATHS } from '../service/limits.ts';
import type { ServiceRuntime } from '../service/runtime.ts';
import { access, escapedSlashesAsSeparators, installAccessControl } from './access.ts';
import { DelegatedAuth, loadRequestHeaderConfig, type RequestHeaderConfig } from './auth.ts';
import { registerDiscovery } from './discovery.ts';
import { AGG_GROUP } from './group.ts';
import { installResource } from './handlers/install.ts';
import type { ResourceDetails } from './handlers/resource.ts';
import { BYOK_REST_RESOURCE, registerByokRest } from './registry/byok.ts';
import { byokKeys } from './registry/byokkeys/index.ts';
import { str } from './request.ts';
import { REASONS, StatusError, type StatusTarget, statusBody, statusFromApiError } from './status.ts';

export interface AggregatedServerOptions {
  /** The server's own identity: reads the authentication ConfigMap, posts TokenReviews and SubjectAccessReviews. */
  kubeConfig: KubeAccess;
  /** The read model and write path, shared with the REST door when both run (see service/runtime.ts). */
  runtime: Pick<ServiceRuntime, 'state' | 'service' | 'ready' | 'whenSynced'>;
  tls: { certPem: string; keyPem: string };
  logger: Logger;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Accept bearer tokens sent straight to this server (TokenReview); off by default. */
  acceptBearerTokens?: boolean;
  /** Overrides the ConfigMap (tests); undefined loads it from kube-system/extension-apiserver-authentication. */
  requestHeader?: RequestHeaderConfig;
}

export interface AggregatedServer {
  url: string;
  port: number;
  app: FastifyInstance;
  close(): Promise<void>;
}

export async function startAggregatedServer(opts: AggregatedServerOptions): Promise<AggregatedServer> {
  const log = opts.logger.child(
    { component: 'aggregated-api' },
    { redact: { paths: REDACT_PATHS, censor: '[REDACTED]' } },
  );
  const client = kubeClient(opts.kubeConfig);
  // Without read access to the ConfigMap only bearer tokens work until a later re-read succeeds; start anyway.
  const requestHeader =
    opts.requestHeader ??
    (await loadRequestHeaderConfig(client).catch((err: unknown) => {
      log.warn(
        { code: (err as { status?: number }).status },
        'could not read kube-system/extension-apiserver-authentication (needs the extension-apiserver-authentication-reader Role)',
      );
      return undefined;
    }));
  if (!requestHeader)
    log.warn(
      'no requestheader-client-ca-file in kube-system/extension-apiserver-authentication: only bearer tokens are accepted',
    );
  const auth = new DelegatedAuth({ client, requestHeader, acceptBearerTokens: opts.acceptBearerTokens === true });
  // The front-proxy CA and allowed names can rotate: re-read them, keeping the last good copy on errors.
  const refresh = opts.requestHeader
    ? undefined
    : setInterval(() => {
        loadRequestHeaderConfig(client).then(
          (c) => c && auth.setRequestHeader(c),
          (err: unknown) =>
            log.warn(
              { code: (err as { status?: number }).status },
              'could not re-read kube-system/extension-apiserver-authentication',
            ),
        );
      }, 60_000);
  refresh?.unref();
  const { service, state, ready, whenSynced } = opts.runtime;
  // The resources served: each a registry folder; discovery and the error handler read their details.
  const keys = byokKeys({ service, state });
  const resources: readonly ResourceDetails[] = [keys];
  const targets = new Map<string, StatusTarget>(resources.map((r) => [r.names.name, r.errors]));
  const targetOf = (resource: string | undefined): StatusTarget =>
    targets.get(resource ?? '') ?? {
      group: AGG_GROUP,
      resource: resource ?? '',
      kind: resource ?? '',
      fieldOf: (f) => f,
      messageOf: (m) => m,
    };

  const app = Fastify({
    loggerInstance: log,
    bodyLimit: BODY_LIMIT,
    https: {
      key: opts.tls.keyPem,
      cert: opts.tls.certPem,
      requestCert: true,
      rejectUnauthorized: false,
      minVersion: 'TLSv1.2',
    },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 300 },
    // The kube-apiserver reads an escaped slash as a separator (Go decodes the whole path once); the router here would
    // keep it inside a segment. Read it as the apiserver does, so both doors route one spelling the same way.
    rewriteUrl: (req) => escapedSlashesAsSeparators(req.url ?? '/'),
  }) as unknown as FastifyInstance;
  installAccessControl(app, { auth, log });

  // Every body is read raw: the handlers decide by content type (merge patch, JSON patch, apply YAML, ...).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_req, body, done) => done(null, body));

  const sendStatus = (reply: FastifyReply, e: StatusError) =>
    reply
      .code(e.code)
      .type('application/json')
      .send(statusBody(e.code, e.reason, e.message, e.details));
  const sendRestError = (
    reply: FastifyReply,
    status: number,
    message: string,
    metadata: Record<string, unknown> | null = null,
  ) =>
    reply
      .code(status)
      .type('application/json; charset=utf-8')
      .send(errorBody(status, message, metadata));

  app.setErrorHandler((err: unknown, req, reply) => {
    const declared = req.is404 ? undefined : req.routeOptions.config.access;
    const rest = declared?.kind === 'resource' && declared.resource === BYOK_REST_RESOURCE;
    if (err instanceof StatusError) return rest ? sendRestError(reply, err.code, err.message) : sendStatus(reply, err);
    if (err instanceof ApiError) {
      if (rest) {
        for (const [h, v] of Object.entries(err.headers)) void reply.header(h, v);
        return sendRestError(reply, err.status, err.message, err.metadata);
      }
      const resource = declared?.kind === 'resource' ? declared.resource : undefined;
      return sendStatus(
        reply,
        statusFromApiError(err, targetOf(resource), str((req.params as Record<string, unknown> | undefined)?.name)),
      );
    }
    const e = err as { code?: string; statusCode?: number; name?: string };
    if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return rest
        ? sendRestError(reply, 413, MESSAGES.tooLarge, { limit_bytes: BODY_LIMIT })
        : sendStatus(reply, new StatusError(413, 'RequestEntityTooLarge', MESSAGES.tooLarge));
    const status = typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : 500;
    if (status === 500) req.log.error({ err: { name: e.name, code: e.code } }, 'request failed');
    const message = status === 500 ? MESSAGES.internal : 'Bad request';
    return rest
      ? sendRestError(reply, status, message)
      : sendStatus(reply, new StatusError(status, REASONS[status] ?? 'Unknown', message));
  });
  app.setNotFoundHandler((req, reply) => {
    // Never 503 under /apis (that marks the group stale); unknown paths are plain 404s.
    return sendStatus(
      reply,
      new StatusError(
        404,
        'NotFound',
        `the server could not find the requested resource (${req.method} ${(req.url.split('?')[0] ?? '').slice(0, 200)})`,
      ),
    );
  });

  // ---- health ----
  const ok = (reply: FastifyReply) => reply.type('text/plain; charset=utf-8').send('ok');
  const open = access({ kind: 'public' });
  app.get('/healthz', open, async (_req, reply) => ok(reply));
  app.get('/livez', open, async (_req, reply) => ok(reply));
  app.get('/readyz', open, async (_req, reply) =>
    ready() ? ok(reply) : reply.code(503).type('text/plain; charset=utf-8').send('informer caches not synced'),
  );

  // ---- discovery, OpenAPI and the resources ----
  registerDiscovery(app, resources);
  const installed = [installResource(app, keys, { log, ready, whenSynced })];
  registerByokRest(app, service, ready);

  let address: string;
  try {
    address = await app.listen({ host: opts.host ?? '127.0.0.1', port: opts.port ?? 0 });
  } catch (err) {
    if (refresh) clearInterval(refresh);
    for (const r of installed) r.close();
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
      for (const r of installed) r.close();
      // Open watches would hold close() forever.
      app.server.closeAllConnections?.();
      await app.close();
    },
  };
}
