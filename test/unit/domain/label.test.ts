// The masked label: examples per payload shape and the share-of-secret property.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { LABEL_ELLIPSIS, maskLabel, maskSecret, maxRevealed, type ProviderSlug } from '../../../src/domain/index.ts';
import { SA } from '../../support/fixtures/domain.ts';
import { propertyRuns } from '../../support/properties.ts';

/** How many characters of `secret` the label shows, checking that they are a prefix plus a suffix. */
function revealed(secret: string, label: string): number {
  // eslint-disable-next-line no-control-regex
  const chars = Array.from(secret.trim().replace(/[\u0000-\u001f\u007f]/g, '?'));
  // The secret may itself contain dots, so try every place the ellipsis could sit.
  for (let at = label.indexOf(LABEL_ELLIPSIS); at >= 0; at = label.indexOf(LABEL_ELLIPSIS, at + 1)) {
    const head = Array.from(label.slice(0, at));
    const tail = Array.from(label.slice(at + LABEL_ELLIPSIS.length));
    const headOk = head.every((c, i) => chars[i] === c);
    const tailOk = tail.every((c, i) => chars[chars.length - tail.length + i] === c);
    if (headOk && tailOk) return head.length + tail.length;
  }
  throw new Error(`label ${JSON.stringify(label)} is not a prefix and suffix of the secret`);
}

describe('maskLabel', () => {
  test('a long key shows its first 3 and last 4 characters', () => {
    expect(maskLabel('anthropic', 'sk-ant-api03-0123456789AbCd')).toBe('sk-...AbCd');
    expect(maskLabel('openai', '  sk-proj-0123456789xyZW\n')).toBe('sk-...xyZW');
  });
  test('a short secret reveals at most a third of itself', () => {
    expect(maskLabel('mistral', 'abcdef')).toBe('a...f');
    expect(maskLabel('mistral', 'abc')).toBe('a...');
    expect(maskLabel('mistral', 'ab')).toBe('...');
    expect(maskLabel('mistral', '')).toBe('...');
    expect(maskLabel('mistral', 'x...')).toBe('...');
  });
  test('JSON payloads mask their identifying field', () => {
    expect(
      maskLabel(
        'amazon-bedrock',
        JSON.stringify({ accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 's', region: 'us-east-1' }),
      ),
    ).toBe('AKI...PLE');
    expect(
      maskLabel(
        'azure',
        JSON.stringify([
          { resource_name: 'r' },
          { api_key: 'azure-key-00000001XyZw', resource_name: 'r' },
          { api_key: 'second-key-9999' },
        ]),
      ),
    ).toBe('azu...XyZw');
    expect(maskLabel('google-vertex', JSON.stringify(SA))).toBe('012...4567');
    expect(maskLabel('fireworks', JSON.stringify({ api_key: 'fw-abcdefghijklmnopqr', region: 'us' }))).toBe(
      'fw-...opqr',
    );
    expect(maskLabel('amazon-bedrock', 'ABSKQmVkcm9ja0FQSUtleQ==')).toBe('ABS...eQ==');
  });
  test('unparseable or incomplete JSON payloads still get a safe label', () => {
    expect(maskLabel('google-vertex', '{"private_key_id": "0123')).toBe('{...}');
    expect(maskLabel('azure', '[{"api_key": 5}]')).toBe('[...]');
    expect(maskLabel('amazon-bedrock', '{}')).toBe('{...}');
  });
  test('never throws, never empty, never the whole secret, at most a third revealed (property)', () => {
    const providers: ProviderSlug[] = ['anthropic', 'openai', 'amazon-bedrock', 'azure', 'google-vertex'];
    fc.assert(
      fc.property(fc.constantFrom(...providers), fc.string({ unit: 'binary', maxLength: 80 }), (provider, secret) => {
        const label = maskLabel(provider, secret);
        expect(label.length).toBeGreaterThan(0);
        if (secret.trim() !== '') expect(label).not.toBe(secret.trim());
        if (!/^[[{]/.test(secret.trim())) {
          expect(revealed(secret, label)).toBeLessThanOrEqual(maxRevealed(Array.from(secret.trim()).length));
        }
      }),
      { numRuns: propertyRuns(2000) },
    );
  });
  test('for JSON payloads the share is measured against the identifying field (property)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 60 }), fc.string(), (id, other) => {
        const label = maskLabel(
          'amazon-bedrock',
          JSON.stringify({ accessKeyId: id, secretAccessKey: other, region: 'us-east-1' }),
        );
        if (id.trim() === '') return;
        expect(revealed(id, label)).toBeLessThanOrEqual(maxRevealed(Array.from(id.trim()).length));
      }),
      { numRuns: propertyRuns(1000) },
    );
  });
  test('maskSecret counts code points, never splitting a surrogate pair', () => {
    const label = maskSecret('😀'.repeat(30));
    expect(label).toBe('😀😀😀...😀😀😀😀');
  });
});
