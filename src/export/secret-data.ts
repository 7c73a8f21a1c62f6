// The content of a derived Secret: a credential's payload in the shape the target reads (src/export/envoy.ts and
// agentgateway.ts name the keys). This is the one function of the export that handles key material; the export
// command never calls it (it writes no Secret). It is what the in-cluster export controller would write, and what a
// platform writing the Secrets itself must produce.
import type { ProviderPayload } from '../domain/payloads.ts';
import type { ExportTarget } from './types.ts';

/** Secret `data` as strings (the caller base64-encodes or uses stringData), keyed as the target reads them. */
export function derivedSecretData(target: ExportTarget, payload: ProviderPayload, part?: string): Record<string, string> {
  switch (payload.kind) {
    case 'api-key':
    case 'api-key-region':
    case 'bedrock-key':
      return { apiKey: payload.apiKey };
    case 'azure': {
      // One Secret per entry: `resource <resource_name>` or `deployment <model_slug>` (plan.ts names the parts).
      const entry = payload.entries.find((e) => (e.type === 'resource' ? `resource ${e.resource_name}` : `deployment ${e.model_slug}`) === part);
      if (entry === undefined) throw new RangeError(`no Azure entry ${part ?? '(none named)'} in the payload`);
      return { apiKey: entry.api_key };
    }
    case 'bedrock-iam':
      return target === 'envoy-ai-gateway'
        ? // The AWS shared-credentials file Envoy AI Gateway reads from the key `credentials`.
          { credentials: `[default]\naws_access_key_id = ${payload.accessKeyId}\naws_secret_access_key = ${payload.secretAccessKey}\n` }
        : { accessKey: payload.accessKeyId, secretKey: payload.secretAccessKey };
    case 'vertex':
      // The key document as Google issued it: our `region` and `bucket` fields are already taken out.
      return { [target === 'envoy-ai-gateway' ? 'service_account.json' : 'credentials.json']: JSON.stringify(payload.serviceAccount) };
  }
}
