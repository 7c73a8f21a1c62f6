// One did-you-mean for every door (validate, REST, gateway).
import { describe, expect, test } from '@jest/globals';
import { closestModel, closestName, didYouMean, modelSlugHint } from '../../../src/domain/hints.ts';
import { PROVIDER_SLUGS } from '../../../src/domain/providers.ts';

describe('did-you-mean hints', () => {
  test('another spelling of the same name comes first', () => {
    expect(closestName('isByokOnly', ['is_byok_only', 'is_required', 'is_fallback'])).toBe('is_byok_only');
    expect(closestName('open-ai', PROVIDER_SLUGS)).toBe('openai');
  });
  test('then the nearest name, when near enough; a known name or nothing alike gets no hint', () => {
    expect(closestName('montly', ['daily', 'monthly'])).toBe('monthly');
    expect(closestName('xyzzy', ['daily', 'monthly'])).toBeUndefined();
    expect(closestName('daily', ['daily', 'monthly'])).toBeUndefined();
  });
  test('a bare model name is the one slug with that model', () => {
    const slugs = ['openai/gpt-5', 'openai/gpt-5-mini', 'anthropic/claude-sonnet-4'];
    expect(closestModel('gpt-5', slugs)).toBe('openai/gpt-5');
    expect(closestModel('GPT-5', slugs)).toBe('openai/gpt-5');
    expect(closestModel('openai/gpt5', slugs)).toBe('openai/gpt-5');
    expect(closestModel('openai/gpt-5', slugs)).toBeUndefined();
    expect(closestModel('llama-99', slugs)).toBeUndefined();
  });
  test('the suffix', () => {
    expect(didYouMean('openai')).toBe('; did you mean "openai"?');
    expect(didYouMean(undefined)).toBe('');
  });
  test('one model hint for every door: the catalog when there is one, else the vendor of a known family', () => {
    const slugs = ['openai/gpt-5', 'anthropic/claude-sonnet-4'];
    expect(modelSlugHint('gpt-5', slugs)).toBe('; did you mean "openai/gpt-5"?');
    expect(modelSlugHint('gpt-9', slugs)).toBe('');
    expect(modelSlugHint('gpt-5')).toBe('; did you mean "openai/gpt-5"?');
    expect(modelSlugHint('Claude-Sonnet-4')).toBe('; did you mean "anthropic/claude-sonnet-4"?');
    expect(modelSlugHint('gemini-2.5-pro')).toBe('; did you mean "google/gemini-2.5-pro"?');
    expect(modelSlugHint('openai/gpt-5')).toBe('');
    expect(modelSlugHint(42)).toBe('');
  });
  test('a provider key pasted where a model goes is never echoed', () => {
    for (const key of ['sk-proj-0123456789abcdef', 'sk-ant-api03-abcdef', 'AIzaSyA0123456789', 'gsk_0123456789']) {
      expect(modelSlugHint(key)).toBe('');
      expect(modelSlugHint(key, ['openai/gpt-5'])).not.toContain(key);
    }
  });
});
