// The one catalog: `config/catalog/catalog.json` is the default of every setting that plans routes.
// `explain` reads it, a bare `byok-operator gateway` serves it, the chart ships a byte copy of it
// (charts/byok-operator/files/catalog.json, written by `npm run generate`), and `npm run dev` derives its gateway's
// catalog from it by pointing the upstream URLs at its loopback upstreams, and nothing else: models, endpoints,
// order, regions, data policies and prices (everything the planner reads) stay as they are, so `explain` over the
// source plans exactly what the dev gateway does. docs/gateway.md, "Catalog".
import { readFileSync, renameSync, statSync, unwatchFile, watchFile, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repo-relative (and package-relative: npm ships config/catalog, the image copies it) path of the catalog. */
export const CATALOG_PATH = 'config/catalog/catalog.json';

/** The chart's copy of the catalog, kept byte-identical by `npm run generate` (a unit test checks). */
export const CHART_CATALOG_PATH = 'charts/byok-operator/files/catalog.json';

/** The package root: the repo from src/cli, the installed package (or /app in the image) from dist/cli. */
export const packageRoot = (): string => resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Absolute path of the default catalog. */
export function defaultCatalogFile(): string {
  return join(packageRoot(), CATALOG_PATH);
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `https://api.openai.com/v1` → `<base>/<provider>/v1`: the origin (scheme, host, port) is replaced, the path kept. */
function rehome(url: unknown, base: string, provider: string): unknown {
  if (typeof url !== 'string') return url;
  const m = /^https?:\/\/[^/]*(\/.*)?$/.exec(url);
  if (!m) return url;
  return `${base.replace(/\/+$/, '')}/${provider.replace(/\//g, '__')}${m[1] ?? ''}`;
}

/**
 * The catalog with every upstream URL (baseUrl, regionalBaseUrls, the Azure templates) moved to `base`, under a path
 * segment naming the provider. Only `upstream` objects change; the result is formatted like the source.
 */
export function withLoopbackUpstreams(catalogText: string, base: string): string {
  const doc = JSON.parse(catalogText) as Json;
  const models = Array.isArray(doc.models) ? doc.models : [];
  for (const m of models) {
    if (!isObject(m) || !Array.isArray(m.endpoints)) continue;
    for (const e of m.endpoints) {
      if (!isObject(e) || !isObject(e.upstream)) continue;
      const provider = typeof e.provider === 'string' ? e.provider : 'upstream';
      const u = e.upstream;
      for (const k of ['baseUrl', 'azureOpenAiUrl', 'azureFoundryUrl']) if (k in u) u[k] = rehome(u[k], base, provider);
      if (isObject(u.regionalBaseUrls)) {
        const regional = u.regionalBaseUrls;
        for (const region of Object.keys(regional))
          regional[region] = rehome(regional[region], base, `${provider}/${region}`);
      }
    }
  }
  return `${JSON.stringify(doc, null, 2)}\n`;
}

export interface DerivedCatalog {
  /** Rewrites the target now (when the source changed); true when it wrote. */
  sync(): boolean;
  stop(): void;
}

/**
 * Keeps `target` = withLoopbackUpstreams(`source`, base): written now, rewritten (atomically, so the gateway's
 * catalog watcher never reads half a file) whenever the source changes. A source that no longer parses is
 * reported and the last good target stays, as the gateway itself does with a bad catalog.
 */
export function deriveCatalog(
  source: string,
  target: string,
  base: string,
  opts: { pollMs?: number; onError?: (err: Error) => void } = {},
): DerivedCatalog {
  let stamp = '';
  const sync = (): boolean => {
    let s: string;
    try {
      const st = statSync(source);
      s = `${st.ino}:${st.mtimeMs}:${st.size}`;
    } catch (err) {
      opts.onError?.(err as Error);
      return false;
    }
    if (s === stamp) return false;
    stamp = s;
    try {
      const text = withLoopbackUpstreams(readFileSync(source, 'utf8'), base);
      const tmp = `${target}.tmp`;
      writeFileSync(tmp, text);
      renameSync(tmp, target);
      return true;
    } catch (err) {
      opts.onError?.(err as Error);
      return false;
    }
  };
  if (!sync()) throw new Error(`cannot derive the dev catalog from ${source}`);
  const listener = () => void sync();
  watchFile(source, { interval: opts.pollMs ?? 1000, persistent: false }, listener);
  return { sync, stop: () => unwatchFile(source, listener) };
}
