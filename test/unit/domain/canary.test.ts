// Canary: a distinctive string in every secret field of every payload shape, run through every validator, label and
// error path. It must never appear in an error, and a label may show at most its masked snippet.
import { describe, expect, test } from '@jest/globals';
import { describePayloadIssues, maskLabel, PROVIDER_SLUGS, validatePayload } from '../../../src/domain/index.ts';
import { SA } from '../../support/fixtures/domain.ts';

const CANARY = 'CANARY-7f3a9c-SECRET';
const url = 'https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=1';

/** Every 5-character window of the canary: a label reveals at most 3 + 4 characters, never 5 in a row. */
const WINDOWS = Array.from({ length: CANARY.length - 4 }, (_, i) => CANARY.slice(i, i + 5));

function leaks(text: string): string | undefined {
  return WINDOWS.find((w) => text.includes(w));
}

const j = (v: unknown): string => JSON.stringify(v);

// Valid and invalid payloads of every shape, each carrying the canary in its secret fields.
const PAYLOADS: string[] = [
  CANARY,
  `${CANARY}\n${CANARY}`,
  ` ${CANARY} `,
  `{${CANARY}`,
  `[${CANARY}`,
  `{"api_key": "${CANARY}", region: ${CANARY}}`,
  j({ api_key: CANARY, region: 'eu' }),
  j({ api_key: `${CANARY} x`, region: CANARY }),
  j({ api_key: CANARY, [CANARY]: CANARY }),
  j({ [`${CANARY}`]: 'v', [`x${CANARY.toLowerCase()}`]: 1 }),
  j({ accessKeyId: CANARY, secretAccessKey: CANARY, region: CANARY }),
  j({ accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: `${CANARY} ${CANARY}`, region: 'us-east-1' }),
  j({ accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: CANARY, region: 'us-east-1' }),
  j({ accessKeyId: 5, secretAccessKey: [CANARY], region: { r: CANARY } }),
  j([{ api_key: CANARY, resource_name: CANARY, resource_type: CANARY }]),
  j([{ api_key: CANARY, resource_name: 'res' }]),
  j([{ api_key: `${CANARY} `, model_slug: CANARY, endpoint_url: `${url}&x=${CANARY}`, model_id: CANARY }]),
  j([
    {
      api_key: CANARY,
      model_slug: 'a/b',
      endpoint_url: `https://${CANARY.toLowerCase()}.example/${CANARY}`,
      model_id: 'm',
    },
  ]),
  j([
    {
      api_key: CANARY,
      model_slug: 'a/b',
      endpoint_url: `https://user:${CANARY}@r.example/chat/completions?api-version=1`,
      model_id: 'm',
    },
  ]),
  j([CANARY, { [CANARY]: CANARY }]),
  j({ ...SA, private_key: CANARY, private_key_id: CANARY }),
  j({
    ...SA,
    private_key: `-----BEGIN PRIVATE KEY-----\n${CANARY}\n-----END PRIVATE KEY-----\n`,
    private_key_id: 'abcdef0123456789',
  }),
  j({
    ...SA,
    private_key_id: `${CANARY}`,
    client_email: CANARY,
    client_id: CANARY,
    token_uri: CANARY,
    bucket: `gs://${CANARY}/x`,
  }),
  j({
    ...SA,
    private_key: `-----BEGIN PRIVATE KEY-----\n${CANARY}\n-----END PRIVATE KEY-----`,
    region: CANARY,
    bucket: CANARY,
  }),
  j({ ...SA, type: CANARY, project_id: CANARY }),
  j({ type: 'service_account', private_key: CANARY }),
];

describe('canary: secrets never reach an error or a label', () => {
  test.each(PAYLOADS.map((p, i) => [i, p] as const))('payload #%i', (_i, payload) => {
    for (const provider of PROVIDER_SLUGS) {
      const result = validatePayload(provider, payload);
      if (!result.ok) {
        for (const e of result.errors) {
          expect(leaks(e.field)).toBeUndefined();
          expect(leaks(e.message)).toBeUndefined();
        }
        expect(leaks(describePayloadIssues(result.errors))).toBeUndefined();
        expect(leaks(JSON.stringify(result))).toBeUndefined();
      }
      const label = maskLabel(provider, payload);
      expect(label.length).toBeGreaterThan(0);
      expect(leaks(label)).toBeUndefined();
    }
  });

  test('the canary corpus exercises both valid and invalid outcomes', () => {
    const outcomes = new Set(PAYLOADS.flatMap((p) => PROVIDER_SLUGS.map((s) => validatePayload(s, p).ok)));
    expect(outcomes).toEqual(new Set([true, false]));
  });
});
