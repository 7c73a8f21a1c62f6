// Routes of one resource on the aggregated server: every verb at the URL shapes the access rules know (cluster
// list, namespaced collection, namespaced object), each declaring its access, served by the generic handlers over
// the resource's strategy and storage. Until the caches have synced every route answers 503 (retry), never a list
// that looks empty.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { NOT_SYNCED_MESSAGE } from '../../service/runtime.ts';
import { resourceAccess } from '../access.ts';
import { AGG_PREFIX } from '../group.ts';
import { StatusError } from '../status.ts';
import { resourceContext } from './context.ts';
import { handleDelete, handleDeleteCollection } from './delete.ts';
import { handleGet, handleList } from './read.ts';
import type { KubeObject, ServedResource } from './resource.ts';
import { handleCreate, handlePatch, handleUpdate } from './write.ts';

export interface InstallDeps {
  log: Logger;
  /** True once the caches behind every storage have synced. */
  ready(): boolean;
  whenSynced(): Promise<void>;
}

export function installResource<E extends object, O extends KubeObject>(
  app: FastifyInstance,
  resource: ServedResource<E, O>,
  deps: InstallDeps,
): { close(): void } {
  const ctx = resourceContext(resource, deps.log);
  // The watch hub starts with the synced state, so a resume from any version it reports is served.
  deps.whenSynced().then(
    () => void ctx.hub(),
    () => undefined,
  );
  type Handler<R extends FastifyRequest> = (req: R, reply: FastifyReply) => Promise<unknown>;
  const whenReady =
    <R extends FastifyRequest>(handler: Handler<R>): Handler<R> =>
    async (req, reply) => {
      if (!deps.ready()) {
        void reply.header('retry-after', '5');
        throw new StatusError(503, 'ServiceUnavailable', NOT_SYNCED_MESSAGE, { retryAfterSeconds: 5 });
      }
      return handler(req, reply);
    };
  const declared = resourceAccess(resource.names.name);
  const cluster = `${AGG_PREFIX}/${resource.names.name}`;
  const collection = `${AGG_PREFIX}/namespaces/:ns/${resource.names.name}`;
  const object = `${collection}/:name`;
  type Ns = FastifyRequest<{ Params: { ns: string } }>;
  type Obj = FastifyRequest<{ Params: { ns: string; name: string } }>;

  app.get(
    cluster,
    declared,
    whenReady(async (req, reply) => handleList(ctx, req, reply, undefined)),
  );
  app.get<{ Params: { ns: string } }>(
    collection,
    declared,
    whenReady<Ns>(async (req, reply) => handleList(ctx, req, reply, req.params.ns)),
  );
  app.post<{ Params: { ns: string } }>(
    collection,
    declared,
    whenReady<Ns>(async (req, reply) => handleCreate(ctx, req, reply)),
  );
  app.delete<{ Params: { ns: string } }>(
    collection,
    declared,
    whenReady<Ns>(async (req, reply) => handleDeleteCollection(ctx, req, reply)),
  );
  app.get<{ Params: { ns: string; name: string } }>(
    object,
    declared,
    whenReady<Obj>(async (req, reply) => handleGet(ctx, req, reply)),
  );
  app.put<{ Params: { ns: string; name: string } }>(
    object,
    declared,
    whenReady<Obj>(async (req, reply) => handleUpdate(ctx, req, reply)),
  );
  app.patch<{ Params: { ns: string; name: string } }>(
    object,
    declared,
    whenReady<Obj>(async (req, reply) => handlePatch(ctx, req, reply)),
  );
  app.delete<{ Params: { ns: string; name: string } }>(
    object,
    declared,
    whenReady<Obj>(async (req, reply) => handleDelete(ctx, req, reply)),
  );
  return { close: () => ctx.close() };
}
