// The delete verbs, generic over a resource: delete (DeleteOptions preconditions and dry run honoured) and
// deletecollection, what the namespace controller and client-go's DeleteCollection call. The selected objects all
// pass the single delete's checks before the first is removed, so a refused request removes nothing; a dry run
// stops after the checks. The answer is the list of deleted objects.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../service/errors.ts';
import { AGG_GROUP_VERSION } from '../group.ts';
import { dryRunOf, readJson } from '../request.ts';
import type { ResourceContext } from './context.ts';
import type { KubeObject } from './resource.ts';
import { selectionOf } from './selection.ts';
import { conflict } from './write.ts';

/** Deletes a collection delete runs at once: enough to be quick, few enough not to crowd out other writes. */
const DELETE_CONCURRENCY = 4;

type DeleteOptions = { preconditions?: { uid?: unknown; resourceVersion?: unknown }; dryRun?: unknown } | null;

/** DeleteOptions from the body (kubectl sends them there; `dryRun: ["All"]` for --dry-run=server), if any. */
const deleteOptionsOf = (req: FastifyRequest): DeleteOptions | undefined =>
  Buffer.isBuffer(req.body) && req.body.length > 0 ? (readJson(req) as DeleteOptions) : undefined;

/** The same 409 the apiserver gives when DeleteOptions.preconditions do not match the stored object. */
function checkPreconditions<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  current: E,
  options: DeleteOptions | undefined,
): void {
  const pre = options?.preconditions;
  const { metadata } = ctx.resource.strategy.toObject(current);
  if (
    (typeof pre?.uid === 'string' && pre.uid !== metadata.uid) ||
    (typeof pre?.resourceVersion === 'string' && pre.resourceVersion !== metadata.resourceVersion)
  ) {
    throw conflict(ctx, ctx.resource.storage.nameOf(current), 'the precondition does not match the stored object');
  }
}

export async function handleDelete<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  req: FastifyRequest<{ Params: { ns: string; name: string } }>,
  reply: FastifyReply,
) {
  const { storage, strategy, errors } = ctx.resource;
  const current = ctx.find(req.params.ns, req.params.name);
  const options = deleteOptionsOf(req);
  // The query form of dryRun is accepted too.
  const dryRun = dryRunOf((req.query as Record<string, unknown>).dryRun, options?.dryRun);
  checkPreconditions(ctx, current, options);
  const name = storage.nameOf(current);
  // A dry run answers what the delete would answer, after the same checks, and writes nothing.
  if (!dryRun) {
    try {
      await storage.delete(req.params.ns, current);
    } catch (err) {
      return ctx.fail(err, name);
    }
  }
  const details = { name, group: errors.group, kind: errors.resource, uid: strategy.toObject(current).metadata.uid };
  return reply
    .type('application/json')
    .send({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details });
}

/** Runs the deletes DELETE_CONCURRENCY at a time; the first failure stops the rest and is thrown. */
async function deleteAll<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  namespace: string,
  targets: readonly E[],
): Promise<void> {
  const queue = [...targets];
  const worker = async () => {
    for (let e = queue.shift(); e !== undefined; e = queue.shift()) {
      try {
        await ctx.resource.storage.delete(namespace, e);
      } catch (err) {
        // Deleted by someone else meanwhile: the outcome asked for.
        if (err instanceof ApiError && err.status === 404) continue;
        queue.length = 0;
        throw err;
      }
    }
  };
  const results = await Promise.allSettled(
    Array.from({ length: Math.min(DELETE_CONCURRENCY, targets.length) }, worker),
  );
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) ctx.fail(failed.reason);
}

export async function handleDeleteCollection<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  req: FastifyRequest<{ Params: { ns: string } }>,
  reply: FastifyReply,
) {
  const { storage, strategy, names } = ctx.resource;
  const namespace = req.params.ns;
  const q = req.query as Record<string, unknown>;
  const sel = selectionOf(q, strategy.selectableFields);
  const options = deleteOptionsOf(req);
  const dryRun = dryRunOf(q.dryRun, options?.dryRun);
  const targets = ctx.listEntries(namespace, sel);
  const refused: string[] = [];
  for (const e of targets) {
    checkPreconditions(ctx, e, options);
    let why: string | undefined;
    try {
      why = storage.refusesDelete(namespace, e);
    } catch (err) {
      return ctx.fail(err, storage.nameOf(e));
    }
    if (why !== undefined) refused.push(storage.nameOf(e));
  }
  if (refused.length > 0) throw strategy.collectionRefused(namespace, refused, targets.length);
  const deleted = targets.map((e) => strategy.toObject(e));
  if (!dryRun) {
    await deleteAll(ctx, namespace, targets);
    ctx.log.info({ namespace, deleted: targets.length }, `deleted a collection of ${names.name}`);
  }
  return reply
    .type('application/json')
    .send({ kind: `${names.kind}List`, apiVersion: AGG_GROUP_VERSION, metadata: ctx.listMeta(), items: deleted });
}
