// The answer shapes a Kubernetes client negotiates (Accept): the object itself, a server-side Table (kubectl get)
// or PartialObjectMetadata (metadata-only clients), for one object, a list or a watch event.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { responseShape, str } from '../request.ts';
import type { KubeObject, TableConvertor } from './resource.ts';

export type IncludeObject = 'None' | 'Metadata' | 'Object';

export const includeOf = (q: Record<string, unknown>): IncludeObject => {
  const v = str(q.includeObject);
  return v === 'None' || v === 'Object' ? v : 'Metadata';
};

export const partialObject = (o: KubeObject) => ({
  kind: 'PartialObjectMetadata',
  apiVersion: 'meta.k8s.io/v1',
  metadata: o.metadata,
});

export function tableRow<O extends KubeObject>(
  convertor: TableConvertor<O>,
  o: O,
  include: IncludeObject,
): Record<string, unknown> {
  const object = include === 'None' ? undefined : include === 'Object' ? o : partialObject(o);
  return { cells: convertor.cells(o), ...(object ? { object } : {}) };
}

export function table<O extends KubeObject>(
  convertor: TableConvertor<O>,
  objects: readonly O[],
  include: IncludeObject,
  listMeta: Record<string, unknown>,
  withColumns = true,
): Record<string, unknown> {
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: listMeta,
    ...(withColumns ? { columnDefinitions: convertor.columns } : {}),
    rows: objects.map((o) => tableRow(convertor, o, include)),
  };
}

export const tableType = (tableVersion: string) => `application/json;as=Table;v=${tableVersion};g=meta.k8s.io`;

/** One object in the shape the client asked for. */
export function sendObject<O extends KubeObject>(
  convertor: TableConvertor<O>,
  req: FastifyRequest,
  reply: FastifyReply,
  code: number,
  o: O,
) {
  const { shape, tableVersion } = responseShape(req.headers.accept);
  if (shape === 'table') {
    const t = {
      ...table(convertor, [o], includeOf(req.query as Record<string, unknown>), {
        resourceVersion: o.metadata.resourceVersion,
      }),
      apiVersion: `meta.k8s.io/${tableVersion}`,
    };
    return reply.code(code).type(tableType(tableVersion)).send(t);
  }
  if (shape === 'partial')
    return reply.code(code).type('application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io').send(partialObject(o));
  return reply.code(code).type('application/json').send(o);
}

/** A list in the shape the client asked for. */
export function sendList<O extends KubeObject>(
  convertor: TableConvertor<O>,
  listKind: string,
  apiVersion: string,
  req: FastifyRequest,
  reply: FastifyReply,
  meta: Record<string, unknown>,
  items: O[],
) {
  const { shape, tableVersion } = responseShape(req.headers.accept);
  if (shape === 'table') {
    return reply.type(tableType(tableVersion)).send({
      ...table(convertor, items, includeOf(req.query as Record<string, unknown>), meta),
      apiVersion: `meta.k8s.io/${tableVersion}`,
    });
  }
  if (shape === 'partial') {
    return reply.type('application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io').send({
      kind: 'PartialObjectMetadataList',
      apiVersion: 'meta.k8s.io/v1',
      metadata: meta,
      items: items.map(partialObject),
    });
  }
  return reply.type('application/json').send({ kind: listKind, apiVersion, metadata: meta, items });
}
