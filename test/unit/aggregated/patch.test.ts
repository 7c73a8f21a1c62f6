// Patch paths, patch keys and selector keys are tenant input: none reaches a prototype.
import { describe, expect, test } from '@jest/globals';
import { matches, parseSelector } from '../../../src/aggregated/handlers/selection.ts';
import { jsonPatch, mergePatch, PatchError } from '../../../src/aggregated/patch.ts';

const fresh = () => ({}) as Record<string, unknown>;

describe('patches never reach a prototype', () => {
  const doc = { spec: { provider: 'openai', allowedModels: ['a/b'] }, metadata: { labels: { x: '1' } } };

  test.each([
    '/__proto__/x',
    '/constructor/prototype/x',
    '/spec/__proto__/disabled',
    '/spec/constructor',
    '/metadata/labels/prototype',
  ])('JSON patch path %s is refused for every op', (path) => {
    for (const op of [
      { op: 'add', path, value: 'y' },
      { op: 'replace', path, value: 'y' },
      { op: 'remove', path },
      { op: 'test', path, value: 1 },
      { op: 'copy', from: path, path: '/spec/displayName' },
      { op: 'move', from: '/spec/provider', path },
    ]) {
      expect(() => jsonPatch(doc, [op])).toThrow(PatchError);
    }
    expect(fresh().x).toBeUndefined();
    expect(fresh().disabled).toBeUndefined();
  });

  test('a JSON pointer into an inherited property does not exist', () => {
    expect(() => jsonPatch(doc, [{ op: 'remove', path: '/spec/toString' }])).toThrow(/does not exist/);
    expect(() => jsonPatch(doc, [{ op: 'test', path: '/spec/hasOwnProperty', value: null }])).toThrow(PatchError);
  });

  test('merge patch keys naming a prototype are refused at any depth', () => {
    for (const patch of [
      JSON.parse('{"__proto__":{"x":"y"}}'),
      { spec: { constructor: { prototype: { x: 1 } } } },
      { metadata: { labels: { prototype: 'a' } } },
    ]) {
      expect(() => mergePatch(doc, patch)).toThrow(PatchError);
    }
    expect(fresh().x).toBeUndefined();
    expect(mergePatch(doc, { spec: { provider: 'anthropic' } })).toEqual({
      ...doc,
      spec: { ...doc.spec, provider: 'anthropic' },
    });
  });

  test('selector keys match own labels only', () => {
    const labels = { provider: 'openai' };
    for (const key of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']) {
      expect(matches(parseSelector(key), labels)).toBe(false);
      expect(matches(parseSelector(`!${key}`), labels)).toBe(true);
    }
    expect(matches(parseSelector('provider=openai'), labels)).toBe(true);
  });
});
