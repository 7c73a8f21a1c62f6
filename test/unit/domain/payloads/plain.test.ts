// The plain API key shape: validation, label, upstream plan, export facts and Secret material in one place.
import { describe, expect, test } from '@jest/globals';
import { plainShape } from '../../../../src/domain/payloads/plain.ts';
import { SPEC, validateWith } from './spec.ts';

describe('plain API key shape', () => {
  test('takes one trimmed line and refuses JSON, empty text and control characters', () => {
    expect(validateWith(plainShape, ' sk-ant-123\n').payload).toEqual({ kind: 'api-key', apiKey: 'sk-ant-123' });
    expect(validateWith(plainShape, '{"api_key":"x"}').errors).toEqual([
      { field: '', message: 'must be a plain API key string; this provider does not take a JSON payload' },
    ]);
    expect(validateWith(plainShape, '').errors).toEqual([{ field: '', message: 'must not be empty' }]);
    expect(validateWith(plainShape, 'a\u0007b').payload).toBeNull();
  });
  test('takes no JSON, so the label masks the whole text and no field is named', () => {
    expect(plainShape.takesJson).toBe(false);
    expect(plainShape.labelField({ api_key: 'sk-123' })).toBeNull();
  });
  test('sends the key as a bearer token to the catalog base URL with the catalog model', () => {
    expect(plainShape.upstream({ kind: 'api-key', apiKey: 'sk-1' }, SPEC, 'acme/chat')).toEqual({
      url: { chat: SPEC.baseUrl },
      model: 'upstream-model',
      auth: { kind: 'header', name: 'authorization', value: 'Bearer sk-1' },
    });
  });
  test('exports no facts beyond its kind, and the key as the Secret material', () => {
    expect(plainShape.facts({ kind: 'api-key', apiKey: 'sk-1' })).toEqual({ kind: 'api-key' });
    expect(plainShape.secret({ kind: 'api-key', apiKey: 'sk-1' })).toEqual({ kind: 'api-key', apiKey: 'sk-1' });
  });
});
