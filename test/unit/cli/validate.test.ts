// `byok-operator validate` for GitOps CI: the shipped samples pass; a broken manifest is reported by file,
// document, object and field.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { validatePath } from '../../../src/cli/validate.ts';

describe('validate', () => {
  test('the sample manifests are valid', () => {
    const report = validatePath(join(import.meta.dirname, '..', '..', '..', 'config', 'samples'));
    expect(report.problems).toEqual([]);
    expect(report.checked).toBe(7);
  });

  test('reports each problem with its location and skips other kinds', () => {
    const dir = mkdtempSync(join(tmpdir(), 'byok-validate-'));
    writeFileSync(
      join(dir, 'bad.yaml'),
      [
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unrelated}',
        'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: both}\nspec: {provider: openai, secretRef: {name: s}, isFallback: true, isByokOnly: true}',
        'apiVersion: byok.gateway.dev/v1alpha1\nkind: GatewayAPIKey\nmetadata: {name: k}\nspec: {hash: nothex}',
      ].join('\n---\n'),
    );
    writeFileSync(join(dir, 'broken.yaml'), 'kind: [unclosed');
    const report = validatePath(dir);
    expect(report.checked).toBe(2);
    expect(report.problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/bad\.yaml#1 BYOKCredential\/both: spec: isByokOnly cannot be combined with isFallback/),
        expect.stringMatching(/bad\.yaml#2 GatewayAPIKey\/k: spec\.hash: /),
        expect.stringMatching(/broken\.yaml#0: /),
      ]),
    );
  });
});
