// The one canonical JSON of the project: what the routing index version and shard checksums hash, what bundle
// digests hash, what an idempotent API request is fingerprinted by and what the operator compares statuses with.
// Same value => same bytes, whatever the construction order.

/**
 * JSON.stringify's value rules (toJSON, undefined and functions left out of objects and written as null in arrays)
 * with every object's keys in ascending UTF-16 code-unit order, the rule a gateway in another language follows.
 * Throws a TypeError for a value with no JSON form (undefined, a function, a symbol).
 */
export function canonicalJson(value: unknown): string {
  let text: string | undefined;
  try {
    // Fast path: a key-sorted copy through the native stringifier (the compiler serializes every account this way).
    text = JSON.stringify(sortedCopy(value, '')) as string | undefined;
  } catch (err) {
    if (!(err instanceof IntegerLikeKey)) throw err;
    text = write(value, '');
  }
  if (text === undefined)
    throw new TypeError('canonicalJson: the value has no JSON form (undefined, a function or a symbol)');
  return text;
}

/** A JS object lists integer-like keys first in numeric order whatever the insertion order: "10" before "9". */
const INTEGER_LIKE = /^(?:0|[1-9]\d*)$/;
class IntegerLikeKey extends Error {}

function sortedCopy(value: unknown, key: string): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON(key: string): unknown }).toJSON(key);
    if (value === null || typeof value !== 'object') return value;
  }
  if (Array.isArray(value)) return value.map((v: unknown, i) => sortedCopy(v, String(i)));
  // Boxed primitives: the native stringifier writes their primitive value.
  if (value instanceof String || value instanceof Number || value instanceof Boolean) return value;
  const record = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(record).sort()) {
    const first = k.charCodeAt(0);
    // The copy would not keep this key's place: write the whole value out instead.
    if (first >= 48 && first <= 57 && INTEGER_LIKE.test(k)) throw new IntegerLikeKey();
    const v = record[k];
    if (v === undefined) continue;
    // Tenant data may carry a "__proto__" key: an own property, never the copy's prototype.
    if (k === '__proto__')
      Object.defineProperty(out, k, { value: sortedCopy(v, k), enumerable: true, writable: true, configurable: true });
    else out[k] = sortedCopy(v, k);
  }
  return out;
}

/** The slow path: the JSON text written directly, key by key. */
function write(value: unknown, key: string): string | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON(key: string): unknown }).toJSON(key);
  }
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (value instanceof String || value instanceof Number || value instanceof Boolean) return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v: unknown, i) => write(v, String(i)) ?? 'null').join(',')}]`;
  const record = value as Record<string, unknown>;
  const members: string[] = [];
  for (const k of Object.keys(record).sort()) {
    const v = write(record[k], k);
    if (v !== undefined) members.push(`${JSON.stringify(k)}:${v}`);
  }
  return `{${members.join(',')}}`;
}
