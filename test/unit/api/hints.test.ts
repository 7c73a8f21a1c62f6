// Errors that teach at the REST door: the did-you-mean hints `validate` gives (src/domain/hints.ts), and no 400
// that names its field twice. A hint names only a known field or slug, never what was sent.
import { describe, expect, test } from '@jest/globals';
import { pino } from 'pino';
import { buildApp } from '../../../src/api/server.ts';
import type { Backend } from '../../../src/service/backend.ts';
import { managementKeySecret, sha256Hex } from '../../../src/service/management-keys.ts';
import { ApiState } from '../../../src/service/read-model.ts';
import { violationText } from '../../../src/service/validate.ts';

const MK = 'sk-byok-mgmt-v1-unit-hints';
const SECRET = 'sk-unit-canary-hints-0123456789';

async function app() {
  const state = new ApiState();
  state.upsertManagementSecret(managementKeySecret('acct', 'mk', sha256Hex(MK)));
  state.upsertWorkspace({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Workspace',
    metadata: { namespace: 'acct', name: 'main' },
    spec: { default: true },
  });
  // Every body below is refused before anything is written.
  const backend = new Proxy({}, { get: () => () => Promise.reject(new Error('no write expected')) }) as Backend;
  return buildApp({
    state,
    backend,
    observe: () => undefined,
    observeDeleted: () => undefined,
    logger: pino({ level: 'silent' }),
    rateLimit: false,
  });
}

async function post(payload: object): Promise<{ status: number; message: string; body: string }> {
  const res = await (await app()).inject({
    method: 'POST',
    url: '/api/v1/byok',
    headers: { authorization: `Bearer ${MK}` },
    payload,
  });
  return {
    status: res.statusCode,
    message: (res.json() as { error: { message: string } }).error.message,
    body: res.body,
  };
}

describe('REST 400s that teach', () => {
  test('an unknown field in camelCase names its snake_case field', async () => {
    const r = await post({ provider: 'openai', key: SECRET, isByokOnly: true });
    expect(r.status).toBe(400);
    expect(r.message).toBe('Unknown field: isByokOnly; did you mean "is_byok_only"?');
    expect(r.body).not.toContain(SECRET);
  });

  test('a typo in a field name gets the closest one; a name like nothing gets no guess', async () => {
    expect((await post({ provider: 'openai', key: SECRET, allowed_model: ['openai/gpt-5'] })).message).toBe(
      'Unknown field: allowed_model; did you mean "allowed_models"?',
    );
    expect((await post({ provider: 'openai', key: SECRET, colour: 'blue' })).message).toBe('Unknown field: colour');
  });

  test('a provider slug with a stray hyphen or a typo names the slug', async () => {
    expect((await post({ provider: 'open-ai', key: SECRET })).message).toBe(
      'provider must be one of the BYOK provider slugs; did you mean "openai"?',
    );
    expect((await post({ provider: 'anthropc', key: SECRET })).message).toBe(
      'provider must be one of the BYOK provider slugs; did you mean "anthropic"?',
    );
    expect((await post({ provider: 'zzzzzzzzzzzz', key: SECRET })).message).toBe(
      'provider must be one of the BYOK provider slugs',
    );
  });

  test('the list filter ?provider= gets the same hint', async () => {
    const res = await (await app()).inject({
      method: 'GET',
      url: '/api/v1/byok?provider=open-ai',
      headers: { authorization: `Bearer ${MK}` },
    });
    expect(res.statusCode).toBe(400);
    expect((res.json() as { error: { message: string } }).error.message).toBe(
      'provider must be one of the BYOK provider slugs; did you mean "openai"?',
    );
  });

  test('a bare model name in allowed_models gets the slug, as at the gateway and in explain', async () => {
    const r = await post({ provider: 'openai', key: SECRET, allowed_models: ['openai/gpt-5-mini', 'gpt-5'] });
    expect(r.status).toBe(400);
    expect(r.message).toBe(
      'allowed_models[1] must be a model slug of the form <vendor>/<model>; did you mean "openai/gpt-5"?',
    );
    expect(r.body).not.toContain(SECRET);
  });

  test('the field is named once: is_byok_only with is_fallback', async () => {
    const r = await post({ provider: 'openai', key: SECRET, is_byok_only: true, is_fallback: true });
    expect(r.status).toBe(400);
    expect(r.message).toBe('is_byok_only=true cannot be combined with is_fallback=true');
  });

  test('a message that does not name its field still gets it in front', () => {
    expect(
      violationText({
        field: 'allowed_models[3]',
        code: 'malformed_model_slug',
        message: 'must be a model slug of the form <vendor>/<model>',
      }),
    ).toBe('allowed_models[3] must be a model slug of the form <vendor>/<model>');
    expect(
      violationText({
        field: 'is_fallback',
        code: 'byok_only_with_fallback',
        message: 'is_byok_only=true cannot be combined with is_fallback=true',
      }),
    ).toBe('is_byok_only=true cannot be combined with is_fallback=true');
  });
});
