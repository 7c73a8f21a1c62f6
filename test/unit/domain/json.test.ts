// Untrusted JSON at every door: strict UTF-8 with the byte offset, a depth limit before parsing,
// no __proto__ key however it is spelled.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import {
  exceedsDepth,
  invalidUtf8Offset,
  MAX_JSON_DEPTH,
  parseUntrustedJson,
  UntrustedJsonError,
} from '../../../src/domain/json.ts';
import { propertyRuns } from '../../support/properties.ts';

const problem = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    if (err instanceof UntrustedJsonError) return err.problem;
    throw err;
  }
  return undefined;
};

describe('parseUntrustedJson', () => {
  test('invalid UTF-8 is refused with the offset of the first bad byte', () => {
    const bytes = Buffer.concat([Buffer.from('{"name":"ab'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    expect(problem(() => parseUntrustedJson(bytes))).toEqual({
      code: 'invalid_utf8',
      byteOffset: 11,
      message: 'the request body is not valid UTF-8 (byte 11)',
    });
    for (const bad of [
      [0xff],
      [0xc0, 0x80],
      [0xe0, 0x80, 0x80],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xe2, 0x82],
    ]) {
      expect(invalidUtf8Offset(Uint8Array.from([0x61, ...bad]))).toBe(1);
    }
  });

  test('agrees with the standard decoder on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => {
        let valid = true;
        try {
          new TextDecoder('utf-8', { fatal: true }).decode(bytes);
        } catch {
          valid = false;
        }
        expect(invalidUtf8Offset(bytes) < 0).toBe(valid);
      }),
      { numRuns: propertyRuns(2000) },
    );
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => expect(invalidUtf8Offset(Buffer.from(s, 'utf8'))).toBe(-1)),
    );
  });

  test(`nesting past ${MAX_JSON_DEPTH} is refused before parsing; brackets inside strings do not count`, () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    expect(parseUntrustedJson(deep(MAX_JSON_DEPTH))).toBeDefined();
    expect(problem(() => parseUntrustedJson(deep(MAX_JSON_DEPTH + 1)))).toMatchObject({ code: 'too_deep' });
    expect(problem(() => parseUntrustedJson(`{"messages":${deep(100_000)}}`))).toMatchObject({ code: 'too_deep' });
    expect(exceedsDepth(`{"a":"${'['.repeat(500)}\\"["}`, 2)).toBe(false);
  });

  test('a __proto__ key is refused at any depth and in any spelling; constructor data is just data', () => {
    for (const text of [
      '{"__proto__":{"x":1}}',
      '{"a":[{"b":{"__proto__":1}}]}',
      '{"\\u005f\\u005fproto\\u005f\\u005f":{"disabled":true}}',
    ]) {
      expect(problem(() => parseUntrustedJson(text))).toMatchObject({ code: 'forbidden_key' });
    }
    expect(parseUntrustedJson('{"note":"__proto__ in a value is fine"}')).toEqual({
      note: '__proto__ in a value is fine',
    });
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  test('malformed JSON is named without quoting the input', () => {
    expect(problem(() => parseUntrustedJson('{"key":"sk-secret-value'))).toEqual({
      code: 'malformed',
      message: 'the request body is not valid JSON',
    });
  });
});
