// Amazon Bedrock (and Claude on AWS, served through it): a Bedrock API key, or IAM access keys with their region,
// which the gateway signs each call with (AWS Signature Version 4).

import { bearer } from './plain.ts';
import type { PayloadShapeModule } from './shape.ts';
import { compileSchema, fillTemplate, NO_SPACE, plainKeyOrObject, runSchema, stringField } from './validation.ts';

export interface BedrockKeyPayload {
  kind: 'bedrock-key';
  /** A Bedrock API key; tied to the region it was issued in. */
  apiKey: string;
}

export interface BedrockIamPayload {
  kind: 'bedrock-iam';
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

export type BedrockFacts = { kind: 'bedrock-key' } | { kind: 'bedrock-iam'; region: string };

const validateIam = compileSchema({
  type: 'object',
  required: ['accessKeyId', 'secretAccessKey', 'region'],
  additionalProperties: false,
  properties: {
    accessKeyId: { type: 'string', minLength: 1, pattern: '^[A-Z0-9]{16,128}$' },
    secretAccessKey: { type: 'string', minLength: 1, pattern: NO_SPACE },
    region: { type: 'string', minLength: 1, pattern: '^[a-z]{2}(-[a-z]+)+-[0-9]+$' },
  },
});

const RULES = {
  accessKeyId: 'must be an AWS access key id (16 to 128 upper-case letters and digits)',
  secretAccessKey: 'must not contain whitespace',
  region: 'must be an AWS region id such as us-east-1',
};

export const bedrockShape: PayloadShapeModule<BedrockKeyPayload | BedrockIamPayload, BedrockFacts> = {
  kinds: ['bedrock-key', 'bedrock-iam'],
  takesJson: true,
  validate({ text, looksJson }, errors) {
    const form = plainKeyOrObject(text, looksJson, '{accessKeyId, secretAccessKey, region}', errors);
    if (form === null) return null;
    if ('key' in form) return { kind: 'bedrock-key', apiKey: form.key };
    const v = form.object;
    if (!runSchema(validateIam, v, '', RULES, errors)) return null;
    return {
      kind: 'bedrock-iam',
      accessKeyId: v['accessKeyId'] as string,
      secretAccessKey: v['secretAccessKey'] as string,
      region: v['region'] as string,
    };
  },
  labelField: (document) => stringField(document, 'accessKeyId'),
  upstream(payload, spec) {
    if (payload.kind === 'bedrock-key') {
      // An API key carries no region: the catalog's default one.
      return {
        url: { chat: fillTemplate(spec.baseUrl, { region: spec.defaultRegion }) },
        model: spec.model,
        auth: bearer(payload.apiKey),
      };
    }
    const { region, accessKeyId, secretAccessKey } = payload;
    return {
      url: { chat: fillTemplate(spec.baseUrl, { region }) },
      model: spec.model,
      auth: { kind: 'aws-sigv4', service: 'bedrock', region, accessKeyId, secretAccessKey },
    };
  },
  facts: (payload) =>
    payload.kind === 'bedrock-key' ? { kind: 'bedrock-key' } : { kind: 'bedrock-iam', region: payload.region },
  secret: (payload) =>
    payload.kind === 'bedrock-key'
      ? { kind: 'api-key', apiKey: payload.apiKey }
      : { kind: 'aws-access-keys', accessKeyId: payload.accessKeyId, secretAccessKey: payload.secretAccessKey },
};
