// The read verbs, generic over a resource: get, list (label and field selectors, limit and continue) and watch
// (newline-delimited events, resumable from a resourceVersion, as a Table or metadata when asked).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isWatch } from '../access.ts';
import { AGG_GROUP_VERSION } from '../group.ts';
import { responseShape, str } from '../request.ts';
import { statusBody } from '../status.ts';
import { ExpiredError, type HubEvent } from '../watch.ts';
import type { ResourceContext } from './context.ts';
import { compareCursor, decodeCursor, encodeCursor } from './cursor.ts';
import type { KubeObject } from './resource.ts';
import { includeOf, partialObject, sendList, sendObject, table, tableType } from './respond.ts';
import { type Selection, selectionOf } from './selection.ts';

/** A watch client that has not read this much is cut off, as the apiserver does; it re-watches from its last version. */
const MAX_WATCH_BACKLOG = 8 * 1024 * 1024;

export async function handleGet<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  req: FastifyRequest<{ Params: { ns: string; name: string } }>,
  reply: FastifyReply,
) {
  return sendObject(
    ctx.resource.table,
    req,
    reply,
    200,
    ctx.resource.strategy.toObject(ctx.find(req.params.ns, req.params.name)),
  );
}

/** list, or watch when the query asks for it (the same URL). */
export async function handleList<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  req: FastifyRequest,
  reply: FastifyReply,
  namespace: string | undefined,
) {
  const { strategy, table: convertor, names } = ctx.resource;
  const q = req.query as Record<string, unknown>;
  const sel = selectionOf(q, strategy.selectableFields);
  if (isWatch(q)) return handleWatch(ctx, req, reply, namespace, sel);
  let entries = ctx.listEntries(namespace, sel);
  const limitRaw = str(q.limit);
  const limit = limitRaw !== undefined && /^\d+$/.test(limitRaw) ? Number(limitRaw) : 0;
  const cont = str(q.continue);
  if (cont) {
    // A cursor, not an offset: objects created or deleted between pages never shift the next page, so no object
    // is listed twice or skipped for that reason.
    const after = decodeCursor(cont, strategy.listOrder.types);
    const start = entries.findIndex((e) => compareCursor(strategy.listOrder.key(e), after) > 0);
    entries = start < 0 ? [] : entries.slice(start);
  }
  const total = entries.length;
  const page = limit > 0 ? entries.slice(0, limit) : entries;
  const last = page.at(-1);
  const meta = ctx.listMeta(
    last !== undefined && page.length < total
      ? { continue: encodeCursor(strategy.listOrder.key(last)), remainingItemCount: total - page.length }
      : {},
  );
  return sendList(convertor, `${names.kind}List`, AGG_GROUP_VERSION, req, reply, meta, page.map(ctx.objectOf));
}

/** Where a watch starts: the current state as ADDED events (no version, or a watch-list request), else a replay. */
const startsWithState = (q: Record<string, unknown>, fromRv: string | undefined) =>
  q.sendInitialEvents === 'true' || fromRv === undefined || fromRv === '' || fromRv === '0';

async function handleWatch<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  req: FastifyRequest,
  reply: FastifyReply,
  namespace: string | undefined,
  sel: Selection,
) {
  const { strategy, table: convertor, names, storage } = ctx.resource;
  const hub = ctx.hub();
  const q = req.query as Record<string, unknown>;
  const { shape, tableVersion } = responseShape(req.headers.accept);
  const include = includeOf(q);
  const fromRv = str(q.resourceVersion);
  const timeoutRaw = str(q.timeoutSeconds);
  const timeoutMs =
    timeoutRaw !== undefined && /^\d+$/.test(timeoutRaw) ? Math.min(Number(timeoutRaw), 3600) * 1000 : 30 * 60 * 1000;
  let firstTable = true;
  const frame = (type: string, o: O): string => {
    let object: unknown = o;
    if (shape === 'table') {
      object = {
        ...table(convertor, [o], include, { resourceVersion: o.metadata.resourceVersion }, firstTable),
        apiVersion: `meta.k8s.io/${tableVersion}`,
      };
      firstTable = false;
    } else if (shape === 'partial') object = partialObject(o);
    return `${JSON.stringify({ type, object })}\n`;
  };
  const eventObject = (ev: HubEvent<E>) =>
    ev.type === 'DELETED' ? strategy.toObject(ev.entry, ev.rv) : ctx.objectOf(ev.entry);
  const relevant = (o: O) => (namespace === undefined || o.metadata.namespace === namespace) && ctx.selected(o, sel);

  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': shape === 'table' ? tableType(tableVersion) : 'application/json',
    'cache-control': 'no-cache, private',
    'transfer-encoding': 'chunked',
  });
  // Answer the watch at once, as the kube-apiserver does: a client sees its watch established before any event.
  res.flushHeaders();
  const pending: HubEvent<E>[] = [];
  let live = false;
  const write = (ev: HubEvent<E>) => {
    if (res.writableEnded) return;
    if (res.writableLength > MAX_WATCH_BACKLOG) {
      ctx.log.info({ namespace }, 'watch client too slow; closing its watch');
      res.end();
      return;
    }
    const o = eventObject(ev);
    if (relevant(o)) res.write(frame(ev.type, o));
  };
  const initial = startsWithState(q, fromRv);
  let sub: { replay: HubEvent<E>[]; stop: () => void };
  try {
    sub = hub.subscribe(initial ? hub.currentRv() : (fromRv as string), (ev) => (live ? write(ev) : pending.push(ev)));
  } catch (err) {
    if (err instanceof ExpiredError) {
      res.end(`${JSON.stringify({ type: 'ERROR', object: statusBody(410, 'Expired', err.message) })}\n`);
      return;
    }
    throw err;
  }
  if (initial) {
    for (const e of storage.list(namespace)) {
      const o = ctx.objectOf(e);
      if (relevant(o)) res.write(frame('ADDED', o));
    }
    if (q.sendInitialEvents === 'true') {
      // Streaming lists (client-go WatchList) wait for this bookmark to know the initial state is complete.
      const bookmark = {
        apiVersion: AGG_GROUP_VERSION,
        kind: names.kind,
        metadata: { resourceVersion: hub.currentRv(), annotations: { 'k8s.io/initial-events-end': 'true' } },
      };
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
}
