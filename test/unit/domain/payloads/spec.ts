// A catalog upstream with every template a shape fills, and the input a shape's validator is given.
import type { UpstreamSpec } from '../../../../src/domain/catalog.ts';
import { NO_EGRESS_EXCEPTIONS } from '../../../../src/domain/egress.ts';
import type { PayloadIssue } from '../../../../src/domain/errors.ts';
import type { PayloadShapeModule } from '../../../../src/domain/payloads/shape.ts';

export const SPEC: UpstreamSpec = {
  api: 'openai-chat',
  baseUrl: 'https://api.example.test/v1',
  model: 'upstream-model',
  regionalBaseUrls: { eu: 'https://eu.api.example.test/v1/' },
  defaultRegion: 'us-east-1',
  azureOpenAiUrl: 'https://{resource_name}.openai.azure.com/openai/v1',
  azureFoundryUrl: 'https://{resource_name}.services.ai.azure.com/openai/v1',
};

/** Runs a shape's validator on `text` as validatePayload would (trimmed, JSON sniffed, no egress exceptions). */
export function validateWith<P extends { kind: string }>(
  shape: PayloadShapeModule<P, { kind: string }>,
  raw: string,
): { payload: P | null; errors: PayloadIssue[] } {
  const text = raw.trim();
  const errors: PayloadIssue[] = [];
  const payload = shape.validate(
    { text, looksJson: text.startsWith('{') || text.startsWith('['), egress: NO_EGRESS_EXCEPTIONS },
    errors,
  );
  return { payload, errors };
}

/** A Google service-account key document, as issued (the Vertex shape's input). */
export const SA = {
  type: 'service_account',
  project_id: 'my-project-123',
  private_key_id: '0123456789abcdef0123456789abcdef01234567',
  private_key: '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n',
  client_email: 'router@my-project-123.iam.gserviceaccount.com',
  client_id: '112233445566778899001',
  auth_uri: 'https://accounts.google.com/o/oauth2/auth',
  token_uri: 'https://oauth2.googleapis.com/token',
  auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
  client_x509_cert_url:
    'https://www.googleapis.com/robot/v1/metadata/x509/router%40my-project-123.iam.gserviceaccount.com',
  universe_domain: 'googleapis.com',
};
