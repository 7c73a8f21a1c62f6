// The verbs generic over a resource (src/aggregated/handlers/), apart from any apiserver, as sample-apiserver tests
// its registry apart from etcd: a small resource ("widgets") over an in-memory storage, installed on a fastify app
// the way the aggregated server installs byokkeys, and driven with fastify.inject. Whatever these tests find is the
// handlers' doing, not a cache's or the apiserver's.
import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { pino } from 'pino';
import { AGG_GROUP, AGG_GROUP_VERSION, AGG_PREFIX } from '../../../src/aggregated/group.ts';
import { installResource } from '../../../src/aggregated/handlers/install.ts';
import type { Change, KubeObject, ServedResource, Storage } from '../../../src/aggregated/handlers/resource.ts';
import { InvalidObject, StatusError, statusBody } from '../../../src/aggregated/status.ts';

interface Widget {
  namespace: string;
  name: string;
  rv: string;
  color: string;
  labels: Record<string, string>;
  /** A widget this API may not delete (as byokkeys refuses credentials managed by Git). */
  pinned: boolean;
}
interface WidgetObject extends KubeObject {
  spec: { color: string; pinned: boolean };
}

const target = {
  group: AGG_GROUP,
  resource: 'widgets',
  kind: 'Widget',
  fieldOf: (f: string) => f,
  messageOf: (m: string) => m,
};

/** The in-memory storage: entries replaced on every change (never mutated), one counter for versions. */
class MemoryStorage implements Storage<Widget> {
  private readonly items = new Map<string, Widget>();
  private readonly listeners = new Set<(c: Change<Widget>) => void>();
  private rv = 0;
  writes = 0;

  readonly changes = {
    entries: () => [...this.items.values()],
    rvOf: (w: Widget) => w.rv,
    subscribe: (l: (c: Change<Widget>) => void) => {
      this.listeners.add(l);
      return () => void this.listeners.delete(l);
    },
  };

  private emit(type: Change<Widget>['type'], entry: Widget): void {
    for (const l of this.listeners) l({ type, entry, rv: entry.rv });
  }

  private valid(namespace: string, name: string, object: unknown): Widget {
    const o = object as {
      metadata?: { labels?: Record<string, string> };
      spec?: { color?: unknown; pinned?: unknown };
    } | null;
    const color = o?.spec?.color;
    if (typeof color !== 'string' || color === '')
      throw new InvalidObject([{ field: 'spec.color', message: 'Required value' }]);
    return {
      namespace,
      name,
      rv: String(++this.rv),
      color,
      labels: { ...o?.metadata?.labels },
      pinned: o?.spec?.pinned === true,
    };
  }

  list(namespace: string | undefined): Widget[] {
    return [...this.items.values()]
      .filter((w) => namespace === undefined || w.namespace === namespace)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
  get(namespace: string, name: string): Widget {
    const w = this.items.get(`${namespace}/${name}`);
    if (!w)
      throw new StatusError(404, 'NotFound', `widgets.${AGG_GROUP} "${name}" not found`, {
        name,
        group: AGG_GROUP,
        kind: 'widgets',
      });
    return w;
  }
  nameOf(w: Widget): string {
    return w.name;
  }
  async create(namespace: string, object: unknown): Promise<Widget> {
    const meta = (object as { metadata?: { name?: unknown; generateName?: unknown } } | null)?.metadata;
    const name = typeof meta?.name === 'string' ? meta.name : `${String(meta?.generateName ?? 'w-')}${this.rv + 1}`;
    if (this.items.has(`${namespace}/${name}`))
      throw new StatusError(409, 'AlreadyExists', `widgets.${AGG_GROUP} "${name}" already exists`);
    const w = this.valid(namespace, name, object);
    this.items.set(`${namespace}/${name}`, w);
    this.writes++;
    this.emit('ADDED', w);
    return w;
  }
  async update(namespace: string, current: Widget, desired: unknown): Promise<Widget> {
    const w = this.valid(namespace, current.name, desired);
    this.items.set(`${namespace}/${current.name}`, w);
    this.writes++;
    this.emit('MODIFIED', w);
    return w;
  }
  async delete(namespace: string, current: Widget): Promise<void> {
    this.items.delete(`${namespace}/${current.name}`);
    this.writes++;
    this.emit('DELETED', { ...current, rv: String(++this.rv) });
  }
  refusesDelete(_namespace: string, w: Widget): string | undefined {
    return w.pinned ? 'pinned' : undefined;
  }
}

function widgets(storage: MemoryStorage): ServedResource<Widget, WidgetObject> {
  return {
    names: {
      name: 'widgets',
      singularName: 'widget',
      kind: 'Widget',
      namespaced: true,
      verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'],
      shortNames: [],
      categories: [],
    },
    openapi: { definitions: () => ({}), paths: () => ({}) },
    errors: target,
    applyRefusal: 'server-side apply is not supported for widgets',
    storage,
    table: {
      columns: [
        { name: 'Name', type: 'string', format: 'name', description: 'name', priority: 0 },
        { name: 'Color', type: 'string', format: '', description: 'color', priority: 0 },
      ],
      cells: (o) => [o.metadata.name, o.spec.color],
    },
    strategy: {
      toObject: (w, rv) => ({
        apiVersion: AGG_GROUP_VERSION,
        kind: 'Widget',
        metadata: { name: w.name, namespace: w.namespace, resourceVersion: rv ?? w.rv, labels: w.labels },
        spec: { color: w.color, pinned: w.pinned },
      }),
      selectableFields: ['metadata.name', 'metadata.namespace', 'spec.color'],
      fieldValues: (o) => ({
        'metadata.name': o.metadata.name,
        'metadata.namespace': o.metadata.namespace,
        'spec.color': o.spec.color,
      }),
      listOrder: { types: ['string', 'string'], key: (w) => [w.namespace, w.name] },
      errors: target,
      collectionRefused: (namespace, refused, total) =>
        new StatusError(
          409,
          'Conflict',
          `${refused.length} of ${total} widgets in ${namespace} may not be deleted here (${refused.join(', ')}): nothing was deleted`,
        ),
    },
  };
}

const ns = (n: string) => `${AGG_PREFIX}/namespaces/${n}/widgets`;

describe('generic verbs over an in-memory storage', () => {
  let app: FastifyInstance;
  let storage: MemoryStorage;
  let synced: boolean;
  let closeResource: () => void;

  beforeEach(async () => {
    storage = new MemoryStorage();
    synced = true;
    app = Fastify();
    // As the aggregated server does: bodies raw, Status errors as Status objects.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    app.setErrorHandler((err: unknown, _req, reply: FastifyReply) => {
      if (err instanceof StatusError)
        return reply
          .code(err.code)
          .type('application/json')
          .send(statusBody(err.code, err.reason, err.message, err.details));
      return reply.code(500).send({ unexpected: String(err) });
    });
    ({ close: closeResource } = installResource(app, widgets(storage), {
      log: pino({ level: 'silent' }),
      ready: () => synced,
      whenSynced: async () => undefined,
    }));
    await app.ready();
  });
  afterEach(async () => {
    closeResource();
    await app.close();
  });

  const send = (
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
    contentType = 'application/json',
    headers: Record<string, string> = {},
  ) =>
    app.inject({
      method,
      url,
      headers: { ...(body !== undefined ? { 'content-type': contentType } : {}), ...headers },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
  const widget = (name: string, color: string, extra: { labels?: Record<string, string>; pinned?: boolean } = {}) => ({
    apiVersion: AGG_GROUP_VERSION,
    kind: 'Widget',
    metadata: { name, ...(extra.labels ? { labels: extra.labels } : {}) },
    spec: { color, ...(extra.pinned ? { pinned: true } : {}) },
  });

  test('create 201, get 200, a missing object 404 as a Status naming the resource', async () => {
    const created = await send('POST', ns('a'), widget('w1', 'red'));
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({
      kind: 'Widget',
      metadata: { name: 'w1', namespace: 'a', resourceVersion: '1' },
      spec: { color: 'red' },
    });
    expect((await send('GET', `${ns('a')}/w1`)).json()).toMatchObject({ spec: { color: 'red' } });
    const missing = await send('GET', `${ns('a')}/nope`);
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 });
  });

  test('an invalid object is 422 Invalid with the field cause, and nothing is written', async () => {
    const r = await send('POST', ns('a'), widget('w1', ''));
    expect(r.statusCode).toBe(422);
    expect(r.json()).toMatchObject({
      reason: 'Invalid',
      details: { kind: 'Widget', causes: [{ type: 'FieldValueInvalid', field: 'spec.color' }] },
    });
    expect(storage.writes).toBe(0);
  });

  test('a dry run of a write is 400 and writes nothing; a body that is not JSON is refused before the storage', async () => {
    expect((await send('POST', `${ns('a')}?dryRun=All`, widget('w1', 'red'))).statusCode).toBe(400);
    const notJson = await app.inject({
      method: 'POST',
      url: ns('a'),
      headers: { 'content-type': 'application/json' },
      payload: '{"metadata":',
    });
    expect(notJson.statusCode).toBe(400);
    expect(storage.writes).toBe(0);
  });

  test('list: selectors by label and field, in list order; limit and continue walk the rest without repeats', async () => {
    for (const [name, color, team] of [
      ['c', 'red', 'x'],
      ['a', 'blue', 'y'],
      ['b', 'red', 'y'],
      ['d', 'green', 'x'],
    ] as const) {
      expect((await send('POST', ns('a'), widget(name, color, { labels: { team } }))).statusCode).toBe(201);
    }
    const names = (r: { json(): unknown }) => (r.json() as { items: WidgetObject[] }).items.map((o) => o.metadata.name);
    expect(names(await send('GET', ns('a')))).toEqual(['a', 'b', 'c', 'd']);
    expect(names(await send('GET', `${ns('a')}?labelSelector=team%3Dx`))).toEqual(['c', 'd']);
    expect(names(await send('GET', `${ns('a')}?fieldSelector=spec.color%3Dred`))).toEqual(['b', 'c']);
    const first = (await send('GET', `${ns('a')}?limit=3`)).json() as {
      items: WidgetObject[];
      metadata: { continue: string; remainingItemCount: number };
    };
    expect(first.items.map((o) => o.metadata.name)).toEqual(['a', 'b', 'c']);
    expect(first.metadata.remainingItemCount).toBe(1);
    // An entry created before the next page that sorts before the cursor is not served twice or out of order.
    await send('POST', ns('a'), widget('aa', 'red'));
    expect(
      names(await send('GET', `${ns('a')}?limit=3&continue=${encodeURIComponent(first.metadata.continue)}`)),
    ).toEqual(['d']);
    expect((await send('GET', `${ns('a')}?continue=not-a-token`)).statusCode).toBe(400);
  });

  test('update with a stale resourceVersion is 409 Conflict and writes nothing; the current one succeeds', async () => {
    await send('POST', ns('a'), widget('w1', 'red'));
    const stale = { ...widget('w1', 'blue'), metadata: { name: 'w1', resourceVersion: '999' } };
    const conflict = await send('PUT', `${ns('a')}/w1`, stale);
    expect(conflict.statusCode).toBe(409);
    expect(conflict.json()).toMatchObject({ reason: 'Conflict', details: { name: 'w1' } });
    expect(storage.writes).toBe(1);
    const ok = await send('PUT', `${ns('a')}/w1`, {
      ...widget('w1', 'blue'),
      metadata: { name: 'w1', resourceVersion: '1' },
    });
    expect(ok.json()).toMatchObject({ spec: { color: 'blue' }, metadata: { resourceVersion: '2' } });
  });

  test('patch: merge and JSON patch on the current object; a failing JSON patch is 422; apply and strategic merge are 415', async () => {
    await send('POST', ns('a'), widget('w1', 'red', { labels: { team: 'x' } }));
    expect(
      (await send('PATCH', `${ns('a')}/w1`, { spec: { color: 'green' } }, 'application/merge-patch+json')).json(),
    ).toMatchObject({ spec: { color: 'green' }, metadata: { labels: { team: 'x' } } });
    expect(
      (
        await send(
          'PATCH',
          `${ns('a')}/w1`,
          [{ op: 'replace', path: '/spec/color', value: 'blue' }],
          'application/json-patch+json',
        )
      ).json(),
    ).toMatchObject({ spec: { color: 'blue' } });
    const failing = await send(
      'PATCH',
      `${ns('a')}/w1`,
      [{ op: 'test', path: '/spec/color', value: 'red' }],
      'application/json-patch+json',
    );
    expect(failing.statusCode).toBe(422);
    expect((await send('PATCH', `${ns('a')}/w1`, {}, 'application/apply-patch+yaml')).json()).toMatchObject({
      code: 415,
      message: 'server-side apply is not supported for widgets',
    });
    expect((await send('PATCH', `${ns('a')}/w1`, {}, 'application/strategic-merge-patch+json')).statusCode).toBe(415);
    // Apply is refused before the lookup: a missing object gets the same answer.
    expect((await send('PATCH', `${ns('a')}/missing`, {}, 'application/apply-patch+yaml')).statusCode).toBe(415);
    expect((await send('GET', `${ns('a')}/w1`)).json()).toMatchObject({ spec: { color: 'blue' } });
  });

  test('delete answers a Success Status; a dry run deletes nothing', async () => {
    await send('POST', ns('a'), widget('w1', 'red'));
    const dry = await send('DELETE', `${ns('a')}/w1?dryRun=All`);
    expect(dry.json()).toMatchObject({ kind: 'Status', status: 'Success', details: { name: 'w1' } });
    expect((await send('GET', `${ns('a')}/w1`)).statusCode).toBe(200);
    expect((await send('DELETE', `${ns('a')}/w1`)).json()).toMatchObject({ status: 'Success' });
    expect((await send('GET', `${ns('a')}/w1`)).statusCode).toBe(404);
  });

  test('deletecollection: one refused object refuses the whole collection (nothing deleted); otherwise the selected ones go', async () => {
    await send('POST', ns('a'), widget('keep', 'red', { pinned: true }));
    await send('POST', ns('a'), widget('w1', 'red'));
    await send('POST', ns('a'), widget('w2', 'blue'));
    await send('POST', ns('b'), widget('other', 'red'));
    const refused = await send('DELETE', `${ns('a')}?fieldSelector=spec.color%3Dred`);
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ reason: 'Conflict', message: expect.stringContaining('keep') });
    expect(storage.list('a').map((w) => w.name)).toEqual(['keep', 'w1', 'w2']);
    const deleted = await send('DELETE', `${ns('a')}?fieldSelector=metadata.name%21%3Dkeep`);
    expect(deleted.json()).toMatchObject({
      kind: 'WidgetList',
      items: [{ metadata: { name: 'w1' } }, { metadata: { name: 'w2' } }],
    });
    expect(storage.list(undefined).map((w) => `${w.namespace}/${w.name}`)).toEqual(['a/keep', 'b/other']);
  });

  test('the cluster-wide list is in namespace order; a Table is served when kubectl asks for one', async () => {
    await send('POST', ns('b'), widget('x', 'red'));
    await send('POST', ns('a'), widget('y', 'blue'));
    const all = (await send('GET', `${AGG_PREFIX}/widgets`)).json() as { items: WidgetObject[] };
    expect(all.items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`)).toEqual(['a/y', 'b/x']);
    const table = await send('GET', ns('a'), undefined, undefined, {
      accept: 'application/json;as=Table;v=v1;g=meta.k8s.io',
    });
    expect(table.json()).toMatchObject({
      kind: 'Table',
      columnDefinitions: [{ name: 'Name' }, { name: 'Color' }],
      rows: [{ cells: ['y', 'blue'] }],
    });
  });

  test('before the caches sync every verb answers 503 with Retry-After, never an empty list', async () => {
    synced = false;
    for (const [method, url] of [
      ['GET', ns('a')],
      ['GET', `${AGG_PREFIX}/widgets`],
      ['POST', ns('a')],
      ['DELETE', `${ns('a')}/w1`],
    ] as const) {
      const r = await send(method, url, method === 'POST' ? widget('w1', 'red') : undefined);
      expect({ method, url, status: r.statusCode, retry: r.headers['retry-after'] }).toEqual({
        method,
        url,
        status: 503,
        retry: '5',
      });
    }
    expect(storage.writes).toBe(0);
  });
});
