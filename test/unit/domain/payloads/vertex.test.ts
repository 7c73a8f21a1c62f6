// The Vertex shape: the service-account key document, with optional region and bucket.
import { describe, expect, test } from '@jest/globals';
import { vertexShape } from '../../../../src/domain/payloads/vertex.ts';
import { SA, SPEC, validateWith } from './spec.ts';

const VERTEX_SPEC = {
  ...SPEC,
  baseUrl:
    'https://{location_prefix}aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/endpoints/openapi',
};

describe('vertex shape', () => {
  test('takes the key document with region and bucket taken out; errors name the field and the rule', () => {
    const parsed = validateWith(
      vertexShape,
      JSON.stringify({ ...SA, region: 'europe-west4', bucket: 'gs://my-bucket' }),
    ).payload;
    expect(parsed).toEqual({
      kind: 'vertex',
      serviceAccount: SA,
      projectId: SA.project_id,
      region: 'europe-west4',
      bucket: 'my-bucket',
    });
    expect(validateWith(vertexShape, JSON.stringify({ ...SA, region: 'Europe' })).errors).toEqual([
      { field: 'region', message: "must be 'global' or a Google Cloud region id such as us-central1" },
    ]);
    expect(
      validateWith(vertexShape, JSON.stringify({ ...SA, token_uri: 'https://169.254.169.254/token' })).errors.map(
        (e) => e.field,
      ),
    ).toEqual(['token_uri']);
    expect(validateWith(vertexShape, 'not json').errors).toEqual([
      { field: '', message: 'must be a Google service-account key JSON document' },
    ]);
  });
  test('its label masks the private key id, never the private key', () => {
    expect(vertexShape.labelField(SA)).toBe(SA.private_key_id);
  });
  test('the region fills the endpoint template; the gateway exchanges the key for a token', () => {
    const payload = {
      kind: 'vertex',
      serviceAccount: SA as never,
      projectId: 'my-project-123',
      region: 'us-central1',
      bucket: null,
    } as const;
    expect(vertexShape.upstream(payload, VERTEX_SPEC, 'google/gemini')).toEqual({
      url: {
        chat: 'https://us-central1-aiplatform.googleapis.com/v1/projects/my-project-123/locations/us-central1/endpoints/openapi',
      },
      model: 'upstream-model',
      auth: { kind: 'google-service-account' },
    });
    expect(vertexShape.upstream({ ...payload, region: 'global' }, VERTEX_SPEC, 'google/gemini')).toMatchObject({
      url: { chat: 'https://aiplatform.googleapis.com/v1/projects/my-project-123/locations/global/endpoints/openapi' },
    });
  });
  test('exports project and region as facts, and the key document as issued as the Secret material', () => {
    const payload = {
      kind: 'vertex',
      serviceAccount: SA as never,
      projectId: 'my-project-123',
      region: 'global',
      bucket: 'b',
    } as const;
    expect(vertexShape.facts(payload)).toEqual({ kind: 'vertex', projectId: 'my-project-123', region: 'global' });
    const material = vertexShape.secret(payload);
    expect(material.kind).toBe('google-service-account');
    expect(JSON.parse((material as { document: string }).document)).toEqual(SA);
  });
});
