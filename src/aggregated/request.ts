// What every resource of the aggregated door reads off a request the same way: the response shape the client
// negotiated (object, Table, PartialObjectMetadata), the JSON body, the content type and DeleteOptions.dryRun.
import type { FastifyRequest } from 'fastify';
import { parseUntrustedJson, UntrustedJsonError } from '../domain/json.ts';
import { MESSAGES } from '../service/errors.ts';
import { StatusError } from './status.ts';

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export type Shape = 'object' | 'table' | 'partial';

export function responseShape(accept: string | undefined): { shape: Shape; tableVersion: string } {
  const a = accept ?? '';
  for (const clause of a.split(',')) {
    const params = Object.fromEntries(
      clause
        .split(';')
        .slice(1)
        .map((p) => p.trim().split('=') as [string, string]),
    );
    if (params.g === 'meta.k8s.io' && params.as === 'Table' && (params.v === 'v1' || params.v === 'v1beta1'))
      return { shape: 'table', tableVersion: params.v };
    if (
      params.g === 'meta.k8s.io' &&
      (params.as === 'PartialObjectMetadataList' || params.as === 'PartialObjectMetadata') &&
      params.v === 'v1'
    )
      return { shape: 'partial', tableVersion: 'v1' };
  }
  return { shape: 'object', tableVersion: 'v1' };
}

/** The raw body as untrusted JSON (depth-bounded, no prototype keys); a Status 400 when it is not. */
export function readJson(req: FastifyRequest): unknown {
  const body = req.body;
  if (!Buffer.isBuffer(body) || body.length === 0) throw new StatusError(400, 'BadRequest', MESSAGES.emptyBody);
  try {
    return parseUntrustedJson(body);
  } catch (err) {
    if (!(err instanceof UntrustedJsonError)) throw err;
    throw new StatusError(400, 'BadRequest', err.problem.code === 'malformed' ? MESSAGES.malformedJson : err.message);
  }
}

export const contentType = (req: FastifyRequest): string =>
  (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';

export function requireJson(req: FastifyRequest): void {
  const ct = contentType(req);
  if (ct !== 'application/json')
    throw new StatusError(
      415,
      'UnsupportedMediaType',
      `the body of a ${req.method} must be application/json, not ${ct.slice(0, 100) || 'empty'}`,
    );
}

/** DeleteOptions.dryRun, from the query or the body: only "All" exists (as in Kubernetes); anything else is a 400. */
export function dryRunOf(query: unknown, body: unknown): boolean {
  const values = [query, body].flatMap((v) => (v === undefined || v === null ? [] : Array.isArray(v) ? v : [v]));
  if (values.some((v) => v !== 'All'))
    throw new StatusError(400, 'BadRequest', 'dryRun must be "All" (or absent): nothing was deleted');
  return values.length > 0;
}
