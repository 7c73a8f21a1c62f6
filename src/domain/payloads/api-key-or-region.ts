// A plain API key, or `{api_key, region}` for providers with regional hosts (OpenAI's data residency, Fireworks):
// the region picks the catalog endpoint's regional base URL.

import { type ApiKeyFacts, type ApiKeyPayload, bearer, plainShape } from './plain.ts';
import type { PayloadShapeModule } from './shape.ts';
import { compileSchema, NO_SPACE, plainKeyOrObject, runSchema, stringField } from './validation.ts';

export interface ApiKeyRegionPayload {
  kind: 'api-key-region';
  apiKey: string;
  region: string;
}

export type ApiKeyRegionFacts = { kind: 'api-key-region'; region: string };

const validateApiKeyRegion = compileSchema({
  type: 'object',
  required: ['api_key', 'region'],
  additionalProperties: false,
  properties: {
    api_key: { type: 'string', minLength: 1, pattern: NO_SPACE },
    region: { type: 'string', minLength: 1, pattern: '^[a-z0-9]+(-[a-z0-9]+)*$' },
  },
});

const RULES = {
  api_key: 'must not contain whitespace',
  region: 'must be a region identifier (lower-case letters, digits, hyphens)',
};

export const apiKeyOrRegionShape: PayloadShapeModule<
  ApiKeyPayload | ApiKeyRegionPayload,
  ApiKeyFacts | ApiKeyRegionFacts
> = {
  kinds: ['api-key-region'],
  takesJson: true,
  validate({ text, looksJson }, errors) {
    const form = plainKeyOrObject(text, looksJson, '{api_key, region}', errors);
    if (form === null) return null;
    if ('key' in form) return { kind: 'api-key', apiKey: form.key };
    const v = form.object;
    if (!runSchema(validateApiKeyRegion, v, '', RULES, errors)) return null;
    return { kind: 'api-key-region', apiKey: v['api_key'] as string, region: v['region'] as string };
  },
  labelField: (document) => stringField(document, 'api_key'),
  upstream(payload, spec, modelSlug) {
    if (payload.kind === 'api-key') return plainShape.upstream(payload, spec, modelSlug);
    const base = spec.regionalBaseUrls[payload.region];
    if (base === undefined)
      return { problem: `the catalog has no base URL for region ${payload.region} of this endpoint` };
    return { url: { chat: base.replace(/\/+$/, '') }, model: spec.model, auth: bearer(payload.apiKey) };
  },
  facts: (payload) =>
    payload.kind === 'api-key' ? { kind: 'api-key' } : { kind: 'api-key-region', region: payload.region },
  secret: (payload) => ({ kind: 'api-key', apiKey: payload.apiKey }),
};
