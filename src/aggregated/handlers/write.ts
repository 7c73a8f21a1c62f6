// The write verbs, generic over a resource: create, update (PUT of the full object) and patch (JSON merge patch and
// JSON patch applied to the current object, then written as an update). Server-side apply and strategic merge
// patch are refused (415), as is a dry run (400: the storage has no dry-run mode, so nothing is written).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { jsonPatch, mergePatch, PatchError } from '../patch.ts';
import { contentType, readJson, requireJson } from '../request.ts';
import { StatusError } from '../status.ts';
import type { ResourceContext } from './context.ts';
import type { KubeObject } from './resource.ts';
import { sendObject } from './respond.ts';

type Named = FastifyRequest<{ Params: { ns: string; name: string } }>;

const rejectDryRun = (q: Record<string, unknown>) => {
  if (q.dryRun !== undefined)
    throw new StatusError(
      400,
      'BadRequest',
      'dryRun is not supported for create, update or patch by this API (delete supports it): nothing was written',
    );
};

/** The 409 the apiserver answers when a sent resourceVersion is not the stored one. */
export function conflict<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  name: string,
  why: string,
): StatusError {
  const { group, resource } = ctx.resource.errors;
  return new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${resource}.${group} "${name}": ${why}`, {
    name,
    group,
    kind: resource,
  });
}

const resourceVersionOf = (o: unknown): unknown =>
  (o as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;

export async function handleCreate<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  req: FastifyRequest<{ Params: { ns: string } }>,
  reply: FastifyReply,
) {
  rejectDryRun(req.query as Record<string, unknown>);
  requireJson(req);
  const raw = readJson(req);
  let created: E;
  try {
    created = await ctx.resource.storage.create(req.params.ns, raw);
  } catch (err) {
    return ctx.fail(err);
  }
  return sendObject(ctx.resource.table, req, reply, 201, ctx.resource.strategy.toObject(created));
}

async function applyUpdate<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  namespace: string,
  current: E,
  desired: unknown,
  precondition: string | undefined,
): Promise<E> {
  const { storage, strategy } = ctx.resource;
  const name = storage.nameOf(current);
  if (
    precondition !== undefined &&
    precondition !== '' &&
    precondition !== strategy.toObject(current).metadata.resourceVersion
  ) {
    throw conflict(
      ctx,
      name,
      'the object has been modified; please apply your changes to the latest version and try again',
    );
  }
  try {
    return await storage.update(namespace, current, desired);
  } catch (err) {
    return ctx.fail(err, name);
  }
}

export async function handleUpdate<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  req: Named,
  reply: FastifyReply,
) {
  rejectDryRun(req.query as Record<string, unknown>);
  requireJson(req);
  const desired = readJson(req);
  const current = ctx.find(req.params.ns, req.params.name);
  const rv = resourceVersionOf(desired);
  const updated = await applyUpdate(ctx, req.params.ns, current, desired, typeof rv === 'string' ? rv : undefined);
  return sendObject(ctx.resource.table, req, reply, 200, ctx.resource.strategy.toObject(updated));
}

export async function handlePatch<E extends object, O extends KubeObject>(
  ctx: ResourceContext<E, O>,
  req: Named,
  reply: FastifyReply,
) {
  rejectDryRun(req.query as Record<string, unknown>);
  const { group, resource, kind } = ctx.resource.errors;
  const ct = contentType(req);
  // Before the lookup: apply would create a missing object, so it gets the same answer whether or not one exists.
  if (ct === 'application/apply-patch+yaml')
    throw new StatusError(415, 'UnsupportedMediaType', ctx.resource.applyRefusal, {
      name: req.params.name,
      group,
      kind: resource,
    });
  const current = ctx.find(req.params.ns, req.params.name);
  const base = ctx.resource.strategy.toObject(current);
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
    const name = ctx.resource.storage.nameOf(current);
    if (err instanceof PatchError)
      throw new StatusError(422, 'Invalid', `${kind} "${name}" is invalid: ${err.message}`, { name, group, kind });
    throw err;
  }
  const rv = resourceVersionOf(desired);
  const precondition = typeof rv === 'string' && rv !== base.metadata.resourceVersion ? rv : undefined;
  const updated = await applyUpdate(ctx, req.params.ns, current, desired, precondition);
  return sendObject(ctx.resource.table, req, reply, 200, ctx.resource.strategy.toObject(updated));
}
