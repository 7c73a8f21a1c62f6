// Provider payloads (spec 2.4): a good and a bad example per shape and per rule.
import { describe, expect, test } from '@jest/globals';
import {
  type AzurePayload,
  azureDeploymentFor,
  batchBucketFor,
  bucketName,
  defaultBatchBucket,
  describePayloadIssues,
  OFFLINE_BUCKET_OWNERSHIP_CHECK,
  type PayloadResult,
  type ProviderPayload,
  type ProviderSlug,
  payloadShapeFor,
  type VertexPayload,
  validatePayload,
} from '../../../src/domain/index.ts';
import { SA } from '../../support/fixtures/domain.ts';

const DEPLOYMENT_URL = 'https://res1.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21';

function ok(r: PayloadResult): ProviderPayload {
  if (!r.ok) throw new Error(`expected ok, got ${describePayloadIssues(r.errors)}`);
  return r.payload;
}

function errors(provider: ProviderSlug, raw: string): string[] {
  const r = validatePayload(provider, raw);
  if (r.ok) throw new Error('expected errors');
  return r.errors.map((e) => `${e.field}: ${e.message}`);
}

// V8 reports a position for some syntax errors; only that number may be echoed.
const INVALID_JSON = /^: is not valid JSON( \(at character \d+\))?$/;
const json = (v: unknown): string => JSON.stringify(v);

describe('payload shapes per provider', () => {
  test.each([
    ['azure', 'azure'],
    ['amazon-bedrock', 'bedrock'],
    ['amazon-bedrock/claude-on-aws', 'bedrock'],
    ['claude-on-aws', 'bedrock'],
    ['google-vertex', 'vertex'],
    ['openai', 'api-key-or-region'],
    ['fireworks', 'api-key-or-region'],
    ['anthropic', 'plain'],
    ['anthropic/2', 'plain'],
    ['mistral', 'plain'],
  ] as const)('%s takes %s', (provider, shape) => {
    expect(payloadShapeFor(provider)).toBe(shape);
  });
});

describe('plain API key', () => {
  test('any non-empty string; surrounding whitespace (a trailing newline from a file) is removed', () => {
    expect(ok(validatePayload('anthropic', 'sk-ant-123\n'))).toEqual({ kind: 'api-key', apiKey: 'sk-ant-123' });
    expect(ok(validatePayload('mistral', 'x'))).toEqual({ kind: 'api-key', apiKey: 'x' });
  });
  test('empty or whitespace-only is rejected', () => {
    expect(errors('anthropic', '')).toEqual([': must not be empty']);
    expect(errors('anthropic', ' \n\t ')).toEqual([': must not be empty']);
  });
  test('control characters inside (two keys pasted on two lines) are rejected', () => {
    expect(errors('anthropic', 'sk-1\nsk-2')).toEqual([
      ': must be a single line without control characters; it contains a control character (U+000A) at position 4',
    ]);
  });
  test('C1 controls, separators and lone surrogates are rejected in any shape, naming the position, never the text', () => {
    expect(errors('anthropic', 'sk-ab\u0096cd')).toEqual([': contains a control character (U+0096) at position 5']);
    expect(errors('azure', '[{"api_key":"k\u2028"}]')).toEqual([
      ': contains a Unicode line or paragraph separator (U+2028) at position 14',
    ]);
    expect(errors('openai', 'sk-\ud800x')).toEqual([': contains an unpaired UTF-16 surrogate (U+D800) at position 3']);
    expect(errors('google-vertex', '{\n  "type": "service_account"\n}\u0000')[0]).toMatch(
      /control character \(U\+0000\)/,
    );
  });
  test('a JSON document for a plain-key provider is rejected', () => {
    expect(errors('anthropic', '{"api_key":"sk"}')[0]).toMatch(/plain API key/);
  });
  test('oversized payloads are rejected', () => {
    expect(errors('anthropic', 'a'.repeat(70_000))[0]).toMatch(/too long/);
  });
});

describe('OpenAI and Fireworks: plain key or {api_key, region}', () => {
  test.each(['openai', 'fireworks'] as const)('%s accepts both forms', (p) => {
    expect(ok(validatePayload(p, 'sk-proj-abc'))).toEqual({ kind: 'api-key', apiKey: 'sk-proj-abc' });
    expect(ok(validatePayload(p, json({ api_key: 'sk-proj-abc', region: 'eu' })))).toEqual({
      kind: 'api-key-region',
      apiKey: 'sk-proj-abc',
      region: 'eu',
    });
  });
  test('missing region, bad region, unknown field, wrong type, invalid JSON', () => {
    expect(errors('openai', json({ api_key: 'sk' }))).toEqual(['region: is required']);
    expect(errors('openai', json({ api_key: 'sk', region: 'EU West' }))).toEqual([
      'region: must be a region identifier (lower-case letters, digits, hyphens)',
    ]);
    expect(errors('openai', json({ api_key: 'sk', region: 'eu', project: 'p' }))).toEqual([
      'project: is not a recognised field',
    ]);
    expect(errors('fireworks', json({ api_key: 5, region: 'us' }))).toEqual(['api_key: must be a string']);
    expect(errors('fireworks', json(['sk']))).toEqual([': must be a plain API key or an object {api_key, region}']);
    expect(errors('openai', '{"api_key": "sk", region: eu}')[0]).toMatch(/^: is not valid JSON/);
  });
});

describe('Amazon Bedrock', () => {
  const iam = {
    accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
    secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    region: 'us-east-1',
  };
  test('a plain Bedrock API key (tied to one region)', () => {
    expect(ok(validatePayload('amazon-bedrock', 'ABSKQmVkcm9ja0FQSUtleQ=='))).toEqual({
      kind: 'bedrock-key',
      apiKey: 'ABSKQmVkcm9ja0FQSUtleQ==',
    });
  });
  test('IAM credentials', () => {
    expect(ok(validatePayload('amazon-bedrock', json(iam)))).toEqual({ kind: 'bedrock-iam', ...iam });
    expect(ok(validatePayload('claude-on-aws', json({ ...iam, region: 'us-gov-west-1' }))).kind).toBe('bedrock-iam');
  });
  test('each field is required', () => {
    expect(errors('amazon-bedrock', json({ accessKeyId: iam.accessKeyId, region: 'us-east-1' }))).toEqual([
      'secretAccessKey: is required',
    ]);
    expect(errors('amazon-bedrock', json({}))).toEqual([
      'accessKeyId: is required',
      'secretAccessKey: is required',
      'region: is required',
    ]);
  });
  test('malformed access key id, secret with whitespace, bad region, unknown field', () => {
    expect(errors('amazon-bedrock', json({ ...iam, accessKeyId: 'akia-lower' }))).toEqual([
      'accessKeyId: must be an AWS access key id (16 to 128 upper-case letters and digits)',
    ]);
    expect(errors('amazon-bedrock', json({ ...iam, secretAccessKey: 'has space' }))).toEqual([
      'secretAccessKey: must not contain whitespace',
    ]);
    expect(errors('amazon-bedrock', json({ ...iam, region: 'useast1' }))).toEqual([
      'region: must be an AWS region id such as us-east-1',
    ]);
    expect(errors('amazon-bedrock', json({ ...iam, sessionToken: 't' }))).toEqual([
      'sessionToken: is not a recognised field',
    ]);
  });
  test('invalid JSON is reported without the text', () => {
    expect(errors('amazon-bedrock', '{"accessKeyId": "AKIA...", ')).toEqual([expect.stringMatching(INVALID_JSON)]);
  });
});

describe('Azure', () => {
  const resource = { api_key: 'azkey1', resource_name: 'my-resource' };
  const deployment = {
    api_key: 'azkey2',
    model_slug: 'openai/gpt-4o',
    endpoint_url: DEPLOYMENT_URL,
    model_id: 'gpt4o',
  };

  test('a mixed array of resource and per-deployment configs; resource_type defaults to openai', () => {
    const p = ok(
      validatePayload('azure', json([resource, { ...resource, resource_type: 'ai_foundry' }, deployment])),
    ) as AzurePayload;
    expect(p.entries).toEqual([
      { type: 'resource', ...resource, resource_type: 'openai' },
      { type: 'resource', ...resource, resource_type: 'ai_foundry' },
      { type: 'deployment', ...deployment },
    ]);
  });
  test('a per-deployment config wins when its model_slug matches; otherwise the first resource config serves', () => {
    const p = ok(validatePayload('azure', json([resource, deployment]))) as AzurePayload;
    expect(azureDeploymentFor(p, 'openai/gpt-4o')).toMatchObject({ type: 'deployment', model_id: 'gpt4o' });
    expect(azureDeploymentFor(p, 'openai/gpt-4.1')).toMatchObject({ type: 'resource', resource_name: 'my-resource' });
    const onlyDeployments = ok(validatePayload('azure', json([deployment]))) as AzurePayload;
    expect(azureDeploymentFor(onlyDeployments, 'openai/gpt-4.1')).toBeNull();
  });
  test('the payload must be a non-empty JSON array of objects', () => {
    expect(errors('azure', 'azkey1')).toEqual([
      ': must be a JSON array of Azure resource configs and/or per-deployment configs',
    ]);
    expect(errors('azure', json(resource))).toEqual([
      ': must be a JSON array of Azure resource configs and/or per-deployment configs',
    ]);
    expect(errors('azure', '[]')).toEqual([': must contain at least one entry']);
    expect(errors('azure', json(['k']))).toEqual(['[0]: must be an object']);
    expect(errors('azure', '[{"api_key":')).toEqual([expect.stringMatching(INVALID_JSON)]);
  });
  test('resource config: api_key and resource_name required, resource_type enumerated, resource_name not a URL', () => {
    expect(errors('azure', json([{ resource_name: 'r' }]))).toEqual(['[0].api_key: is required']);
    expect(errors('azure', json([{ api_key: 'k' }]))).toEqual(['[0].resource_name: is required']);
    expect(errors('azure', json([{ ...resource, resource_type: 'foundry' }]))).toEqual([
      '[0].resource_type: must be one of: ai_foundry, openai',
    ]);
    expect(errors('azure', json([{ ...resource, resource_name: 'https://r.openai.azure.com' }]))[0]).toMatch(
      /^\[0\]\.resource_name: .*not a URL/,
    );
  });
  test('per-deployment config: model_slug, endpoint_url and model_id required', () => {
    expect(errors('azure', json([resource, { api_key: 'k', model_slug: 'openai/gpt-4o' }]))).toEqual([
      '[1].endpoint_url: is required',
      '[1].model_id: is required',
    ]);
    expect(errors('azure', json([{ ...deployment, model_slug: 'gpt-4o' }]))).toEqual([
      '[0].model_slug: must be a gateway model slug of the form <vendor>/<model>',
    ]);
  });
  test.each([
    ['http://res1.openai.azure.com/openai/deployments/d/chat/completions?api-version=1', 'must use https'],
    [
      'https://res1.openai.azure.com/openai/deployments/d?api-version=1',
      'must include the chat-completions path (…/chat/completions)',
    ],
    [
      'https://res1.openai.azure.com/openai/deployments/d/chat/completions',
      'must include an api-version query parameter',
    ],
    [
      'https://res1.openai.azure.com/openai/deployments/d/chat/completions?api-version=',
      'must include an api-version query parameter',
    ],
    ['not a url', 'must be a full https URL'],
  ])('endpoint_url %s is rejected', (url, message) => {
    expect(errors('azure', json([{ ...deployment, endpoint_url: url }]))).toEqual([`[0].endpoint_url: ${message}`]);
  });
  test('duplicate model_slug entries are rejected', () => {
    expect(errors('azure', json([deployment, deployment]))).toEqual([
      '[1].model_slug: duplicates the model_slug of entry [0]',
    ]);
  });
});

describe('Google Vertex', () => {
  test('a service-account document; region defaults to global and bucket to the per-region default', () => {
    const p = ok(validatePayload('google-vertex', json(SA))) as VertexPayload;
    expect(p).toMatchObject({ kind: 'vertex', projectId: 'my-project-123', region: 'global', bucket: null });
    expect(p.serviceAccount).toEqual(SA);
    expect(batchBucketFor(p, 'us-central1')).toBe('or-batch-my-project-123-us-central1');
  });
  test('region and a gs:// bucket are accepted; the bucket is normalised to its name and kept out of the key document', () => {
    const p = ok(
      validatePayload('google-vertex', json({ ...SA, region: 'europe-west4', bucket: 'gs://my-batch' })),
    ) as VertexPayload;
    expect(p.region).toBe('europe-west4');
    expect(p.bucket).toBe('my-batch');
    expect(p.serviceAccount).toEqual(SA);
    expect(batchBucketFor(p, 'europe-west4')).toBe('my-batch');
    expect((ok(validatePayload('google-vertex', json({ ...SA, bucket: 'plain-name' }))) as VertexPayload).bucket).toBe(
      'plain-name',
    );
  });
  test('older key documents without universe_domain are accepted, unknown Google fields are kept', () => {
    const { universe_domain: _u, ...old } = SA;
    expect(ok(validatePayload('google-vertex', json(old))).kind).toBe('vertex');
    expect(
      (ok(validatePayload('google-vertex', json({ ...SA, future_field: 'x' }))) as VertexPayload).serviceAccount,
    ).toHaveProperty('future_field');
  });
  test('object paths and invalid bucket names are rejected', () => {
    expect(errors('google-vertex', json({ ...SA, bucket: 'gs://my-batch/prefix' }))).toEqual([
      'bucket: must name a bucket, not an object path (use the bucket name or gs://<bucket>)',
    ]);
    expect(errors('google-vertex', json({ ...SA, bucket: 'My_Bucket!' }))[0]).toMatch(/^bucket: must be a bucket name/);
    expect(bucketName('gs://b-1/')).toEqual({ ok: true, name: 'b-1' });
  });
  test('region must be global or a region id', () => {
    expect(errors('google-vertex', json({ ...SA, region: 'Europe' }))).toEqual([
      "region: must be 'global' or a Google Cloud region id such as us-central1",
    ]);
  });
  test('standard fields are required and checked', () => {
    const { private_key: _pk, ...noKey } = SA;
    expect(errors('google-vertex', json(noKey))).toEqual(['private_key: is required']);
    expect(errors('google-vertex', json({ ...SA, type: 'user' }))).toEqual(['type: must be "service_account"']);
    expect(errors('google-vertex', json({ ...SA, private_key: 'abc' }))[0]).toMatch(
      /^private_key: must be a PEM-encoded private key/,
    );
    expect(errors('google-vertex', json({ ...SA, client_email: 'nope' }))).toEqual([
      'client_email: must be an e-mail address',
    ]);
    expect(errors('google-vertex', json({ ...SA, token_uri: 'http://oauth2.googleapis.com/token' }))).toEqual([
      'token_uri: must be an https URL',
    ]);
  });
  test('the payload must be a JSON object', () => {
    expect(errors('google-vertex', 'AIza-key')).toEqual([': must be a Google service-account key JSON document']);
    expect(errors('google-vertex', '[1]')).toEqual([': must be a Google service-account key JSON document']);
    expect(errors('google-vertex', '{')).toEqual([expect.stringMatching(INVALID_JSON)]);
  });
  test('default batch bucket name', () => {
    expect(defaultBatchBucket('my-project', 'us-central1')).toBe('or-batch-my-project-us-central1');
    expect(defaultBatchBucket('example.com:proj-1', 'europe-west4')).toBe('or-batch-example-com-proj-1-europe-west4');
  });
  test('the offline bucket-ownership hook says it did not check, never that the bucket is owned', async () => {
    const p = ok(validatePayload('google-vertex', json({ ...SA, bucket: 'mine' }))) as VertexPayload;
    await expect(
      OFFLINE_BUCKET_OWNERSHIP_CHECK.check({ projectId: p.projectId, bucket: 'mine', payload: p }),
    ).resolves.toEqual({
      status: 'not-checked',
      reason: 'bucket ownership can only be verified at the provider; not performed offline',
    });
  });
});

describe('issue rendering', () => {
  test('describePayloadIssues names the field under the REST key', () => {
    expect(
      describePayloadIssues([
        { field: '', message: 'is not valid JSON' },
        { field: '[1].endpoint_url', message: 'must use https' },
        { field: 'region', message: 'is required' },
      ]),
    ).toBe('key is not valid JSON; key[1].endpoint_url must use https; key.region is required');
  });
});
