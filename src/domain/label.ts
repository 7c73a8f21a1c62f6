// The masked `label` shown instead of a secret (spec 2.1): the first and last few characters of the identifying key.
import { payloadShapeFor, payloadShapeModule } from './payloads.ts';
import type { ProviderSlug } from './providers.ts';

/** Characters shown at the start and end of a long key: `sk-...AbCd`. */
export const LABEL_HEAD = 3;
export const LABEL_TAIL = 4;
export const LABEL_ELLIPSIS = '...';

/** Most characters a label may reveal of a secret of `length` characters (code points): a third, at most 7. */
export function maxRevealed(length: number): number {
  return Math.min(LABEL_HEAD + LABEL_TAIL, Math.floor(length / 3));
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/g;

/**
 * Masks one secret string. Reveals at most a third of it (counted in code points, so a surrogate pair is never
 * split), never the whole, never an empty label: a secret of 1 or 2 characters becomes `...`.
 */
export function maskSecret(secret: string): string {
  const chars = Array.from(secret.trim());
  const reveal = maxRevealed(chars.length);
  // The head gets the odd character of short secrets; a long one shows 3 + 4.
  const head = Math.min(LABEL_HEAD, Math.ceil(reveal / 2));
  const tail = reveal - head;
  const text =
    chars.slice(0, head).join('') + LABEL_ELLIPSIS + (tail > 0 ? chars.slice(chars.length - tail).join('') : '');
  // Only a 4-character secret ending in '...' could come out unchanged; it gets the bare ellipsis instead.
  return text === chars.join('') ? LABEL_ELLIPSIS : text.replace(CONTROL, '?');
}

/** Labels for JSON payloads whose identifying field cannot be found; they reveal nothing. */
export const OPAQUE_OBJECT_LABEL = '{...}';
export const OPAQUE_ARRAY_LABEL = '[...]';

/**
 * The label of a provider payload. For JSON payloads the field its shape names is masked (payloads/<shape>.ts: the
 * AWS accessKeyId, the first Azure api_key, the Vertex private_key_id, api_key of `{api_key, region}`). Total: never
 * throws, also for invalid payloads, and never returns an empty string or the whole secret.
 */
export function maskLabel(provider: ProviderSlug, raw: string): string {
  const text = typeof raw === 'string' ? raw.trim() : '';
  const shape = payloadShapeModule(payloadShapeFor(provider));
  const isJson = shape.takesJson && (text.startsWith('{') || text.startsWith('['));
  if (!isJson) return maskSecret(text);
  const opaque = text.startsWith('[') ? OPAQUE_ARRAY_LABEL : OPAQUE_OBJECT_LABEL;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return opaque;
  }
  const id = shape.labelField(value);
  return id === null || id.trim() === '' ? opaque : maskSecret(id);
}
