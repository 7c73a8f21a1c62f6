// The OpenRouter-shaped surface under the group (resource `byok`): the bodies and status codes of /api/v1/byok for
// in-cluster clients that have Kubernetes identities rather than management keys. Errors keep the REST error body
// (the error handler in ../server.ts tells the two surfaces apart by path).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseUntrustedJson, UntrustedJsonError } from '../../domain/json.ts';
import { ApiError, MESSAGES } from '../../service/errors.ts';
import type { CredentialEntry } from '../../service/read-model.ts';
import { NOT_SYNCED_MESSAGE } from '../../service/runtime.ts';
import type { ByokService } from '../../service/service.ts';
import { resourceAccess } from '../access.ts';
import { AGG_PREFIX } from '../group.ts';
import { contentType } from '../request.ts';

export const BYOK_REST_RESOURCE = 'byok';

/** `ready`: false until the caches have synced; until then every route answers 503 (retry), as the REST door does. */
export function registerByokRest(app: FastifyInstance, service: ByokService, ready: () => boolean): void {
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
  const restReply = (reply: FastifyReply, status: number, body: string | Buffer) =>
    reply.code(status).type('application/json; charset=utf-8').send(body);
  const single = (e: CredentialEntry): Buffer => (e.single ??= Buffer.from(`{"data":${e.json}}`));
  const declared = {
    ...resourceAccess(BYOK_REST_RESOURCE),
    preHandler: async () => {
      if (!ready()) throw new ApiError(503, NOT_SYNCED_MESSAGE, null, { 'retry-after': '5' });
    },
  };
  const REST = `${AGG_PREFIX}/namespaces/:ns/${BYOK_REST_RESOURCE}`;
  app.get<{ Params: { ns: string } }>(REST, declared, async (req, reply) =>
    restReply(reply, 200, service.list(req.params.ns, req.query)),
  );
  app.post<{ Params: { ns: string } }>(REST, declared, async (req, reply) =>
    restReply(reply, 201, single(await service.create(req.params.ns, restJson(req)))),
  );
  app.get<{ Params: { ns: string; name: string } }>(`${REST}/:name`, declared, async (req, reply) =>
    restReply(reply, 200, single(service.get(req.params.ns, req.params.name))),
  );
  app.patch<{ Params: { ns: string; name: string } }>(`${REST}/:name`, declared, async (req, reply) =>
    restReply(reply, 200, single(await service.update(req.params.ns, req.params.name, restJson(req)))),
  );
  app.delete<{ Params: { ns: string; name: string } }>(`${REST}/:name`, declared, async (req, reply) => {
    await service.delete(req.params.ns, req.params.name);
    return restReply(reply, 200, '{"deleted":true}');
  });
}
