// The table of payload shapes: every provider's shape is in it, every parsed kind has exactly one owner, and the
// entry points (validatePayload, maskLabel, shapeOfPayload) go through it.
import { describe, expect, test } from '@jest/globals';
import {
  maskLabel,
  PAYLOAD_SHAPES,
  type PayloadShape,
  PROVIDER_SLUGS,
  type ProviderPayload,
  payloadShapeFor,
  shapeOfPayload,
  validatePayload,
} from '../../../../src/domain/index.ts';
import { SA } from './spec.ts';

const SAMPLES: Record<PayloadShape, { provider: (typeof PROVIDER_SLUGS)[number]; raw: string }> = {
  plain: { provider: 'anthropic', raw: 'sk-ant-api03-0123456789AbCd' },
  'api-key-or-region': { provider: 'openai', raw: '{"api_key":"sk-proj-0123456789xyZW","region":"eu"}' },
  azure: { provider: 'azure', raw: '[{"api_key":"azure-key-0123456789","resource_name":"res1"}]' },
  bedrock: {
    provider: 'amazon-bedrock',
    raw: '{"accessKeyId":"AKIAIOSFODNN7EXAMPLE","secretAccessKey":"wJalrXUtnFEMI","region":"us-east-1"}',
  },
  vertex: { provider: 'google-vertex', raw: JSON.stringify(SA) },
};

describe('the payload shape table', () => {
  test('every provider takes a shape the table lists', () => {
    for (const provider of PROVIDER_SLUGS) expect(Object.keys(PAYLOAD_SHAPES)).toContain(payloadShapeFor(provider));
  });
  test('every parsed kind is owned by exactly one shape', () => {
    const kinds = Object.values(PAYLOAD_SHAPES).flatMap((s) => [...s.kinds]);
    expect(new Set(kinds).size).toBe(kinds.length);
    expect([...kinds].sort()).toEqual(['api-key', 'api-key-region', 'azure', 'bedrock-iam', 'bedrock-key', 'vertex']);
  });
  test.each(Object.keys(SAMPLES) as PayloadShape[])(
    '%s: validation, label and the owner of the parsed payload go through its module',
    (shape) => {
      const { provider, raw } = SAMPLES[shape];
      expect(payloadShapeFor(provider)).toBe(shape);
      const result = validatePayload(provider, raw);
      if (!result.ok) throw new Error(JSON.stringify(result.errors));
      const payload: ProviderPayload = result.payload;
      expect(PAYLOAD_SHAPES[shape].kinds as readonly string[]).toContain(payload.kind);
      expect(shapeOfPayload(payload)).toBe(PAYLOAD_SHAPES[shape]);
      const label = maskLabel(provider, raw);
      expect(label).toContain('...');
      expect(raw).not.toBe(label);
    },
  );
  test('a plain key given to an api-key-or-region provider is owned by the plain shape', () => {
    const result = validatePayload('openai', 'sk-1');
    if (!result.ok) throw new Error('expected ok');
    expect(shapeOfPayload(result.payload)).toBe(PAYLOAD_SHAPES.plain);
  });
});
