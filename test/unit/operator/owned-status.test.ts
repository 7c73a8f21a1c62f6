import { describe, expect, test } from '@jest/globals';
import { ownedStatus } from '../../../src/operator/status/ownership.ts';

describe('ownedStatus', () => {
  test('is the stored status without the spend field the spend writer owns', () => {
    const conditions = [{ type: 'Ready', status: 'True' }];
    expect(ownedStatus({ id: 'x', conditions, spend: { blocked: true } })).toEqual({ id: 'x', conditions });
    expect(ownedStatus({ id: 'x', conditions })).toEqual({ id: 'x', conditions });
    expect(ownedStatus(undefined)).toBeUndefined();
  });
});
