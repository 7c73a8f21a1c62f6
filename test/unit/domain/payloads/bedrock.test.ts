// The Bedrock shape: an API key (bearer, default region) or IAM access keys (SigV4, their own region).
import { describe, expect, test } from '@jest/globals';
import { bedrockShape } from '../../../../src/domain/payloads/bedrock.ts';
import { SPEC, validateWith } from './spec.ts';

const BEDROCK_SPEC = { ...SPEC, baseUrl: 'https://bedrock-runtime.{region}.amazonaws.com/openai/v1' };
const IAM = {
  kind: 'bedrock-iam',
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG',
  region: 'eu-west-1',
} as const;

describe('bedrock shape', () => {
  test('takes an API key or {accessKeyId, secretAccessKey, region}; errors name the field and the rule', () => {
    expect(validateWith(bedrockShape, 'ABSK-key').payload).toEqual({ kind: 'bedrock-key', apiKey: 'ABSK-key' });
    const { kind: _kind, ...iam } = IAM;
    expect(validateWith(bedrockShape, JSON.stringify(iam)).payload).toEqual(IAM);
    expect(
      validateWith(bedrockShape, JSON.stringify({ ...iam, accessKeyId: 'akia', region: 'Europe' })).errors,
    ).toEqual([
      { field: 'accessKeyId', message: 'must be an AWS access key id (16 to 128 upper-case letters and digits)' },
      { field: 'region', message: 'must be an AWS region id such as us-east-1' },
    ]);
  });
  test('its label masks the access key id, never the secret access key', () => {
    expect(bedrockShape.labelField({ accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 's' })).toBe(
      'AKIAIOSFODNN7EXAMPLE',
    );
  });
  test('an API key goes to the default region as a bearer token; IAM keys are signed for their own region', () => {
    expect(bedrockShape.upstream({ kind: 'bedrock-key', apiKey: 'ABSK-key' }, BEDROCK_SPEC, 'acme/chat')).toEqual({
      url: { chat: 'https://bedrock-runtime.us-east-1.amazonaws.com/openai/v1' },
      model: 'upstream-model',
      auth: { kind: 'header', name: 'authorization', value: 'Bearer ABSK-key' },
    });
    expect(bedrockShape.upstream(IAM, BEDROCK_SPEC, 'acme/chat')).toEqual({
      url: { chat: 'https://bedrock-runtime.eu-west-1.amazonaws.com/openai/v1' },
      model: 'upstream-model',
      auth: {
        kind: 'aws-sigv4',
        service: 'bedrock',
        region: 'eu-west-1',
        accessKeyId: IAM.accessKeyId,
        secretAccessKey: IAM.secretAccessKey,
      },
    });
  });
  test('exports the region of IAM keys as a fact, and the keys as the Secret material', () => {
    expect(bedrockShape.facts(IAM)).toEqual({ kind: 'bedrock-iam', region: 'eu-west-1' });
    expect(bedrockShape.facts({ kind: 'bedrock-key', apiKey: 'k' })).toEqual({ kind: 'bedrock-key' });
    expect(bedrockShape.secret(IAM)).toEqual({
      kind: 'aws-access-keys',
      accessKeyId: IAM.accessKeyId,
      secretAccessKey: IAM.secretAccessKey,
    });
    expect(bedrockShape.secret({ kind: 'bedrock-key', apiKey: 'k' })).toEqual({ kind: 'api-key', apiKey: 'k' });
  });
});
