// One canonical JSON for the routing index, shard and bundle digests, API idempotency fingerprints and status
// comparisons: its output must not move under any of them.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';

/** The REST API's fingerprint serializer before this module: fingerprints stored in annotations must still match. */
function apiCanonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(apiCanonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .filter((k) => o[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${apiCanonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

const json = fc.jsonValue({ maxDepth: 4 });

describe('canonicalJson', () => {
  test('sorts keys recursively and drops undefined members, whatever the construction order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: undefined }], c: null }, u: undefined })).toBe(
      '{"a":{"c":null,"d":[3,{"z":1}]},"b":1}',
    );
    expect(canonicalJson([undefined, () => 1])).toBe('[null,null]');
    expect(canonicalJson('x')).toBe('"x"');
    expect(canonicalJson(Number.NaN)).toBe('null');
  });

  test('is JSON.parse-able back to the same value, and equal values give equal text', () => {
    fc.assert(
      fc.property(json, (value) => {
        const text = canonicalJson(value);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        const reversed = JSON.parse(JSON.stringify(value), (_k, v: unknown) =>
          v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
        ) as unknown;
        expect(canonicalJson(reversed)).toBe(text);
      }),
    );
  });

  test('writes exactly what the API fingerprinted before, integer-like keys included (code-unit order: "10" < "9")', () => {
    fc.assert(fc.property(json, (value) => expect(canonicalJson(value)).toBe(apiCanonicalJson(value))));
    const value = { 9: 'nine', 10: 'ten', b: { 2: true, '02': false, 1: null }, a: 1 };
    expect(canonicalJson(value)).toBe('{"10":"ten","9":"nine","a":1,"b":{"02":false,"1":null,"2":true}}');
    expect(canonicalJson(value)).toBe(apiCanonicalJson(value));
  });

  test('a "__proto__" key in tenant data is written as an ordinary key, never a prototype', () => {
    const value = JSON.parse('{"b":{"__proto__":{"polluted":1},"a":2},"__proto__":[1]}') as unknown;
    expect(canonicalJson(value)).toBe('{"__proto__":[1],"b":{"__proto__":{"polluted":1},"a":2}}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('follows JSON.stringify for toJSON and boxed primitives; refuses a value with no JSON form', () => {
    expect(
      canonicalJson({ at: new Date('2026-01-01T00:00:00Z'), n: Object(5) as unknown, s: Object('ab') as unknown }),
    ).toBe('{"at":"2026-01-01T00:00:00.000Z","n":5,"s":"ab"}');
    expect(canonicalJson({ 1: new Date(0) })).toBe('{"1":"1970-01-01T00:00:00.000Z"}');
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
    expect(() => canonicalJson(() => 1)).toThrow(TypeError);
  });
});
