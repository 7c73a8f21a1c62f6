// The gateway catalog: a mounted JSON file listing, per model, the endpoints the planner may use (the domain's
// CatalogEndpoint) plus where and how each endpoint is reached upstream. Validated with ajv, hot-reloaded; a bad
// file keeps the last good catalog. Format documented in docs/gateway.md.
import { type FSWatcher, readFileSync, statSync, watch } from 'node:fs';
import { dirname } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { createCatalog } from '../domain/catalog.ts';
import type {
  CatalogEndpoint,
  CatalogEndpointInput,
  CatalogModelInput,
  ModelCatalog,
  UpstreamSpec,
} from '../domain/index.ts';
import { isProviderSlug } from '../domain/providers.ts';

export const CATALOG_FORMAT = 'byok-gateway-catalog/v1';

export type { UpstreamSpec };

export interface GatewayCatalog {
  catalog: ModelCatalog;
  /** model → endpoint id → upstream. */
  upstream(model: string, endpointId: string): UpstreamSpec | undefined;
  endpoint(model: string, endpointId: string): CatalogEndpoint | undefined;
  /** The model's context length in tokens, when the catalog gives one. */
  contextLength(model: string): number | null;
  /** The model's output cap in tokens (what admission reserves when a request sets no max_tokens), when given. */
  maxOutputTokens(model: string): number | null;
  models: readonly {
    model: string;
    name: string | null;
    contextLength: number | null;
    endpoints: readonly CatalogEndpoint[];
  }[];
  /** sha-ish stamp of the source, for logs. */
  loadedAt: Date;
}

const DEFAULT_AZURE_OPENAI = 'https://{resource_name}.openai.azure.com/openai/v1';
const DEFAULT_AZURE_FOUNDRY = 'https://{resource_name}.services.ai.azure.com/openai/v1';

const pricing = {
  oneOf: [
    {
      type: 'object',
      additionalProperties: false,
      required: ['kind', 'promptUsdPerMillionTokens', 'completionUsdPerMillionTokens'],
      properties: {
        kind: { const: 'per-token' },
        promptUsdPerMillionTokens: { type: ['string', 'number'] },
        completionUsdPerMillionTokens: { type: ['string', 'number'] },
      },
    },
    {
      type: 'object',
      additionalProperties: false,
      required: ['kind', 'usdPerRequest'],
      properties: { kind: { const: 'per-request' }, usdPerRequest: { type: ['string', 'number'] } },
    },
  ],
};

const url = { type: 'string', pattern: '^https?://' };

const schema = {
  type: 'object',
  additionalProperties: false,
  required: ['format', 'models'],
  properties: {
    format: { const: CATALOG_FORMAT },
    models: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['model', 'endpoints'],
        properties: {
          model: { type: 'string', pattern: '^[^/\\s]+/[^\\s]+$' },
          name: { type: 'string' },
          contextLength: { type: 'integer', minimum: 1 },
          maxOutputTokens: { type: 'integer', minimum: 1 },
          endpoints: {
            type: 'array',
            minItems: 1,
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['id', 'provider', 'pricing', 'upstream'],
              properties: {
                id: { type: 'string', minLength: 1 },
                provider: { type: 'string' },
                region: { type: ['string', 'null'] },
                zdr: { type: 'boolean' },
                dataCollection: { type: 'boolean' },
                pricing,
                upstream: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['baseUrl'],
                  properties: {
                    api: { const: 'openai-chat' },
                    baseUrl: url,
                    model: { type: 'string', minLength: 1 },
                    regionalBaseUrls: { type: 'object', additionalProperties: url },
                    defaultRegion: { type: 'string', minLength: 1 },
                    azureOpenAiUrl: url,
                    azureFoundryUrl: url,
                  },
                },
              },
            },
          },
        },
      },
    },
  },
} as const;

const validate = new Ajv({ allErrors: false, verbose: false, allowUnionTypes: true }).compile(schema);

export class CatalogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CatalogError';
  }
}

interface RawEndpoint {
  id: string;
  provider: string;
  region?: string | null;
  zdr?: boolean;
  dataCollection?: boolean;
  pricing: CatalogEndpoint['pricing'];
  upstream: Partial<UpstreamSpec> & { baseUrl: string };
}
interface RawModel {
  model: string;
  name?: string;
  contextLength?: number;
  maxOutputTokens?: number;
  endpoints: RawEndpoint[];
}

const describe = (e: ErrorObject | undefined) =>
  e ? `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}` : 'is invalid';

/** Parses and validates catalog JSON text. Throws CatalogError with the first problem. */
export function parseCatalog(text: string): GatewayCatalog {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new CatalogError('catalog is not valid JSON');
  }
  if (!validate(doc)) throw new CatalogError(`catalog ${describe(validate.errors?.[0])}`);
  const raw = (doc as { models: RawModel[] }).models;
  const upstreams = new Map<string, Map<string, UpstreamSpec>>();
  const inputs: CatalogModelInput[] = [];
  for (const m of raw) {
    const byId = new Map<string, UpstreamSpec>();
    const endpoints: CatalogEndpointInput[] = [];
    for (const e of m.endpoints) {
      if (!isProviderSlug(e.provider))
        throw new CatalogError(`catalog endpoint ${e.id} of ${m.model} has an unknown provider`);
      endpoints.push({
        id: e.id,
        provider: e.provider,
        region: e.region ?? null,
        zdr: e.zdr ?? false,
        dataCollection: e.dataCollection ?? false,
        pricing: e.pricing,
      });
      byId.set(e.id, {
        api: 'openai-chat',
        baseUrl: e.upstream.baseUrl.replace(/\/+$/, ''),
        model: e.upstream.model ?? m.model,
        regionalBaseUrls: e.upstream.regionalBaseUrls ?? {},
        defaultRegion: e.upstream.defaultRegion ?? 'us-east-1',
        azureOpenAiUrl: (e.upstream.azureOpenAiUrl ?? DEFAULT_AZURE_OPENAI).replace(/\/+$/, ''),
        azureFoundryUrl: (e.upstream.azureFoundryUrl ?? DEFAULT_AZURE_FOUNDRY).replace(/\/+$/, ''),
      });
    }
    upstreams.set(m.model, byId);
    inputs.push({ model: m.model, endpoints });
  }
  const contexts = new Map(
    raw.flatMap((m) => (m.contextLength !== undefined ? [[m.model, m.contextLength] as const] : [])),
  );
  const outputs = new Map(
    raw.flatMap((m) => (m.maxOutputTokens !== undefined ? [[m.model, m.maxOutputTokens] as const] : [])),
  );
  let catalog: ModelCatalog;
  try {
    catalog = createCatalog(inputs);
  } catch (err) {
    throw new CatalogError(err instanceof Error ? err.message : String(err));
  }
  return {
    catalog,
    upstream: (model, endpointId) => upstreams.get(model)?.get(endpointId),
    endpoint: (model, endpointId) => catalog.models.get(model)?.endpoints.find((e) => e.id === endpointId),
    contextLength: (model) => contexts.get(model) ?? null,
    maxOutputTokens: (model) => outputs.get(model) ?? null,
    models: raw.map((m) => ({
      model: m.model,
      name: m.name ?? null,
      contextLength: m.contextLength ?? null,
      endpoints: catalog.models.get(m.model)!.endpoints,
    })),
    loadedAt: new Date(),
  };
}

export function loadCatalog(file: string): GatewayCatalog {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CatalogError(`cannot read catalog ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  return parseCatalog(text);
}

export interface CatalogWatcher {
  current(): GatewayCatalog;
  /** Re-reads the file; true when a new catalog was swapped in. */
  reload(): boolean;
  close(): void;
}

/**
 * Loads the catalog (throws when the first load fails) and reloads it when the file changes. Works for a plain file
 * and for a ConfigMap mount (kubelet swaps `..data`; the stat of the followed symlink changes).
 */
export function watchCatalog(
  file: string,
  opts: { pollMs?: number; onReload?: (c: GatewayCatalog) => void; onError?: (err: Error) => void } = {},
): CatalogWatcher {
  let current = loadCatalog(file);
  const stampOf = () => {
    try {
      const s = statSync(file);
      return `${s.ino}:${s.mtimeMs}:${s.size}`;
    } catch {
      return 'absent';
    }
  };
  let stamp = stampOf();
  let failed: string | undefined;
  const reload = (): boolean => {
    const s = stampOf();
    if (s === stamp) return false;
    try {
      current = loadCatalog(file);
      stamp = s;
      failed = undefined;
      opts.onReload?.(current);
      return true;
    } catch (err) {
      if (failed !== s) opts.onError?.(err instanceof Error ? err : new Error(String(err)));
      failed = s;
      return false;
    }
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(file), { persistent: false }, () => setTimeout(reload, 10).unref());
    watcher.on('error', () => undefined);
  } catch {
    watcher = undefined;
  }
  const poll = setInterval(reload, opts.pollMs ?? 1000);
  poll.unref();
  return {
    current: () => current,
    reload,
    close() {
      watcher?.close();
      clearInterval(poll);
    },
  };
}
