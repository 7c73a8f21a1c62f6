// Did-you-mean hints, one definition for every door: `validate` (unknown fields, enum values), the REST API
// (unknown fields, provider slugs) and the gateway (model slugs). A hint only ever names a known value, never
// echoes what was sent, so it is safe next to a secret sent in the wrong place.

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
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
  const [best] = names.map((n) => ({ n, d: editDistance(value.toLowerCase(), n.toLowerCase()) })).sort((x, y) => x.d - y.d);
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
