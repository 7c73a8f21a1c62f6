// One served resource as its handlers see it: the resource's parts plus what every verb shares (objects cached
// per entry, selection, lookup with Status errors, the watch hub).
import type { Logger } from 'pino';
import { StatusError, statusOf } from '../status.ts';
import { WatchHub } from '../watch.ts';
import { compareCursor } from './cursor.ts';
import type { KubeObject, ServedResource } from './resource.ts';
import { matches, type Selection } from './selection.ts';

export interface ResourceContext<E extends object, O extends KubeObject> {
  readonly resource: ServedResource<E, O>;
  readonly log: Logger;
  /** The entry's object, computed once per entry (entries are replaced on every change, never mutated). */
  objectOf(entry: E): O;
  selected(o: O, selection: Selection): boolean;
  /** The selected entries in list order: by namespace, then the storage's order. */
  listEntries(namespace: string | undefined, selection: Selection): E[];
  /** The entry, or the resource's 404 Status. */
  find(namespace: string, name: string): E;
  /** Any error of the storage as the resource's Status (422 for an invalid object); others rethrown. */
  fail(err: unknown, name?: string): never;
  /** The watch hub, opened once the caches have synced (handlers run only then). */
  hub(): WatchHub<E>;
  /** The version a list is at: everything this replica has seen. */
  listMeta(extra?: Record<string, unknown>): Record<string, unknown>;
  close(): void;
}

export function resourceContext<E extends object, O extends KubeObject>(
  resource: ServedResource<E, O>,
  log: Logger,
): ResourceContext<E, O> {
  const { strategy, storage } = resource;
  const objects = new WeakMap<E, O>();
  let watchHub: WatchHub<E> | undefined;
  let closed = false;
  const fail = (err: unknown, name?: string): never => {
    throw statusOf(err, resource.errors, name);
  };
  const ctx: ResourceContext<E, O> = {
    resource,
    log,
    objectOf: (e) => {
      let o = objects.get(e);
      if (!o) {
        o = strategy.toObject(e);
        objects.set(e, o);
      }
      return o;
    },
    selected: (o, s) => matches(s.labels, o.metadata.labels ?? {}) && matches(s.fields, strategy.fieldValues(o)),
    listEntries: (namespace, sel) => {
      const entries = storage.list(namespace).filter((e) => ctx.selected(ctx.objectOf(e), sel));
      return namespace === undefined
        ? entries.sort((x, y) => compareCursor(strategy.listOrder.key(x), strategy.listOrder.key(y)))
        : entries;
    },
    find: (namespace, name) => {
      try {
        return storage.get(namespace, name);
      } catch (err) {
        return fail(err, name);
      }
    },
    fail,
    hub: () => {
      if (closed) throw new StatusError(503, 'ServiceUnavailable', 'the server is shutting down');
      return (watchHub ??= new WatchHub(storage.changes));
    },
    listMeta: (extra = {}) => ({ resourceVersion: ctx.hub().currentRv(), ...extra }),
    close: () => {
      closed = true;
      watchHub?.close();
    },
  };
  return ctx;
}
