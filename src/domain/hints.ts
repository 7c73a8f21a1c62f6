// Did-you-mean hints, one definition for every door: `validate` (unknown fields, enum values), the REST API
// (unknown fields, provider slugs) and the gateway (model slugs). A hint only ever names a known value, never
// echoes what was sent, so it is safe next to a secret sent in the wrong place.

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/** Case, `_` and `-` removed: `isByokOnly`, `is-byok-only` and `is_byok_only` are one name; `open-ai` is `openai`. */
const folded = (s: string) => s.toLowerCase().replace(/[_-]/g, '');

/**
 * The known name closest to a typo, when it is close enough to be the likely intent: the same name in another
 * spelling (camelCase for snake_case, a stray hyphen) first, then the nearest by edit distance.
 */
export function closestName(value: string, names: readonly string[]): string | undefined {
  if (value === '' || names.includes(value)) return undefined;
  const same = names.find((n) => folded(n) === folded(value));
  if (same !== undefined) return same;
  const [best] = names
    .map((n) => ({ n, d: editDistance(value.toLowerCase(), n.toLowerCase()) }))
    .sort((x, y) => x.d - y.d);
  return best && best.d <= Math.max(2, Math.floor(value.length / 3)) ? best.n : undefined;
}

/**
 * The catalog model a request most likely meant: a bare model name (`gpt-5`, what the OpenAI SDK examples send)
 * is the one slug that ends in `/gpt-5`; otherwise the closest slug.
 */
export function closestModel(model: string, slugs: readonly string[]): string | undefined {
  if (model === '' || slugs.includes(model)) return undefined;
  if (!model.includes('/')) {
    const tail = slugs.filter((s) => folded(s.slice(s.indexOf('/') + 1)) === folded(model));
    if (tail.length === 1) return tail[0];
  }
  return closestName(model, slugs);
}

/** `; did you mean "x"?` or '' : the suffix every door appends to its own message. */
export function didYouMean(hint: string | undefined): string {
  return hint === undefined ? '' : `; did you mean "${hint}"?`;
}

/**
 * Vendors of the model families an SDK names without a vendor (`gpt-5`, `claude-sonnet-4`): what a slug is guessed
 * from when no catalog is at hand (`validate` on manifests, the REST API). Only these shapes are ever echoed back, so
 * a provider key pasted into a model field (`sk-…`, `AIza…`) never is.
 */
const BARE_MODEL_VENDORS: readonly (readonly [RegExp, string])[] = [
  [/^(gpt-|chatgpt-|o[134](-|$)|text-embedding-)/, 'openai'],
  [/^claude-/, 'anthropic'],
  [/^gemini-/, 'google'],
  [/^(mistral-|ministral-|codestral-|magistral-|pixtral-)/, 'mistralai'],
  [/^llama-?\d/, 'meta-llama'],
  [/^deepseek-/, 'deepseek'],
  [/^grok-/, 'x-ai'],
  [/^command-/, 'cohere'],
  [/^qwen/, 'qwen'],
];

/**
 * The did-you-mean suffix for a model slug, one function for every door (the gateway's 400, `explain`, `validate`,
 * REST `allowed_models`): with the catalog's slugs, the slug closest to what was sent (`gpt-5` → `openai/gpt-5`);
 * without a catalog, a bare name of a known family gets its vendor. '' when neither.
 */
export function modelSlugHint(model: unknown, slugs: readonly string[] | null = null): string {
  if (typeof model !== 'string' || model.length > 128) return '';
  if (slugs !== null) return didYouMean(closestModel(model, slugs));
  if (model.includes('/') || !/^[a-z0-9][a-z0-9.:_-]*$/i.test(model)) return '';
  const vendor = BARE_MODEL_VENDORS.find(([re]) => re.test(model.toLowerCase()))?.[1];
  return vendor === undefined ? '' : didYouMean(`${vendor}/${model.toLowerCase()}`);
}
