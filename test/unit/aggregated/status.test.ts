// ByokService errors → Kubernetes Status: field errors become 422 Invalid with causes on BYOKKey paths.
import { describe, expect, test } from '@jest/globals';
import { byokKeysErrors } from '../../../src/aggregated/registry/byokkeys/strategy.ts';
import { statusFromApiError as toStatus } from '../../../src/aggregated/status.ts';
import { ApiError, badRequest } from '../../../src/service/errors.ts';

/** The mapping as the byokkeys resource hands it its names. */
const statusFromApiError = (err: Parameters<typeof toStatus>[0], name?: string) => toStatus(err, byokKeysErrors, name);

describe('Status mapping', () => {
  test('a domain violation names the camelCase field', () => {
    const s = statusFromApiError(
      badRequest('is_byok_only cannot be combined with is_fallback', {
        field: 'is_byok_only',
        violations: [{ field: 'is_byok_only', code: 'x', message: 'cannot be combined with is_fallback' }],
      }),
      'id-1',
    );
    expect(s).toMatchObject({ code: 422, reason: 'Invalid' });
    expect(s.message).toBe('BYOKKey "id-1" is invalid: spec.isByokOnly cannot be combined with spec.isFallback');
    expect(s.details).toMatchObject({
      name: 'id-1',
      kind: 'BYOKKey',
      causes: [
        { type: 'FieldValueInvalid', field: 'spec.isByokOnly', message: 'cannot be combined with spec.isFallback' },
      ],
    });
  });

  test('payload problems point at spec.key without quoting it; structural errors keep their index', () => {
    const payload = statusFromApiError(
      badRequest('the payload is invalid', { field: 'key', errors: [{ field: 'region', message: 'is required' }] }),
    );
    expect(payload.details).toMatchObject({ causes: [{ field: 'spec.key', message: 'region: is required' }] });
    const structural = statusFromApiError(
      badRequest('allowed_models[2] must be string', {
        field: 'allowed_models[2]',
        errors: [{ field: 'allowed_models[2]', message: 'allowed_models[2] must be string' }],
      }),
    );
    expect(structural.details).toMatchObject({
      causes: [{ field: 'spec.allowedModels[2]', message: 'spec.allowedModels[2] must be string' }],
    });
  });

  test('no field: 400 BadRequest; 404, 409 and others keep their meaning', () => {
    expect(statusFromApiError(badRequest('The request body must be a JSON object'))).toMatchObject({
      code: 400,
      reason: 'BadRequest',
    });
    expect(statusFromApiError(new ApiError(404, 'BYOK credential not found'), 'x')).toMatchObject({
      code: 404,
      reason: 'NotFound',
      message: 'byokkeys.api.byok.gateway.dev "x" not found',
    });
    expect(statusFromApiError(new ApiError(409, 'managed by Git'))).toMatchObject({ code: 409, reason: 'Conflict' });
  });
});
