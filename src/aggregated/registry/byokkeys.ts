// The storage of one resource, byokkeys (api.byok.gateway.dev/v1), laid out as kubernetes/sample-apiserver lays out
// registry/<group>/<resource>: list (with cursor paging) and watch, create, get, update, three patch types, delete
// and deletecollection, all over ByokService and its read model. Authentication and authorization happened in the
// filter chain (../server.ts) before any handler here runs.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { ApiError } from '../../service/errors.ts';
import { compareKeys, MANAGED_BY_API, MANAGED_BY_LABEL, type KeyOrder } from '../../service/mapping.ts';
import type { ByokService } from '../../service/service.ts';
import type { ApiState, CredentialEntry } from '../../service/state.ts';
import { isWatch, resourceAccess } from '../access.ts';
import type { DiscoveredResource } from '../discovery.ts';
import { jsonPatch, mergePatch, PatchError } from '../patch.ts';
import { contentType, dryRunOf, readJson, requireJson, responseShape, str } from '../request.ts';
import {
  AGG_GROUP,
  AGG_GROUP_VERSION,
  AGG_PREFIX,
  CATEGORIES,
  createRequestFrom,
  fieldValues,
  InvalidObject,
  KIND,
  matches,
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
} from '../resource.ts';
import { statusBody, StatusError, statusFromApiError } from '../status.ts';
import { ExpiredError, WatchHub, type HubEvent } from '../watch.ts';

export const byokKeysResource: DiscoveredResource = { name: RESOURCE, singularName: SINGULAR, kind: KIND, namespaced: true, verbs: VERBS, shortNames: SHORT_NAMES, categories: CATEGORIES };

const MAX_WATCH_BACKLOG = 8 * 1024 * 1024;
/** A continue token is a few fields of one object; anything longer is not one of ours. */
const MAX_CONTINUE_LENGTH = 1024;
/** Deletes a collection delete runs at once: enough to be quick, few enough not to crowd out other writes. */
const DELETE_CONCURRENCY = 4;

/**
 * Server-side apply is refused rather than half done: this door keeps no managedFields, so it could not tell one
 * manager's fields from another's, and GitOps tools that rely on field ownership (Flux always applies server-side)
 * would silently fight. The answer says where GitOps belongs.
 */
export const APPLY_UNSUPPORTED =
  'server-side apply is not supported for byokkeys.api.byok.gateway.dev: this API records no field ownership (managedFields). ' +
  'For GitOps, apply BYOKCredential resources (byok.gateway.dev/v1alpha1) and their Secrets instead; ' +
  'to change a BYOKKey, use kubectl apply without --server-side, kubectl patch or kubectl edit';

export interface ByokKeysDeps {
  service: ByokService;
  state: ApiState;
  log: Logger;
}

interface Selection {
  labels: Requirement[];
  fields: Requirement[];
}

/** Where the next page starts: just after this object in list order (namespace, then the REST list order). */
export interface Cursor extends KeyOrder {
  namespace: string;
}

const cursorOf = (e: CredentialEntry): Cursor => ({
  namespace: e.namespace,
  provider: e.key.provider,
  is_fallback: e.key.is_fallback,
  sort_order: e.key.sort_order,
  created_at: e.key.created_at,
  id: e.key.id,
});

const compareCursor = (a: Cursor, b: Cursor): number => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : compareKeys(a, b));

export const encodeCursor = (c: Cursor): string => Buffer.from(JSON.stringify([1, c.namespace, c.provider, c.is_fallback, c.sort_order, c.created_at, c.id])).toString('base64url');

/** The cursor in a continue token, or a 400: the token is client input, so every field is checked. */
export function decodeCursor(token: string): Cursor {
  try {
    if (token.length > MAX_CONTINUE_LENGTH) throw new Error('too long');
    const t: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (!Array.isArray(t) || t.length !== 7 || t[0] !== 1) throw new Error('shape');
    const [, namespace, provider, fallback, sortOrder, createdAt, id] = t as unknown[];
    if (typeof namespace !== 'string' || typeof provider !== 'string' || typeof fallback !== 'boolean' || typeof createdAt !== 'string' || typeof id !== 'string') throw new Error('types');
    if (typeof sortOrder !== 'number' || !Number.isSafeInteger(sortOrder)) throw new Error('sort order');
    return { namespace, provider, is_fallback: fallback, sort_order: sortOrder, created_at: createdAt, id };
  } catch {
    throw new StatusError(400, 'BadRequest', 'continue: invalid continue token');
  }
}

/** Routes of byokkeys on the app. close() ends the watch hub (open watches are closed with the server). */
export function registerByokKeys(app: FastifyInstance, deps: ByokKeysDeps): { close(): void } {
  const { service, state, log } = deps;
  const hub = new WatchHub(state);
  const declared = resourceAccess(RESOURCE);

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

  /** The selected entries in list order: by namespace, then as the REST door lists them (the order routing tries them in). */
  const listEntries = (namespace: string | undefined, sel: Selection): CredentialEntry[] => {
    const entries = state.allCredentials(namespace).filter((e) => selected(objectOf(e), sel));
    return namespace === undefined ? entries.sort((x, y) => compareCursor(cursorOf(x), cursorOf(y))) : entries;
  };

  const handleList = async (req: FastifyRequest, reply: FastifyReply, namespace: string | undefined) => {
    const q = req.query as Record<string, unknown>;
    const sel = selection(q);
    if (isWatch(q)) return handleWatch(req, reply, namespace, sel);
    let entries = listEntries(namespace, sel);
    const limitRaw = str(q.limit);
    const limit = limitRaw !== undefined && /^\d+$/.test(limitRaw) ? Number(limitRaw) : 0;
    const cont = str(q.continue);
    if (cont) {
      // A cursor, not an offset: objects created or deleted between pages never shift the next page, so no object
      // is listed twice or skipped for that reason.
      const after = decodeCursor(cont);
      const start = entries.findIndex((e) => compareCursor(cursorOf(e), after) > 0);
      entries = start < 0 ? [] : entries.slice(start);
    }
    const total = entries.length;
    const page = limit > 0 ? entries.slice(0, limit) : entries;
    const last = page.at(-1);
    const meta = listMeta(last !== undefined && page.length < total ? { continue: encodeCursor(cursorOf(last)), remainingItemCount: total - page.length } : {});
    const items = page.map(objectOf);
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

  const rejectDryRun = (q: Record<string, unknown>) => {
    if (q.dryRun !== undefined) throw new StatusError(400, 'BadRequest', 'dryRun is not supported for create, update or patch by this API (delete supports it): nothing was written');
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

  type DeleteOptions = { preconditions?: { uid?: unknown; resourceVersion?: unknown }; dryRun?: unknown } | null;
  /** DeleteOptions from the body (kubectl sends them there; `dryRun: ["All"]` for --dry-run=server), if any. */
  const deleteOptionsOf = (req: FastifyRequest): DeleteOptions | undefined => (Buffer.isBuffer(req.body) && req.body.length > 0 ? (readJson(req) as DeleteOptions) : undefined);
  /** The same 409 the apiserver gives when DeleteOptions.preconditions do not match the stored object. */
  const checkPreconditions = (current: CredentialEntry, options: DeleteOptions | undefined) => {
    const pre = options?.preconditions;
    if ((typeof pre?.uid === 'string' && pre.uid !== (current.obj.metadata.uid ?? current.key.id)) || (typeof pre?.resourceVersion === 'string' && pre.resourceVersion !== current.obj.metadata.resourceVersion)) {
      throw new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${RESOURCE}.${AGG_GROUP} "${current.key.id}": the precondition does not match the stored object`, {
        name: current.key.id,
        group: AGG_GROUP,
        kind: RESOURCE,
      });
    }
  };

  app.get(`${AGG_PREFIX}/${RESOURCE}`, declared, async (req, reply) => handleList(req, reply, undefined));
  app.get<{ Params: { ns: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}`, declared, async (req, reply) => handleList(req, reply, req.params.ns));

  app.post<{ Params: { ns: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}`, declared, async (req, reply) => {
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

  app.get<{ Params: { ns: string; name: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}/:name`, declared, async (req, reply) => sendObject(req, reply, 200, toKubeObject(find(req.params.ns, req.params.name))));

  app.put<{ Params: { ns: string; name: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}/:name`, declared, async (req, reply) => {
    rejectDryRun(req.query as Record<string, unknown>);
    requireJson(req);
    const desired = readJson(req);
    const current = find(req.params.ns, req.params.name);
    const rv = (desired as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
    const updated = await applyUpdate(req.params.ns, current, desired, typeof rv === 'string' ? rv : undefined);
    return sendObject(req, reply, 200, toKubeObject(updated));
  });

  app.patch<{ Params: { ns: string; name: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}/:name`, declared, async (req, reply) => {
    rejectDryRun(req.query as Record<string, unknown>);
    const ct = contentType(req);
    // Before the lookup: apply would create a missing object, so it gets the same answer whether or not one exists.
    if (ct === 'application/apply-patch+yaml') throw new StatusError(415, 'UnsupportedMediaType', APPLY_UNSUPPORTED, { name: req.params.name, group: AGG_GROUP, kind: RESOURCE });
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
        default:
          throw new StatusError(
            415,
            'UnsupportedMediaType',
            `the patch type ${ct.slice(0, 100) || '(none)'} is not supported: use application/merge-patch+json (kubectl patch --type=merge) or application/json-patch+json (--type=json)`,
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

  app.delete<{ Params: { ns: string; name: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}/:name`, declared, async (req, reply) => {
    const current = find(req.params.ns, req.params.name);
    const options = deleteOptionsOf(req);
    // The query form of dryRun is accepted too.
    const dryRun = dryRunOf((req.query as Record<string, unknown>).dryRun, options?.dryRun);
    checkPreconditions(current, options);
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

  // deletecollection: what the namespace controller and client-go's DeleteCollection call. The selected objects
  // all pass the single delete's checks (preconditions, this API may delete them) before the first is removed, so
  // a refused request removes nothing; a dry run stops after the checks. The answer is the list of deleted objects.
  app.delete<{ Params: { ns: string } }>(`${AGG_PREFIX}/namespaces/:ns/${RESOURCE}`, declared, async (req, reply) => {
    const namespace = req.params.ns;
    const q = req.query as Record<string, unknown>;
    const sel = selection(q);
    const options = deleteOptionsOf(req);
    const dryRun = dryRunOf(q.dryRun, options?.dryRun);
    const targets = listEntries(namespace, sel);
    const refused: string[] = [];
    for (const e of targets) {
      checkPreconditions(e, options);
      try {
        service.deletable(namespace, e.key.id);
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 409)) return invalid(err, e.key.id);
        refused.push(e.key.id);
      }
    }
    if (refused.length > 0) {
      throw new StatusError(
        409,
        'Conflict',
        `${refused.length} of the ${targets.length} selected ${RESOURCE} in the namespace "${namespace}" are managed by Git and cannot be deleted through this API: nothing was deleted. ` +
          `Remove them from Git, or select only the API's own with -l ${MANAGED_BY_LABEL}=${MANAGED_BY_API}`,
        { group: AGG_GROUP, kind: RESOURCE, causes: refused.slice(0, 20).map((id) => ({ type: 'FieldValueForbidden', field: 'metadata.name', message: `${id}: managed by Git` })) },
      );
    }
    const deleted = targets.map((e) => toKubeObject(e));
    if (!dryRun) {
      const queue = [...targets];
      const worker = async () => {
        for (let e = queue.shift(); e !== undefined; e = queue.shift()) {
          try {
            await service.delete(namespace, e.key.id);
          } catch (err) {
            // Deleted by someone else meanwhile: the outcome asked for.
            if (err instanceof ApiError && err.status === 404) continue;
            queue.length = 0;
            throw err;
          }
        }
      };
      const results = await Promise.allSettled(Array.from({ length: Math.min(DELETE_CONCURRENCY, targets.length) }, worker));
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) return invalid(failed.reason);
      log.info({ namespace, deleted: targets.length }, 'deleted a collection of byokkeys');
    }
    return reply.type('application/json').send({ kind: `${KIND}List`, apiVersion: AGG_GROUP_VERSION, metadata: listMeta(), items: deleted });
  });

  return { close: () => hub.close() };
}
