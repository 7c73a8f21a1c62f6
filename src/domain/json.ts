// Reading JSON a tenant sent, at every door (REST, the aggregated API, the gateway): strict UTF-8, a nesting limit
// checked before any parse work, and no `__proto__` key anywhere (JSON.parse makes it an own property, but any later
// `target[key] = value` or Object.assign with it replaces a prototype). Pure; callers map the error to their format.

/** Deepest nesting of objects and arrays any door accepts (documented in docs/api.md and docs/gateway.md). */
export const MAX_JSON_DEPTH = 128;

export type JsonProblem =
  | { code: 'invalid_utf8'; message: string; byteOffset: number }
  | { code: 'too_deep'; message: string }
  | { code: 'malformed'; message: string }
  | { code: 'forbidden_key'; message: string };

export class UntrustedJsonError extends Error {
  readonly problem: JsonProblem;
  constructor(problem: JsonProblem) {
    super(problem.message);
    this.name = 'UntrustedJsonError';
    this.problem = problem;
  }
}

/** Keys that reach an object's prototype when used as a property name; never a field of any resource here. */
export const PROTOTYPE_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Byte offset of the first invalid UTF-8 sequence, or -1. */
export function invalidUtf8Offset(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    const need = b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (need < 0 || i + need >= bytes.length) return i;
    const b1 = bytes[i + 1]!;
    // Overlongs, surrogates and code points past U+10FFFF are invalid (RFC 3629).
    const lo = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
    const hi = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    if (b1 < lo || b1 > hi) return i;
    for (let k = 2; k <= need; k++) if ((bytes[i + k]! & 0xc0) !== 0x80) return i;
    i += need + 1;
  }
  return -1;
}

/** The deepest nesting in JSON text, stopping as soon as it passes `limit` (strings are skipped, escapes honoured). */
export function exceedsDepth(text: string, limit: number): boolean {
  // Fewer openers than the limit cannot nest past it: counted with indexOf (fast), most bodies stop here.
  let openers = 0;
  for (let i = text.indexOf('{'); i >= 0 && openers <= limit; i = text.indexOf('{', i + 1)) openers++;
  for (let i = text.indexOf('['); i >= 0 && openers <= limit; i = text.indexOf('[', i + 1)) openers++;
  if (openers <= limit) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip the string.
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

function ownProtoKey(value: unknown, depth: number): boolean {
  if (depth > MAX_JSON_DEPTH || typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value)) return value.some((v) => ownProtoKey(v, depth + 1));
  for (const k of Object.keys(value))
    if (k === '__proto__' || ownProtoKey((value as Record<string, unknown>)[k], depth + 1)) return true;
  return false;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Parses a request body as untrusted JSON; throws UntrustedJsonError naming the problem (never quoting the input). */
export function parseUntrustedJson(body: Uint8Array | string, maxDepth = MAX_JSON_DEPTH): unknown {
  let text: string;
  if (typeof body === 'string') text = body;
  else {
    try {
      // The native strict decoder on the common path; the offset is only worked out for a body it refuses.
      text = strictUtf8.decode(body);
    } catch {
      const bad = invalidUtf8Offset(body);
      throw new UntrustedJsonError({
        code: 'invalid_utf8',
        message: `the request body is not valid UTF-8 (byte ${bad})`,
        byteOffset: bad,
      });
    }
  }
  if (exceedsDepth(text, maxDepth))
    throw new UntrustedJsonError({
      code: 'too_deep',
      message: `the request body nests deeper than ${maxDepth} levels`,
    });
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    throw new UntrustedJsonError({ code: 'malformed', message: 'the request body is not valid JSON' });
  }
  // The walk runs only when the text could hold the key: plainly, or spelled with \u escapes.
  if ((text.includes('__proto__') || text.includes('\\u')) && ownProtoKey(value, 0)) {
    throw new UntrustedJsonError({
      code: 'forbidden_key',
      message: 'the request body contains the key "__proto__", which no field here uses',
    });
  }
  return value;
}
