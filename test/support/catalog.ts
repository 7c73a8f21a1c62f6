// Gateway catalogs as the tests write them: endpoints on the loopback upstreams (support/upstreams.ts), one model
// per entry, and the files a gateway process reads beside its mounts (catalog, upstream CA, status token).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Upstreams } from './upstreams.ts';

/** What most gateway tests price at: 2.5 USD per million prompt tokens, 10 per million completion tokens. */
export const PER_TOKEN = { kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: '10' };

export type Pricing =
  | { kind: 'per-token'; promptUsdPerMillionTokens: string; completionUsdPerMillionTokens: string }
  | { kind: 'per-request'; usdPerRequest: string };

export interface CatalogEndpoint {
  id: string;
  provider: string;
  pricing: Pricing | typeof PER_TOKEN;
  upstream: Record<string, unknown>;
}

export interface CatalogModel {
  model: string;
  /** The model's longest answer (what a request without max_tokens reserves). */
  maxOutputTokens?: number;
  /** The model's context window (a bound on the usage an endpoint may report). */
  contextLength?: number;
  endpoints: CatalogEndpoint[];
}

/**
 * One endpoint on the loopback upstream: `<up.base>/<provider>/v1`, the endpoint id the provider's, priced
 * PER_TOKEN, unless `opts` says otherwise; `upstream` fields are added (e.g. the upstream's model name).
 */
export function endpoint(
  up: Upstreams,
  provider: string,
  opts: { id?: string; pricing?: Pricing; upstream?: Record<string, unknown> } = {},
): CatalogEndpoint {
  return {
    id: opts.id ?? provider,
    provider,
    pricing: opts.pricing ?? PER_TOKEN,
    upstream: { baseUrl: `${up.base}/${provider}/v1`, ...opts.upstream },
  };
}

/** openai/gpt-4o served by OpenAI (the upstream sees model gpt-4o): the one model most gateway tests route. */
export function gpt4o(up: Upstreams, opts: { pricing?: Pricing; maxOutputTokens?: number } = {}): CatalogModel {
  return {
    model: 'openai/gpt-4o',
    ...(opts.maxOutputTokens ? { maxOutputTokens: opts.maxOutputTokens } : {}),
    endpoints: [
      endpoint(up, 'openai', { ...(opts.pricing ? { pricing: opts.pricing } : {}), upstream: { model: 'gpt-4o' } }),
    ],
  };
}

/** Writes a catalog file of `models` at `path`. */
export function writeCatalog(path: string, models: CatalogModel[]): void {
  writeFileSync(path, JSON.stringify({ format: 'byok-gateway-catalog/v1', models }));
}

/**
 * What a gateway process reads beside its mounts, into `root`: `catalog.json` (`models`, by default gpt4o),
 * `upstream-ca.pem`, and `status-token` when a token is given.
 */
export function writeGatewayFiles(
  root: string,
  up: Upstreams,
  opts: { statusToken?: string; models?: CatalogModel[] } = {},
): void {
  writeCatalog(join(root, 'catalog.json'), opts.models ?? [gpt4o(up)]);
  writeFileSync(join(root, 'upstream-ca.pem'), up.caPem);
  if (opts.statusToken !== undefined) writeFileSync(join(root, 'status-token'), `${opts.statusToken}\n`);
}
