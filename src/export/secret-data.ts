// The content of a derived Secret: a credential's key material (named by its payload shape, domain/payloads/) under
// the key names the target reads (src/export/envoy.ts and agentgateway.ts name the keys). This is the one function
// of the export that handles key material; the export command never calls it (it writes no Secret). It is what the
// in-cluster export controller would write, and what a platform writing the Secrets itself must produce.
import { type ProviderPayload, shapeOfPayload } from '../domain/payloads.ts';
import type { ExportTarget } from './types.ts';

/** Secret `data` as strings (the caller base64-encodes or uses stringData), keyed as the target reads them. */
export function derivedSecretData(
  target: ExportTarget,
  payload: ProviderPayload,
  part?: string,
): Record<string, string> {
  const material = shapeOfPayload(payload).secret(payload, part);
  switch (material.kind) {
    case 'api-key':
      return { apiKey: material.apiKey };
    case 'aws-access-keys':
      return target === 'envoy-ai-gateway'
        ? // The AWS shared-credentials file Envoy AI Gateway reads from the key `credentials`.
          {
            credentials: `[default]\naws_access_key_id = ${material.accessKeyId}\naws_secret_access_key = ${material.secretAccessKey}\n`,
          }
        : { accessKey: material.accessKeyId, secretKey: material.secretAccessKey };
    case 'google-service-account':
      return { [target === 'envoy-ai-gateway' ? 'service_account.json' : 'credentials.json']: material.document };
  }
}
