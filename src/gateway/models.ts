// The models list: `GET /v1/models` (the `openai` SDK's `models.list()`) and `GET /api/v1/models` (OpenRouter's path;
// with the same base URL as chat completions, the SDK calls this one). One body on both: the OpenAI list shape
// `{object: "list", data: [{id, object: "model", created, owned_by, …}]}` with OpenRouter's fields on each entry.
// With a gateway API key, only the catalog models the key's account can reach: the planner gives the model at least
// one attempt, a BYOK credential or shared capacity the platform holds a key for. /api/v1/models without a key stays
// the public catalog, as on OpenRouter; /v1/models always needs the key.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Attempt, CatalogEndpoint } from '../domain/index.ts';
import type { GatewayCatalog } from './catalog.ts';
import { apiKeyHash, keyRefusal } from './completions.ts';
import { type GatewayRuntime, specError } from './runtime.ts';

type CatalogModel = GatewayCatalog['models'][number];

export interface ModelEntry {
  id: string;
  object: 'model';
  /** Unix seconds: when this gateway loaded the catalog (the catalog has no model creation dates). */
  created: number;
  /** The vendor part of the model slug. */
  owned_by: string;
  name: string;
  context_length: number | null;
  endpoints: {
    id: string;
    provider: string;
    region: string | null;
    zdr: boolean;
    data_collection: CatalogEndpoint['dataCollection'];
    pricing: { prompt: string; completion: string; request: string };
  }[];
}

export interface ModelList {
  object: 'list';
  data: ModelEntry[];
}

/** The route handler; `keyRequired` for /v1/models. */
export function listModels(
  rt: GatewayRuntime,
  opts: { keyRequired: boolean },
): (req: FastifyRequest, reply: FastifyReply) => Promise<unknown> {
  return async (req, reply) => {
    const catalog = rt.catalog.current();
    if (!opts.keyRequired && req.headers.authorization === undefined) return modelList(catalog, catalog.models);
    const who = apiKeyHash(req.headers.authorization);
    if ('error' in who) return reply.code(401).send(who);
    const config = rt.routing.current();
    if (!config) return reply.code(503).send(specError(503, 'the gateway has not loaded a routing config yet'));
    const userId = config.apiKey(who.hash)?.key.owner ?? null;
    const at = new Date();
    const sharedKeys = new Map<string, boolean>();
    const usable = (a: Attempt) => {
      if (a.kind === 'credential') return true;
      let held = sharedKeys.get(a.provider);
      if (held === undefined) {
        try {
          rt.payloads.shared(a.provider);
          held = true;
        } catch {
          held = false;
        }
        sharedKeys.set(a.provider, held);
      }
      return held;
    };
    const reachable: CatalogModel[] = [];
    for (const m of catalog.models) {
      const outcome = rt.routing.planFor(
        { model: m.model, apiKeyHash: who.hash, userId, baseAddress: rt.baseAddress, isVideoGeneration: false },
        catalog.catalog,
        at,
      );
      // The key itself is refused (unknown, expired, no workspace): the same answers as chat completions.
      if (!outcome.ok) {
        const refused = keyRefusal(outcome.reason);
        return reply.code(refused.error.code).send(refused);
      }
      if (outcome.plan.attempts.some(usable)) reachable.push(m);
    }
    return modelList(catalog, reachable);
  };
}

function modelList(catalog: GatewayCatalog, models: readonly CatalogModel[]): ModelList {
  const created = Math.floor(catalog.loadedAt.getTime() / 1000);
  return { object: 'list', data: models.map((m) => modelEntry(m, created)) };
}

/** A catalog model as the lists show it (prices per token, as decimal strings, as OpenRouter). */
function modelEntry(m: CatalogModel, created: number): ModelEntry {
  return {
    id: m.model,
    object: 'model',
    created,
    owned_by: m.model.split('/')[0]!,
    name: m.name ?? m.model,
    context_length: m.contextLength,
    endpoints: m.endpoints.map((e) => ({
      id: e.id,
      provider: e.provider,
      region: e.region,
      zdr: e.zdr,
      data_collection: e.dataCollection,
      pricing:
        e.pricing.kind === 'per-token'
          ? {
              prompt: perToken(e.pricing.promptUsdPerMillionTokens),
              completion: perToken(e.pricing.completionUsdPerMillionTokens),
              request: '0',
            }
          : { prompt: '0', completion: '0', request: String(e.pricing.usdPerRequest) },
    })),
  };
}

function perToken(usdPerMillion: string | number): string {
  return String(Number(usdPerMillion) / 1_000_000);
}
