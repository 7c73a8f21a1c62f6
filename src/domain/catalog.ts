// The gateway's catalog of shared endpoints per model, and the routing request (spec 1.1). The catalog is indexed
// once by `createCatalog` so the planner does no per-request setup work.
import { assertNonNegativeMicros, type Micros, mulDivRound, type UsdInput, usdToMicros } from './money.ts';
import { isProviderSlug, PROVIDER_SLUGS, type ProviderSlug } from './providers.ts';

export type EndpointPricing =
  | { kind: 'per-token'; promptUsdPerMillionTokens: UsdInput; completionUsdPerMillionTokens: UsdInput }
  | { kind: 'per-request'; usdPerRequest: UsdInput };

/** An endpoint's price in exact micros: converted once from its EndpointPricing when the catalog is built. */
export type EndpointPrice =
  | {
      readonly kind: 'per-token';
      readonly promptMicrosPerMillionTokens: Micros;
      readonly completionMicrosPerMillionTokens: Micros;
    }
  | { readonly kind: 'per-request'; readonly microsPerRequest: Micros };

/** A catalog endpoint as configured (prices in USD). */
export interface CatalogEndpointInput {
  /**
   * Endpoint slug, unique within the model, and the name `provider.order` / `provider.only` target it by. A standard
   * endpoint usually uses the provider slug (`openai`), a region-pinned one the slug with a region suffix (`openai/eu`).
   */
  readonly id: string;
  readonly provider: ProviderSlug;
  /** null = standard (global) endpoint; otherwise the region it is pinned to, e.g. 'eu'. */
  readonly region: string | null;
  /** The provider retains no data on this endpoint. */
  readonly zdr: boolean;
  /** The provider may collect (store or train on) prompts on this endpoint. */
  readonly dataCollection: boolean;
  readonly pricing: EndpointPricing;
}

/** How an endpoint is reached (the gateway catalog's `upstream`; the export reads it too). Every upstream speaks OpenAI Chat Completions; URLs differ per provider and payload. */
export interface UpstreamSpec {
  /** Wire protocol; only OpenAI Chat Completions today. */
  api: 'openai-chat';
  /**
   * Base URL; `/chat/completions` is appended. Placeholders: `{region}` (bedrock: the payload's or defaultRegion),
   * `{project}`, `{location}` and `{location_prefix}` (vertex: `global` / '' or `us-central1` / `us-central1-`).
   */
  baseUrl: string;
  /** Model name sent upstream (default: the gateway model slug). */
  model: string;
  /** `{api_key, region}` payloads (openai, fireworks): region → base URL. */
  regionalBaseUrls: Record<string, string>;
  /** Region used by Bedrock API keys, which carry none (default us-east-1). */
  defaultRegion: string;
  /** Azure resource configs: URL templates with `{resource_name}` for the two resource types. */
  azureOpenAiUrl: string;
  azureFoundryUrl: string;
}

/** A catalog endpoint as built by createCatalog: the configured one plus its price in micros. */
export interface CatalogEndpoint extends CatalogEndpointInput {
  readonly price: EndpointPrice;
}

export interface CatalogModelInput {
  model: string;
  /** In the gateway's default order (for example by price); shared endpoints keep it unless provider.order says otherwise. */
  endpoints: readonly CatalogEndpointInput[];
}

/** Per-model index built by createCatalog. Internal to the planner; treat as opaque. */
export interface CatalogModelIndex {
  /** PROVIDER_SLUGS index of each endpoint. */
  readonly providerIdx: Int32Array;
  /** Endpoint positions per provider index: standard endpoints first, then region-pinned, each in catalog order. */
  readonly byProvider: readonly (Int32Array | undefined)[];
  /** Provider index -> the model has a standard (non-regional) endpoint of that provider. */
  readonly hasStandard: Uint8Array;
  /** Lazily filled caches of frozen plan objects, one slot per endpoint. */
  readonly sharedAttempts: unknown[];
  readonly exclusions: unknown[][];
}

export interface CatalogModel {
  readonly model: string;
  readonly endpoints: readonly CatalogEndpoint[];
  readonly index: CatalogModelIndex;
}

export interface ModelCatalog {
  readonly models: ReadonlyMap<string, CatalogModel>;
}

export const PROVIDER_INDEX: ReadonlyMap<string, number> = new Map(PROVIDER_SLUGS.map((s, i) => [s, i]));

/**
 * Builds an indexed catalog, converting every price to micros. Throws TypeError on an unknown provider, a duplicate
 * endpoint id or a repeated model, and RangeError on a price that is not a non-negative decimal USD amount.
 */
export function createCatalog(models: Iterable<CatalogModelInput>): ModelCatalog {
  const out = new Map<string, CatalogModel>();
  for (const input of models) {
    if (out.has(input.model)) throw new TypeError(`catalog lists model ${input.model} twice`);
    // A fixed property order gives every endpoint one hidden class, which keeps the planner's loads monomorphic.
    const endpoints: CatalogEndpoint[] = input.endpoints.map((e) => {
      const endpoint = {
        id: e.id,
        provider: e.provider,
        region: e.region,
        zdr: e.zdr,
        dataCollection: e.dataCollection,
        pricing: Object.freeze({ ...e.pricing }),
      };
      // Derived at load, not part of any format: not enumerable, so plans and explanations serialize as before.
      return Object.freeze(
        Object.defineProperty(endpoint, 'price', {
          value: priceMicros(e.pricing),
          enumerable: false,
        }) as CatalogEndpoint,
      );
    });
    const ids = new Set<string>();
    const providerIdx = new Int32Array(endpoints.length);
    const lists: number[][] = [];
    const hasStandard = new Uint8Array(PROVIDER_SLUGS.length);
    endpoints.forEach((e, i) => {
      if (!isProviderSlug(e.provider))
        throw new TypeError(`catalog endpoint ${e.id} of ${input.model} has an unknown provider`);
      if (ids.has(e.id)) throw new TypeError(`catalog lists endpoint ${e.id} of ${input.model} twice`);
      ids.add(e.id);
      const p = PROVIDER_INDEX.get(e.provider) as number;
      providerIdx[i] = p;
      (lists[p] ??= []).push(i);
      if (e.region === null) hasStandard[p] = 1;
    });
    const byProvider: (Int32Array | undefined)[] = Array.from({ length: PROVIDER_SLUGS.length }, () => undefined);
    lists.forEach((list, p) => {
      if (list === undefined) return;
      const sorted = [...list].sort((a, b) => regional(endpoints[a]) - regional(endpoints[b]) || a - b);
      byProvider[p] = Int32Array.from(sorted);
    });
    out.set(input.model, {
      model: input.model,
      endpoints: Object.freeze(endpoints),
      index: {
        providerIdx,
        byProvider,
        hasStandard,
        sharedAttempts: Array.from({ length: endpoints.length }, () => undefined as unknown),
        exclusions: endpoints.map(() => []),
      },
    });
  }
  return { models: out };
}

function regional(e: CatalogEndpoint | undefined): number {
  return e !== undefined && e.region !== null ? 1 : 0;
}

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
}

/** An endpoint's configured USD pricing in micros; RangeError on an amount that is not a non-negative decimal. */
export function priceMicros(pricing: EndpointPricing): EndpointPrice {
  const micros = (usd: UsdInput): Micros => {
    const m = usdToMicros(usd);
    assertNonNegativeMicros(m, 'catalog price');
    return m;
  };
  if (pricing.kind === 'per-request')
    return Object.freeze({ kind: 'per-request', microsPerRequest: micros(pricing.usdPerRequest) });
  return Object.freeze({
    kind: 'per-token',
    promptMicrosPerMillionTokens: micros(pricing.promptUsdPerMillionTokens),
    completionMicrosPerMillionTokens: micros(pricing.completionUsdPerMillionTokens),
  });
}

/** List cost of one request on an endpoint, in micros (the base of the BYOK fee and of budget amounts). */
export function listCostMicros(price: EndpointPrice, usage: TokenUsage): Micros {
  if (price.kind === 'per-request') return price.microsPerRequest;
  // USD per million tokens is micro-USD per token.
  const prompt = mulDivRound(price.promptMicrosPerMillionTokens, usage.promptTokens, 1_000_000);
  const completion = mulDivRound(price.completionMicrosPerMillionTokens, usage.completionTokens, 1_000_000);
  return prompt + completion;
}

/** Where the request entered the gateway: the global API, or a region-specific address. */
export type BaseAddress = 'global' | { readonly region: string };

export interface RouteRequest {
  model: string;
  /** SHA-256 hex of the gateway API key making the request. */
  apiKeyHash: string;
  /** The requesting member; null when the key is not tied to a member. */
  userId: string | null;
  /** Public id of the workspace the request runs in. */
  workspaceId: string;
  /** `provider.order`: provider slugs or endpoint ids. */
  providerOrder?: readonly string[] | null;
  /** `provider.only`: provider slugs or endpoint ids; null or empty = no restriction. */
  providerOnly?: readonly string[] | null;
  /** `provider.zdr`. */
  requireZdr?: boolean;
  /** `provider.data_collection: 'deny'`. */
  denyDataCollection?: boolean;
  baseAddress: BaseAddress;
  isVideoGeneration: boolean;
}
