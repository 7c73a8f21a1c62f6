// The only place a payload is read: it is reduced at once to the facts routing needs (shape, region, project,
// Azure resources and deployments). Keys, secret access keys and private keys stay behind.
import type { ProviderPayload } from '../domain/payloads.ts';
import type { CredentialFacts } from './types.ts';

export function payloadFacts(payload: ProviderPayload): CredentialFacts {
  switch (payload.kind) {
    case 'api-key':
      return { kind: 'api-key' };
    case 'api-key-region':
      return { kind: 'api-key-region', region: payload.region };
    case 'bedrock-key':
      return { kind: 'bedrock-key' };
    case 'bedrock-iam':
      return { kind: 'bedrock-iam', region: payload.region };
    case 'vertex':
      return { kind: 'vertex', projectId: payload.projectId, region: payload.region };
    case 'azure':
      return {
        kind: 'azure',
        entries: payload.entries.map((e) =>
          e.type === 'resource'
            ? { type: 'resource', resourceName: e.resource_name, resourceType: e.resource_type }
            : { type: 'deployment', modelSlug: e.model_slug, endpointUrl: e.endpoint_url, modelId: e.model_id },
        ),
      };
  }
}
