// The OpenAPI document and the server must agree: every pattern the document publishes accepts exactly what
// the server's own rule accepts, on hand-picked edge cases and on random strings.
import { describe, expect, test } from '@jest/globals';
import { buildOpenApiDocument } from '../../../src/api/openapi.ts';
import { MODEL_SLUG_PATTERN, validateFilterShape } from '../../../src/domain/filters.ts';
import { PLAIN_KEY_PATTERN, validatePayload } from '../../../src/domain/payloads.ts';

const EDGE = [
  '',
  ' ',
  'a',
  ' a ',
  'sk-abc',
  'sk-abc\n',
  '\tsk-abc\r\n',
  'sk\nabc',
  'sk\u0000abc',
  'sk\u007fabc',
  '{"a":1}',
  ' [1]',
  'a{b',
  '\u00a0sk\u00a0',
  'sk abc',
  'openai/gpt-4o',
  '/gpt',
  'openai/',
  'open ai/gpt',
  'openai/gpt 4',
  'a/b/c',
  ' openai/gpt',
  'openai/gpt\n',
];

function randomString(seed: number): string {
  const alphabet = [
    'a',
    'Z',
    '0',
    '/',
    ' ',
    '\t',
    '\n',
    '\u0000',
    '\u000b',
    '\u001f',
    '\u007f',
    '\u0085',
    '\u0096',
    '{',
    '[',
    '-',
    '\u00a0',
    '\u2028',
    '\u3000',
    '\ufdd0',
    '\ufffd',
    '\uffff',
    'é',
  ];
  let s = '';
  let x = seed;
  const len = seed % 9;
  for (let i = 0; i < len; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    s += alphabet[x % alphabet.length];
  }
  return s;
}

const samples = [...EDGE, ...Array.from({ length: 5000 }, (_, i) => randomString(i + 1))];

describe('published patterns agree with the server', () => {
  test('PLAIN_KEY_PATTERN ⇔ validatePayload for a plain-key provider', () => {
    const re = new RegExp(PLAIN_KEY_PATTERN);
    const disagree = samples.filter((v) => re.test(v) !== validatePayload('groq', v).ok);
    expect(disagree.map((v) => JSON.stringify(v))).toEqual([]);
  });

  test('MODEL_SLUG_PATTERN ⇔ the allowed_models entry rule', () => {
    const re = new RegExp(MODEL_SLUG_PATTERN);
    const disagree = samples.filter((v) => re.test(v) !== (validateFilterShape('allowed_models', [v]).length === 0));
    expect(disagree.map((v) => JSON.stringify(v))).toEqual([]);
  });

  test('the served document carries them, and integer-only list parameters', () => {
    const doc = JSON.stringify(buildOpenApiDocument());
    expect(doc).toContain(JSON.stringify(MODEL_SLUG_PATTERN));
    expect(doc).toContain(JSON.stringify(PLAIN_KEY_PATTERN));
    const params =
      (
        buildOpenApiDocument() as {
          paths: Record<
            string,
            { get?: { parameters?: { name: string; schema: { type: unknown; maximum?: number } }[] } }
          >;
        }
      ).paths['/byok']?.get?.parameters ?? [];
    expect(params.find((p) => p.name === 'offset')?.schema).toMatchObject({
      type: 'integer',
      maximum: Number.MAX_SAFE_INTEGER,
    });
    expect(params.find((p) => p.name === 'limit')?.schema.type).toBe('integer');
  });
});
