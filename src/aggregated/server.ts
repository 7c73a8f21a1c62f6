// The aggregated API server: HTTPS, registered with the kube-aggregator as v1.api.byok.gateway.dev. A second front
// door to the same ByokService and read model as /api/v1/byok; identities come from the apiserver (front-proxy
// headers or TokenReview) and every resource request is authorized with a SubjectAccessReview.
import { createHash } from 'node:crypto';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { parse as parseYaml } from 'yaml';
import { ApiError, errorBody, MESSAGES } from '../service/errors.ts';
import { BODY_LIMIT, REDACT_PATHS } from '../service/limits.ts';
import type { ByokService } from '../service/service.ts';
import type { ApiState, CredentialEntry } from '../service/state.ts';
import { kubeClient } from '../kube/client.ts';
import { yamlSafeJson } from '../domain/text.ts';
import { exceedsDepth, MAX_JSON_DEPTH, parseUntrustedJson, UntrustedJsonError } from '../domain/json.ts';
import { DelegatedAuth, loadRequestHeaderConfig, type RequestHeaderConfig, type ResourceAttributes, type UserInfo } from './auth.ts';
import { jsonPatch, mergePatch, PatchError } from './patch.ts';
import {
  AGG_GROUP,
  AGG_GROUP_VERSION,
  AGG_PREFIX,
  AGG_VERSION,
  CATEGORIES,
  createRequestFrom,
  fieldValues,
  InvalidObject,
  KIND,
  kubeFieldOf,
  kubeMessageOf,
  matches,
  openApiV2,
  openApiV3,
  parseSelector,
  RESOURCE,
  SelectorError,
  SHORT_NAMES,
  SINGULAR,
  SUPPORTED_FIELDS,
  table,
  toKubeObject,
  updateRequestFrom,
  VERBS,
  type ByokKeyObject,
  type IncludeObject,
  type Requirement,
} from './resource.ts';
import { ExpiredError, WatchHub, type HubEvent } from './watch.ts';

// ---- Status ----

interface Cause {
  type?: string;
  field?: string;
  message: string;
}

export class StatusError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: number, reason: string, message: string, details?: Record<string, unknown>) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }
}

export function statusBody(code: number, reason: string, message: string, details?: Record<string, unknown>): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Expired',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};

function causesOf(err: ApiError): Cause[] {
  const md = (err.metadata ?? {}) as { field?: unknown; errors?: unknown; violations?: unknown };
  const list = (Array.isArray(md.violations) ? md.violations : Array.isArray(md.errors) ? md.errors : []) as { field?: unknown; message?: unknown }[];
  if (md.field === 'key') {
    // Payload problems: the sub-field is inside the secret's document; the message never quotes the value.
    const sub = list.map((e) => `${String(e.field ?? '')}: ${String(e.message ?? '')}`);
    return [{ type: 'FieldValueInvalid', field: 'spec.key', message: sub.length > 0 ? sub.join('; ') : err.message }];
  }
  if (list.length > 0) return list.map((e) => ({ type: 'FieldValueInvalid', field: kubeFieldOf(String(e.field ?? '')), message: kubeMessageOf(String(e.message ?? '')) }));
  if (typeof md.field === 'string' && md.field !== '') return [{ type: 'FieldValueInvalid', field: kubeFieldOf(md.field), message: kubeMessageOf(err.message) }];
  return [];
}

/** ByokService's errors → Kubernetes Status. A field-level 400 becomes 422 Invalid with causes, as for built-in kinds. */
export function statusFromApiError(err: ApiError, name?: string): StatusError {
  const details = { ...(name ? { name } : {}), group: AGG_GROUP, kind: RESOURCE };
  if (err.status === 400) {
    const causes = causesOf(err);
    if (causes.length > 0) {
      return new StatusError(422, 'Invalid', `${KIND}${name ? ` "${name}"` : ''} is invalid: ${kubeMessageOf(err.message)}`, { ...details, kind: KIND, causes });
    }
    return new StatusError(400, 'BadRequest', kubeMessageOf(err.message), details);
  }
  if (err.status === 404) return new StatusError(404, 'NotFound', `${RESOURCE}.${AGG_GROUP}${name ? ` "${name}"` : ''} not found`, details);
  return new StatusError(err.status, REASONS[err.status] ?? 'Unknown', err.message, details);
}

// ---- content negotiation ----

type Shape = 'object' | 'table' | 'partial';

function responseShape(accept: string | undefined): { shape: Shape; tableVersion: string } {
  const a = accept ?? '';
  for (const clause of a.split(',')) {
    const params = Object.fromEntries(
      clause
        .split(';')
        .slice(1)
        .map((p) => p.trim().split('=') as [string, string]),
    );
    if (params.g === 'meta.k8s.io' && params.as === 'Table' && (params.v === 'v1' || params.v === 'v1beta1')) return { shape: 'table', tableVersion: params.v };
    if (params.g === 'meta.k8s.io' && (params.as === 'PartialObjectMetadataList' || params.as === 'PartialObjectMetadata') && params.v === 'v1') return { shape: 'partial', tableVersion: 'v1' };
  }
  return { shape: 'object', tableVersion: 'v1' };
}

// ---- discovery ----

const resourceList = {
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion: AGG_GROUP_VERSION,
  resources: [{ name: RESOURCE, singularName: SINGULAR, namespaced: true, kind: KIND, verbs: VERBS, shortNames: SHORT_NAMES, categories: CATEGORIES }],
};
const apiGroup = {
  kind: 'APIGroup',
  apiVersion: 'v1',
  name: AGG_GROUP,
  versions: [{ groupVersion: AGG_GROUP_VERSION, version: AGG_VERSION }],
  preferredVersion: { groupVersion: AGG_GROUP_VERSION, version: AGG_VERSION },
};
const apiGroupList = { kind: 'APIGroupList', apiVersion: 'v1', groups: [apiGroup] };
const aggregatedDiscovery = {
  kind: 'APIGroupDiscoveryList',
  apiVersion: 'apidiscovery.k8s.io/v2',
  metadata: {},
  items: [
    {
      metadata: { name: AGG_GROUP },
      versions: [
        {
          version: AGG_VERSION,
          freshness: 'Current',
          resources: [
            {
              resource: RESOURCE,
              responseKind: { group: AGG_GROUP, version: AGG_VERSION, kind: KIND },
              scope: 'Namespaced',
              singularResource: SINGULAR,
              verbs: VERBS,
              shortNames: SHORT_NAMES,
              categories: CATEGORIES,
            },
          ],
        },
      ],
    },
  ],
};
const DISCOVERY_V2_TYPE = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';

// ---- the server ----

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
const MAX_WATCH_BACKLOG = 8 * 1024 * 1024;
const isResourcePath = (url: string) => url.startsWith(`${AGG_PREFIX}/`) && !url.startsWith(`${AGG_PREFIX}?`);

interface PathInfo {
  namespace: string | undefined;
  kind: 'byokkeys' | 'byok';
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
  if (rest[0] === RESOURCE && rest.length === 1) return { namespace: undefined, kind: 'byokkeys', name: undefined };
  if (rest[0] !== 'namespaces' || rest.length < 3 || rest.length > 4) return undefined;
  if (rest[2] !== RESOURCE && rest[2] !== 'byok') return undefined;
  const [, namespace, kind, name] = rest as [string, string, 'byokkeys' | 'byok', string | undefined];
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
      return 'delete';
    default:
      return method.toLowerCase();
  }
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

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
  const hub = new WatchHub(opts.state);
  const { service, state } = opts;
  // The kube-apiserver parses downloaded OpenAPI documents with a YAML reader, which refuses the raw U+2028 and
  // noncharacters of the text-hygiene patterns: one such character makes the cluster's merged OpenAPI answer 503.
  const openapiV2 = yamlSafeJson(openApiV2());
  const openapiV3 = yamlSafeJson(openApiV3());
  const openapiV3Hash = createHash('sha512').update(openapiV3).digest('hex').slice(0, 32).toUpperCase();

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
    const rest = parsePath(req.url.split('?')[0] ?? '')?.kind === 'byok';
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

  // ---- discovery ----
  app.get('/apis', async (req, reply) => {
    const accept = req.headers.accept ?? '';
    if (/as=APIGroupDiscoveryList/.test(accept) && /v=v2(?![a-z0-9])/.test(accept)) return reply.type(DISCOVERY_V2_TYPE).send(aggregatedDiscovery);
    return reply.type('application/json').send(apiGroupList);
  });
  app.get(`/apis/${AGG_GROUP}`, async (_req, reply) => reply.type('application/json').send(apiGroup));
  app.get(AGG_PREFIX, async (_req, reply) => reply.type('application/json').send(resourceList));

  // ---- OpenAPI ----
  app.get('/openapi/v2', async (_req, reply) => reply.type('application/json').send(openapiV2));
  app.get('/openapi/v3', async (_req, reply) =>
    reply.type('application/json').send({ paths: { [`apis/${AGG_GROUP}/${AGG_VERSION}`]: { serverRelativeURL: `/openapi/v3/apis/${AGG_GROUP}/${AGG_VERSION}?hash=${openapiV3Hash}` } } }),
  );
  app.get(`/openapi/v3/apis/${AGG_GROUP}/${AGG_VERSION}`, async (_req, reply) => reply.type('application/json').send(openapiV3));

  // ---- byokkeys: the Kubernetes resource ----

  const listMeta = (extra: Record<string, unknown> = {}) => ({ resourceVersion: hub.currentRv(), ...extra });
  // Entries are replaced on every change, so an object computed once per entry stays right; never mutated.
  const objects = new WeakMap<CredentialEntry, ByokKeyObject>();
  const objectOf = (e: CredentialEntry): ByokKeyObject => {
    let o = objects.get(e);
    if (!o) {
      o = toKubeObject(e);
      objects.set(e, o);
    }
    return o;
  };

  interface Selection {
    labels: Requirement[];
    fields: Requirement[];
  }
  const selection = (q: Record<string, unknown>): Selection => {
    try {
      const fields = parseSelector(str(q.fieldSelector));
      for (const f of fields) if (!SUPPORTED_FIELDS.includes(f.key)) throw new SelectorError(`field label not supported: ${f.key}`);
      return { labels: parseSelector(str(q.labelSelector)), fields };
    } catch (err) {
      if (err instanceof SelectorError) throw new StatusError(400, 'BadRequest', err.message);
      throw err;
    }
  };
  const selected = (o: ByokKeyObject, s: Selection) => matches(s.labels, o.metadata.labels ?? {}) && matches(s.fields, fieldValues(o));

  const includeOf = (q: Record<string, unknown>): IncludeObject => {
    const v = str(q.includeObject);
    return v === 'None' || v === 'Object' ? v : 'Metadata';
  };

  const sendObject = (req: FastifyRequest, reply: FastifyReply, code: number, o: ByokKeyObject) => {
    const { shape, tableVersion } = responseShape(req.headers.accept);
    if (shape === 'table') {
      const t = { ...table([o], includeOf(req.query as Record<string, unknown>), { resourceVersion: o.metadata.resourceVersion }), apiVersion: `meta.k8s.io/${tableVersion}` };
      return reply.code(code).type(`application/json;as=Table;v=${tableVersion};g=meta.k8s.io`).send(t);
    }
    if (shape === 'partial') return reply.code(code).type('application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io').send({ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata });
    return reply.code(code).type('application/json').send(o);
  };

  const listObjects = (namespace: string | undefined, sel: Selection): ByokKeyObject[] =>
    state
      .allCredentials(namespace)
      .map(objectOf)
      .filter((o) => selected(o, sel))
      .sort((a, b) => (namespace === undefined ? String(a.metadata.namespace).localeCompare(String(b.metadata.namespace)) : 0));

  const handleList = async (req: FastifyRequest, reply: FastifyReply, namespace: string | undefined) => {
    const q = req.query as Record<string, unknown>;
    const sel = selection(q);
    if (q.watch === 'true' || q.watch === '1') return handleWatch(req, reply, namespace, sel);
    const rv = hub.currentRv();
    let items = listObjects(namespace, sel);
    const limitRaw = str(q.limit);
    const limit = limitRaw !== undefined && /^\d+$/.test(limitRaw) ? Number(limitRaw) : 0;
    let offset = 0;
    const cont = str(q.continue);
    if (cont) {
      try {
        const t = JSON.parse(Buffer.from(cont, 'base64url').toString('utf8')) as { o?: unknown };
        if (typeof t.o !== 'number' || !Number.isInteger(t.o) || t.o < 0) throw new Error('bad');
        offset = t.o;
      } catch {
        throw new StatusError(400, 'BadRequest', 'continue: invalid continue token');
      }
    }
    const total = items.length;
    items = items.slice(offset, limit > 0 ? offset + limit : undefined);
    const next = offset + items.length;
    const meta = listMeta(limit > 0 && next < total ? { continue: Buffer.from(JSON.stringify({ o: next, rv })).toString('base64url'), remainingItemCount: total - next } : {});
    const { shape, tableVersion } = responseShape(req.headers.accept);
    if (shape === 'table') {
      return reply.type(`application/json;as=Table;v=${tableVersion};g=meta.k8s.io`).send({ ...table(items, includeOf(q), meta), apiVersion: `meta.k8s.io/${tableVersion}` });
    }
    if (shape === 'partial') {
      return reply
        .type('application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io')
        .send({ kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata: meta, items: items.map((o) => ({ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata })) });
    }
    return reply.type('application/json').send({ kind: `${KIND}List`, apiVersion: AGG_GROUP_VERSION, metadata: meta, items });
  };

  const handleWatch = async (req: FastifyRequest, reply: FastifyReply, namespace: string | undefined, sel: Selection) => {
    const q = req.query as Record<string, unknown>;
    const { shape, tableVersion } = responseShape(req.headers.accept);
    const include = includeOf(q);
    const fromRv = str(q.resourceVersion);
    const timeoutRaw = str(q.timeoutSeconds);
    const timeoutMs = timeoutRaw !== undefined && /^\d+$/.test(timeoutRaw) ? Math.min(Number(timeoutRaw), 3600) * 1000 : 30 * 60 * 1000;
    let firstTable = true;
    const frame = (type: string, o: ByokKeyObject): string => {
      let object: unknown = o;
      if (shape === 'table') {
        object = { ...table([o], include, { resourceVersion: o.metadata.resourceVersion }, firstTable), apiVersion: `meta.k8s.io/${tableVersion}` };
        firstTable = false;
      } else if (shape === 'partial') object = { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
      return `${JSON.stringify({ type, object })}\n`;
    };
    const eventObject = (ev: HubEvent) => (ev.type === 'DELETED' ? toKubeObject(ev.entry, ev.rv) : objectOf(ev.entry));
    const relevant = (o: ByokKeyObject) => (namespace === undefined || o.metadata.namespace === namespace) && selected(o, sel);

    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': shape === 'table' ? `application/json;as=Table;v=${tableVersion};g=meta.k8s.io` : 'application/json',
      'cache-control': 'no-cache, private',
      'transfer-encoding': 'chunked',
    });
    const pending: HubEvent[] = [];
    let live = false;
    const write = (ev: HubEvent) => {
      if (res.writableEnded) return;
      // A client that stops reading is cut off, as the apiserver does; it re-watches from its last version.
      if (res.writableLength > MAX_WATCH_BACKLOG) {
        log.info({ namespace }, 'watch client too slow; closing its watch');
        res.end();
        return;
      }
      const o = eventObject(ev);
      if (relevant(o)) res.write(frame(ev.type, o));
    };
    let sub: { replay: HubEvent[]; stop: () => void };
    try {
      sub = hub.subscribe(q.sendInitialEvents === 'true' || fromRv === undefined || fromRv === '' || fromRv === '0' ? hub.currentRv() : fromRv, (ev) => (live ? write(ev) : pending.push(ev)));
    } catch (err) {
      if (err instanceof ExpiredError) {
        res.end(`${JSON.stringify({ type: 'ERROR', object: statusBody(410, 'Expired', err.message) })}\n`);
        return;
      }
      throw err;
    }
    const initial = q.sendInitialEvents === 'true' || fromRv === undefined || fromRv === '' || fromRv === '0';
    if (initial) {
      // No version (or a watch-list request): the current state as synthetic ADDED events, then changes.
      for (const e of state.allCredentials(namespace)) {
        const o = objectOf(e);
        if (relevant(o)) res.write(frame('ADDED', o));
      }
      if (q.sendInitialEvents === 'true') {
        // Streaming lists (client-go WatchList) wait for this bookmark to know the initial state is complete.
        const bookmark = { apiVersion: AGG_GROUP_VERSION, kind: KIND, metadata: { resourceVersion: hub.currentRv(), annotations: { 'k8s.io/initial-events-end': 'true' } } };
        res.write(`${JSON.stringify({ type: 'BOOKMARK', object: bookmark })}\n`);
      }
    } else for (const ev of sub.replay) write(ev);
    for (const ev of pending.splice(0)) write(ev);
    live = true;
    const done = () => {
      clearTimeout(timer);
      sub.stop();
      if (!res.writableEnded) res.end();
    };
    const timer = setTimeout(done, timeoutMs);
    req.raw.socket.once('close', done);
    res.once('close', done);
  };

  const readJson = (req: FastifyRequest): unknown => {
    const body = req.body;
    if (!Buffer.isBuffer(body) || body.length === 0) throw new StatusError(400, 'BadRequest', MESSAGES.emptyBody);
    try {
      return parseUntrustedJson(body);
    } catch (err) {
      if (!(err instanceof UntrustedJsonError)) throw err;
      throw new StatusError(400, 'BadRequest', err.problem.code === 'malformed' ? MESSAGES.malformedJson : err.message);
    }
  };
  const contentType = (req: FastifyRequest) => (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const requireJson = (req: FastifyRequest) => {
    const ct = contentType(req);
    if (ct !== 'application/json') throw new StatusError(415, 'UnsupportedMediaType', `the body of a ${req.method} must be application/json, not ${ct.slice(0, 100) || 'empty'}`);
  };
  const rejectDryRun = (q: Record<string, unknown>) => {
    if (q.dryRun !== undefined) throw new StatusError(400, 'BadRequest', 'dryRun is not supported for create, update or patch by this API (delete supports it): nothing was written');
  };
  /** DeleteOptions.dryRun, from the query or the body: only "All" exists (as in Kubernetes); anything else is a 400. */
  const dryRunOf = (query: unknown, body: unknown): boolean => {
    const values = [query, body].flatMap((v) => (v === undefined || v === null ? [] : Array.isArray(v) ? v : [v]));
    if (values.some((v) => v !== 'All')) throw new StatusError(400, 'BadRequest', 'dryRun must be "All" (or absent): nothing was deleted');
    return values.length > 0;
  };

  const find = (namespace: string, name: string): CredentialEntry => {
    try {
      return service.get(namespace, name);
    } catch (err) {
      if (err instanceof ApiError) throw statusFromApiError(err, name);
      throw err;
    }
  };
  const invalid = (err: unknown, name?: string): never => {
    if (err instanceof InvalidObject) {
      throw new StatusError(422, 'Invalid', `${KIND}${name ? ` "${name}"` : ''} is invalid: ${err.message}`, {
        ...(name ? { name } : {}),
        group: AGG_GROUP,
        kind: KIND,
        causes: err.causes.map((c) => ({ type: 'FieldValueInvalid', field: c.field, message: c.message })),
      });
    }
    if (err instanceof ApiError) throw statusFromApiError(err, name);
    throw err;
  };

  const applyUpdate = async (namespace: string, current: CredentialEntry, desired: unknown, precondition: string | undefined): Promise<CredentialEntry> => {
    if (precondition !== undefined && precondition !== '' && precondition !== current.obj.metadata.resourceVersion) {
      throw new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${RESOURCE}.${AGG_GROUP} "${current.key.id}": the object has been modified; please apply your changes to the latest version and try again`, {
        name: current.key.id,
        group: AGG_GROUP,
        kind: RESOURCE,
      });
    }
    let body: Record<string, unknown>;
    try {
      body = updateRequestFrom(desired, current, namespace);
    } catch (err) {
      return invalid(err, current.key.id);
    }
    try {
      return await service.update(namespace, current.key.id, body);
    } catch (err) {
      return invalid(err, current.key.id);
    }
  };

  app.get(`${AGG_PREFIX}/${RESOURCE}`, async (req, reply) => handleList(req, reply, undefined));
  app.get<{ Params: { ns: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}`, async (req, reply) => handleList(req, reply, req.params.ns));

  app.post<{ Params: { ns: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}`, async (req, reply) => {
    const q = req.query as Record<string, unknown>;
    rejectDryRun(q);
    requireJson(req);
    const raw = readJson(req);
    let created: CredentialEntry;
    try {
      const { body, sortOrder } = createRequestFrom(raw, req.params.ns);
      // Checked before anything is written, so a bad sortOrder refuses the whole create.
      if (sortOrder !== undefined && (typeof sortOrder !== 'number' || !Number.isInteger(sortOrder) || sortOrder < 0 || sortOrder > 1_000_000)) {
        throw new InvalidObject([{ field: 'spec.sortOrder', message: 'must be an integer between 0 and 1000000' }]);
      }
      created = await service.create(req.params.ns, body);
      if (typeof sortOrder === 'number' && sortOrder !== created.key.sort_order) created = await service.update(req.params.ns, created.key.id, { sort_order: sortOrder });
    } catch (err) {
      return invalid(err);
    }
    return sendObject(req, reply, 201, toKubeObject(created));
  });

  app.get<{ Params: { ns: string; name: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}/:name`, async (req, reply) => sendObject(req, reply, 200, toKubeObject(find(req.params.ns, req.params.name))));

  app.put<{ Params: { ns: string; name: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}/:name`, async (req, reply) => {
    rejectDryRun(req.query as Record<string, unknown>);
    requireJson(req);
    const desired = readJson(req);
    const current = find(req.params.ns, req.params.name);
    const rv = (desired as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
    const updated = await applyUpdate(req.params.ns, current, desired, typeof rv === 'string' ? rv : undefined);
    return sendObject(req, reply, 200, toKubeObject(updated));
  });

  app.patch<{ Params: { ns: string; name: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}/:name`, async (req, reply) => {
    rejectDryRun(req.query as Record<string, unknown>);
    const ct = contentType(req);
    const current = find(req.params.ns, req.params.name);
    const base = toKubeObject(current);
    let desired: unknown;
    try {
      switch (ct) {
        case 'application/merge-patch+json':
          desired = mergePatch(base, readJson(req));
          break;
        case 'application/json-patch+json':
          desired = jsonPatch(base, readJson(req));
          break;
        case 'application/apply-patch+yaml': {
          // Server-side apply without field ownership: the applied fields are merged onto the stored object.
          let applied: unknown;
          const text = Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '';
          if (exceedsDepth(text, MAX_JSON_DEPTH)) throw new StatusError(400, 'BadRequest', `the apply body nests deeper than ${MAX_JSON_DEPTH} levels`);
          try {
            applied = parseYaml(text);
          } catch {
            throw new StatusError(400, 'BadRequest', 'the apply body is not valid YAML');
          }
          desired = mergePatch(base, applied);
          break;
        }
        default:
          throw new StatusError(
            415,
            'UnsupportedMediaType',
            `the patch type ${ct.slice(0, 100) || '(none)'} is not supported: use application/merge-patch+json (kubectl patch --type=merge), application/json-patch+json (--type=json) or server-side apply`,
          );
      }
    } catch (err) {
      if (err instanceof PatchError) throw new StatusError(422, 'Invalid', `${KIND} "${current.key.id}" is invalid: ${err.message}`, { name: current.key.id, group: AGG_GROUP, kind: KIND });
      throw err;
    }
    const rv = (desired as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
    const precondition = typeof rv === 'string' && rv !== base.metadata.resourceVersion ? rv : undefined;
    const updated = await applyUpdate(req.params.ns, current, desired, precondition);
    return sendObject(req, reply, 200, toKubeObject(updated));
  });

  app.delete<{ Params: { ns: string; name: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}/:name`, async (req, reply) => {
    const current = find(req.params.ns, req.params.name);
    const body = Buffer.isBuffer(req.body) && req.body.length > 0 ? (readJson(req) as { preconditions?: { uid?: unknown; resourceVersion?: unknown }; dryRun?: unknown } | null) : undefined;
    // kubectl sends DeleteOptions in the body (`dryRun: ["All"]` for --dry-run=server); the query form is accepted too.
    const dryRun = dryRunOf((req.query as Record<string, unknown>).dryRun, body?.dryRun);
    const pre = body?.preconditions;
    if ((typeof pre?.uid === 'string' && pre.uid !== (current.obj.metadata.uid ?? current.key.id)) || (typeof pre?.resourceVersion === 'string' && pre.resourceVersion !== current.obj.metadata.resourceVersion)) {
      throw new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${RESOURCE}.${AGG_GROUP} "${current.key.id}": the precondition does not match the stored object`, {
        name: current.key.id,
        group: AGG_GROUP,
        kind: RESOURCE,
      });
    }
    // A dry run answers what the delete would answer, after the same checks, and writes nothing.
    if (!dryRun) {
      try {
        await service.delete(req.params.ns, current.key.id);
      } catch (err) {
        return invalid(err, current.key.id);
      }
    }
    return reply.type('application/json').send({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name: current.key.id, group: AGG_GROUP, kind: RESOURCE, uid: current.obj.metadata.uid } });
  });

  // ---- the OpenRouter-shaped surface under the group, for in-cluster clients with Kubernetes identities ----
  const restJson = (req: FastifyRequest): unknown => {
    const ct = contentType(req);
    if (ct !== 'application/json') throw new ApiError(415, MESSAGES.unsupportedMediaType);
    const body = req.body;
    if (!Buffer.isBuffer(body) || body.toString('utf8').trim() === '') throw new ApiError(400, MESSAGES.emptyBody);
    try {
      return parseUntrustedJson(body);
    } catch (err) {
      if (!(err instanceof UntrustedJsonError)) throw err;
      throw new ApiError(400, err.problem.code === 'malformed' ? MESSAGES.malformedJson : err.message);
    }
  };
  const restReply = (reply: FastifyReply, status: number, body: string | Buffer) => reply.code(status).type('application/json; charset=utf-8').send(body);
  const single = (e: CredentialEntry): Buffer => (e.single ??= Buffer.from(`{"data":${e.json}}`));
  const REST = `${AGG_PREFIX}/namespaces/:ns/byok`;
  app.get<{ Params: { ns: string } }>(REST, async (req, reply) => restReply(reply, 200, service.list(req.params.ns, req.query)));
  app.post<{ Params: { ns: string } }>(REST, async (req, reply) => restReply(reply, 201, single(await service.create(req.params.ns, restJson(req)))));
  app.get<{ Params: { ns: string; name: string } }>(`${REST}/:name`, async (req, reply) => restReply(reply, 200, single(service.get(req.params.ns, req.params.name))));
  app.patch<{ Params: { ns: string; name: string } }>(`${REST}/:name`, async (req, reply) => restReply(reply, 200, single(await service.update(req.params.ns, req.params.name, restJson(req)))));
  app.delete<{ Params: { ns: string; name: string } }>(`${REST}/:name`, async (req, reply) => {
    await service.delete(req.params.ns, req.params.name);
    return restReply(reply, 200, '{"deleted":true}');
  });

  let address: string;
  try {
    address = await app.listen({ host: opts.host ?? '127.0.0.1', port: opts.port ?? 0 });
  } catch (err) {
    if (refresh) clearInterval(refresh);
    hub.close();
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
      hub.close();
      // Open watches would hold close() forever.
      app.server.closeAllConnections?.();
      await app.close();
    },
  };
}
