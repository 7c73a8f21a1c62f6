// Credential flags and filters (spec 2.2): create/update semantics and every validation rule with its stable message.
import { describe, expect, test } from '@jest/globals';
import {
  type CredentialPatch,
  type CredentialSettings,
  type CredentialWriteResult,
  DEFAULT_SETTINGS,
  patchFromSpec,
  resolveCredentialWrite,
  specFieldPath,
  specFromSettings,
  VIOLATIONS,
  validateFilterShape,
} from '../../../src/domain/index.ts';
import { hash } from '../../support/fixtures/domain.ts';

const H1 = hash(1);
const H2 = hash(2);
const LIVE = new Set([H1, H2]);

const create = (patch: CredentialPatch): CredentialWriteResult =>
  resolveCredentialWrite({ mode: 'create', stored: null, patch, liveApiKeyHashes: LIVE });
const update = (stored: Partial<CredentialSettings>, patch: CredentialPatch): CredentialWriteResult =>
  resolveCredentialWrite({ mode: 'update', stored: { ...DEFAULT_SETTINGS, ...stored }, patch, liveApiKeyHashes: LIVE });

function violations(r: CredentialWriteResult): string[] {
  if (r.ok) throw new Error('expected violations');
  return r.violations.map((v) => `${v.field} ${v.code}`);
}

function settings(r: CredentialWriteResult): CredentialSettings {
  if (!r.ok) throw new Error(JSON.stringify(r.violations));
  return r.settings;
}

describe('create', () => {
  test('omitted filters mean no restriction; is_required and is_byok_only default to false', () => {
    expect(settings(create({}))).toEqual(DEFAULT_SETTINGS);
  });
  test('arrays set the restriction', () => {
    expect(
      settings(
        create({ allowed_models: ['a/b'], allowed_api_key_hashes: [H1], allowed_user_ids: ['u1'], is_required: true }),
      ),
    ).toEqual({
      ...DEFAULT_SETTINGS,
      is_required: true,
      allowed_models: ['a/b'],
      allowed_api_key_hashes: [H1],
      allowed_user_ids: ['u1'],
    });
  });
});

describe('update', () => {
  const stored = { is_required: true, allowed_models: ['a/b'], allowed_api_key_hashes: [H1], allowed_user_ids: ['u1'] };
  test('an omitted field leaves the stored value unchanged', () => {
    expect(settings(update(stored, {}))).toEqual({ ...DEFAULT_SETTINGS, ...stored });
    expect(settings(update(stored, { is_byok_only: true })).is_required).toBe(true);
  });
  test('null clears a restriction', () => {
    expect(
      settings(update(stored, { allowed_models: null, allowed_api_key_hashes: null, allowed_user_ids: null })),
    ).toEqual({
      ...DEFAULT_SETTINGS,
      is_required: true,
    });
  });
  test('an array replaces the restriction; duplicates are dropped', () => {
    expect(settings(update(stored, { allowed_models: ['c/d', 'c/d', 'e/f'] })).allowed_models).toEqual(['c/d', 'e/f']);
  });
  test('flags can be switched off', () => {
    expect(settings(update(stored, { is_required: false })).is_required).toBe(false);
  });
});

describe('rules', () => {
  test('at most 100 entries per filter', () => {
    const many = Array.from({ length: 101 }, (_, i) => `v/m${i}`);
    expect(violations(create({ allowed_models: many }))).toEqual(['allowed_models too_many_entries']);
    expect(violations(create({ allowed_user_ids: many }))).toEqual(['allowed_user_ids too_many_entries']);
    expect(settings(create({ allowed_models: many.slice(0, 100) })).allowed_models).toHaveLength(100);
  });
  test('each hash is exactly 64 lowercase hex characters', () => {
    expect(violations(create({ allowed_api_key_hashes: [H1, hash(0xabcdef).toUpperCase(), H1.slice(1), 7] }))).toEqual([
      'allowed_api_key_hashes[1] malformed_api_key_hash',
      'allowed_api_key_hashes[2] malformed_api_key_hash',
      'allowed_api_key_hashes[3] malformed_api_key_hash',
    ]);
  });
  test('an empty hash array is rejected (null clears)', () => {
    expect(violations(create({ allowed_api_key_hashes: [] }))).toEqual(['allowed_api_key_hashes empty_api_key_hashes']);
    expect(violations(update({ allowed_api_key_hashes: [H1] }, { allowed_api_key_hashes: [] }))).toEqual([
      'allowed_api_key_hashes empty_api_key_hashes',
    ]);
  });
  test('every hash must resolve to a live API key of the same account', () => {
    expect(violations(create({ allowed_api_key_hashes: [H1, hash(99)] }))).toEqual([
      'allowed_api_key_hashes[1] unknown_api_key_hash',
    ]);
  });
  test('a stored hash whose key is no longer live does not block an update that leaves the filter unchanged', () => {
    expect(
      settings(update({ allowed_api_key_hashes: [hash(99)] }, { is_required: true })).allowed_api_key_hashes,
    ).toEqual([hash(99)]);
  });
  test('is_byok_only with is_fallback is rejected within one request', () => {
    expect(violations(create({ is_byok_only: true, is_fallback: true }))).toEqual([
      'is_byok_only byok_only_with_fallback',
    ]);
  });
  test('is_byok_only is rejected when the stored credential is a fallback', () => {
    expect(violations(update({ is_fallback: true }, { is_byok_only: true }))).toEqual([
      'is_byok_only byok_only_with_fallback',
    ]);
  });
  test('is_fallback is rejected when the stored credential is byok-only', () => {
    expect(violations(update({ is_byok_only: true }, { is_fallback: true }))).toEqual([
      'is_fallback byok_only_with_fallback',
    ]);
  });
  test('clearing one flag while setting the other is fine', () => {
    expect(settings(update({ is_byok_only: true }, { is_fallback: true, is_byok_only: false }))).toMatchObject({
      is_fallback: true,
      is_byok_only: false,
    });
  });
  test('filter entries are non-empty strings; models are <vendor>/<model>; wrong types are reported', () => {
    expect(
      violations(
        create({
          allowed_user_ids: ['', ' u', 3],
          allowed_models: ['gpt-4o', 'a/b'],
          is_required: 'yes',
          allowed_models_extra: 1,
        } as CredentialPatch),
      ),
    ).toEqual([
      'is_required invalid_type',
      'allowed_models[0] malformed_model_slug',
      'allowed_user_ids[0] invalid_entry',
      'allowed_user_ids[1] invalid_entry',
      'allowed_user_ids[2] invalid_entry',
    ]);
    expect(violations(create({ allowed_models: 'a/b' }))).toEqual(['allowed_models invalid_type']);
  });
  test('filter entries follow the text rules of both doors (controls, separators, lone surrogates)', () => {
    expect(
      violations(
        create({
          allowed_models: ['openai/gpt\u0096', 'openai/x\u2028y'],
          allowed_user_ids: ['u\u0000', 'u\ud800', 'ok-user'],
        }),
      ),
    ).toEqual([
      'allowed_models[0] invalid_text',
      'allowed_models[1] invalid_text',
      'allowed_user_ids[0] invalid_text',
      'allowed_user_ids[1] invalid_text',
    ]);
  });
  test('every violation carries the stable message for its code', () => {
    const r = create({
      allowed_api_key_hashes: [],
      is_byok_only: true,
      is_fallback: true,
      allowed_models: Array(101).fill('a/b'),
    });
    if (r.ok) throw new Error('expected violations');
    for (const v of r.violations) expect(v.message).toBe(VIOLATIONS[v.code]);
    expect(VIOLATIONS.byok_only_with_fallback).toBe('is_byok_only=true cannot be combined with is_fallback=true');
  });
});

describe('offline shape validation and CRD mapping', () => {
  test('validateFilterShape checks everything but liveness', () => {
    expect(validateFilterShape('allowed_api_key_hashes', [hash(99)])).toEqual([]);
    expect(validateFilterShape('allowed_api_key_hashes', [])).toHaveLength(1);
    expect(validateFilterShape('allowed_models', null)).toEqual([]);
    expect(validateFilterShape('allowed_models', undefined)).toEqual([]);
  });
  test('patchFromSpec reads camelCase spec fields; absent fields stay omitted', () => {
    expect(patchFromSpec({ isFallback: true, allowedModels: ['a/b'], provider: 'openai' })).toEqual({
      is_fallback: true,
      allowed_models: ['a/b'],
    });
    expect(specFromSettings({ ...DEFAULT_SETTINGS, is_required: true })).toEqual({
      isFallback: false,
      isRequired: true,
      isByokOnly: false,
      allowedModels: null,
      allowedApiKeyHashes: null,
      allowedUserIds: null,
    });
    expect(specFieldPath('allowed_api_key_hashes[3]')).toBe('allowedApiKeyHashes[3]');
    expect(specFieldPath('is_byok_only')).toBe('isByokOnly');
    expect(specFieldPath('other')).toBe('other');
  });
});
