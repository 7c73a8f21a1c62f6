// The Azure shape: resource configs and per-deployment configs, each with its own api-key.
import { describe, expect, test } from '@jest/globals';
import { type AzurePayload, azureShape } from '../../../../src/domain/payloads/azure.ts';
import { SPEC, validateWith } from './spec.ts';

const DEPLOYMENT_URL = 'https://res1.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21';
const PAYLOAD: AzurePayload = {
  kind: 'azure',
  entries: [
    { type: 'resource', api_key: 'az-resource-key', resource_name: 'team-foundry', resource_type: 'ai_foundry' },
    {
      type: 'deployment',
      api_key: 'az-deploy-key',
      model_slug: 'openai/gpt-4o',
      endpoint_url: DEPLOYMENT_URL,
      model_id: 'gpt4o',
    },
  ],
};

describe('azure shape', () => {
  test('takes an array of resource and deployment configs; errors name the entry, the field and the rule', () => {
    const raw = JSON.stringify(PAYLOAD.entries.map(({ type: _type, ...e }) => e));
    expect(validateWith(azureShape, raw).payload).toEqual(PAYLOAD);
    expect(validateWith(azureShape, '[{"api_key":"k","resource_name":"https://x.openai.azure.com"}]').errors).toEqual([
      {
        field: '[0].resource_name',
        message: 'must be the Azure resource subdomain name (letters, digits and hyphens), not a URL',
      },
    ]);
    expect(validateWith(azureShape, '[]').errors).toEqual([{ field: '', message: 'must contain at least one entry' }]);
    const internal = [
      {
        api_key: 'k',
        model_slug: 'a/b',
        endpoint_url: 'https://10.0.0.1/chat/completions?api-version=1',
        model_id: 'm',
      },
    ];
    expect(validateWith(azureShape, JSON.stringify(internal)).errors.map((e) => e.field)).toEqual(['[0].endpoint_url']);
  });
  test('its label masks the first api_key', () => {
    expect(azureShape.labelField([{ resource_name: 'r' }, { api_key: 'second' }, { api_key: 'third' }])).toBe('second');
    expect(azureShape.labelField({ api_key: 'not-an-array' })).toBeNull();
  });
  test('a deployment of the model is called at its own URL (a tenant URL); otherwise the first resource config', () => {
    expect(azureShape.upstream(PAYLOAD, SPEC, 'openai/gpt-4o')).toEqual({
      url: { full: DEPLOYMENT_URL },
      model: 'gpt4o',
      auth: { kind: 'header', name: 'api-key', value: 'az-deploy-key' },
      tenantUrl: true,
    });
    expect(azureShape.upstream(PAYLOAD, SPEC, 'openai/gpt-5')).toEqual({
      url: { chat: 'https://team-foundry.services.ai.azure.com/openai/v1' },
      model: 'upstream-model',
      auth: { kind: 'header', name: 'api-key', value: 'az-resource-key' },
    });
    expect(azureShape.upstream({ kind: 'azure', entries: [PAYLOAD.entries[1]!] }, SPEC, 'openai/gpt-5')).toEqual({
      problem: 'no Azure deployment or resource config serves openai/gpt-5',
    });
  });
  test('exports each entry without its key as a fact, and one Secret per entry', () => {
    expect(azureShape.facts(PAYLOAD)).toEqual({
      kind: 'azure',
      entries: [
        { type: 'resource', resourceName: 'team-foundry', resourceType: 'ai_foundry' },
        { type: 'deployment', modelSlug: 'openai/gpt-4o', endpointUrl: DEPLOYMENT_URL, modelId: 'gpt4o' },
      ],
    });
    expect(azureShape.secret(PAYLOAD, 'deployment openai/gpt-4o')).toEqual({
      kind: 'api-key',
      apiKey: 'az-deploy-key',
    });
    expect(azureShape.secret(PAYLOAD, 'resource team-foundry')).toEqual({ kind: 'api-key', apiKey: 'az-resource-key' });
    expect(() => azureShape.secret(PAYLOAD, 'resource nope')).toThrow(RangeError);
  });
});
