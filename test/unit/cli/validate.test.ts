// `byok-operator validate` for GitOps CI: the shipped samples pass; a broken manifest is reported by
// file:line:column, object and field; text, JSON and JUnit output; stdin; `kind: List`; nothing-checked warning.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { exitCode, formatReport, validatePath } from '../../../src/cli/validate.ts';

const BAD = [
  'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unrelated}',
  'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: both}\nspec: {provider: openai, secretRef: {name: s}, isFallback: true, isByokOnly: true}',
  'apiVersion: byok.gateway.dev/v1alpha1\nkind: GatewayAPIKey\nmetadata: {name: k}\nspec:\n  hash: nothex',
].join('\n---\n');

function tempDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'byok-validate-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('validate', () => {
  test('the sample manifests are valid', () => {
    const report = validatePath(join(import.meta.dirname, '..', '..', '..', 'config', 'samples'));
    expect(report.problems).toEqual([]);
    expect(report.checked).toBe(7);
    expect(exitCode(report, true)).toBe(0);
  });

  test('reports each problem as file:line:column with object and field, and skips other kinds', () => {
    const dir = tempDir({ 'bad.yaml': BAD, 'broken.yaml': 'kind: [unclosed' });
    const report = validatePath(dir);
    expect(report.checked).toBe(2);
    expect(report.problems).toEqual(expect.arrayContaining([
      expect.stringMatching(/bad\.yaml:8:1: error: BYOKCredential\/both: spec: isByokOnly cannot be combined with isFallback/),
      expect.stringMatching(/bad\.yaml:14:3: error: GatewayAPIKey\/k: spec\.hash: /),
      expect.stringMatching(/broken\.yaml:1:\d+: error: invalid YAML/),
    ]));
    expect(exitCode(report, false)).toBe(1);
  });

  test('enum errors name the value, suggest the closest and list the allowed values; unknown fields point at the key', () => {
    const dir = tempDir({ 'c.yaml': 'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: c}\nspec:\n  provider: opnai\n  secretRef: {name: s}\n  colour: blue\n' });
    const [provider, unknown] = [...validatePath(dir).problems].sort();
    expect(unknown).toMatch(/c\.yaml:7:3: error: BYOKCredential\/c: spec: unknown field "colour"/);
    expect(provider).toMatch(/c\.yaml:5:3: .*spec\.provider: unsupported value "opnai"; did you mean "openai"\? Allowed values: ai21, .*, anthropic, .*, z-ai$/);
  });

  test('model slugs must be <vendor>/<model>, offline', () => {
    const dir = tempDir({ 'm.yaml': 'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: m}\nspec:\n  provider: openai\n  secretRef: {name: s}\n  allowedModels:\n    - openai/gpt-5\n    - gpt-5\n' });
    expect(validatePath(dir).problems).toEqual([expect.stringMatching(/m\.yaml:9:7: error: BYOKCredential\/m: spec\.allowedModels\[1\]: .*<vendor>\/<model>/)]);
  });

  test('reads - from stdin and expands kind: List (kubectl get -o yaml)', () => {
    const list = [
      'apiVersion: v1', 'kind: List', 'items:',
      '- apiVersion: byok.gateway.dev/v1alpha1', '  kind: Account', '  metadata: {name: a}', '  spec: {plan: enterprise}',
      '- apiVersion: byok.gateway.dev/v1alpha1', '  kind: Account', '  metadata: {name: b}', '  spec: {plan: free}',
    ].join('\n');
    const report = validatePath('-', { readStdin: () => list });
    expect(report.checked).toBe(2);
    expect(report.problems).toEqual([expect.stringMatching(/^<stdin>:11:10: error: Account\/b: spec\.plan: unsupported value "free". Allowed values: pay-as-you-go, enterprise$/)]);
  });

  test('nothing checked is a warning, and an error with --strict', () => {
    const dir = tempDir({ 'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n' });
    const report = validatePath(dir);
    expect(report.findings).toEqual([expect.objectContaining({ severity: 'warning', message: expect.stringMatching(/nothing was checked/) })]);
    expect(exitCode(report, false)).toBe(0);
    expect(exitCode(report, true)).toBe(1);
    expect(formatReport(report, 'text')).toMatch(/0 byok.gateway.dev resources checked, 0 problems, 1 warning\n$/);
  });

  test('--output json and junit', () => {
    const report = validatePath(tempDir({ 'bad.yaml': BAD }));
    const json = JSON.parse(formatReport(report, 'json')) as { checked: number; errors: number; findings: { file: string; line: number; path: string }[]; resources: { object: string; valid: boolean }[] };
    expect(json).toMatchObject({ checked: 2, errors: 3 });
    expect(json.findings.map((f) => [f.line, f.path])).toEqual([[8, 'spec'], [14, 'spec.hash'], [14, 'spec.hash']]);
    expect(json.resources.map((r) => [r.object, r.valid])).toEqual([['BYOKCredential/both', false], ['GatewayAPIKey/k', false]]);
    const junit = formatReport(report, 'junit');
    expect(junit).toMatch(/^<\?xml version="1.0" encoding="UTF-8"\?>\n<testsuites name="byok-operator validate" tests="2" failures="2">/);
    expect(junit).toMatch(/<testcase classname="[^"]*bad\.yaml" name="BYOKCredential\/both" file="[^"]*bad\.yaml" line="5">\n      <failure type="error" message="spec: isByokOnly cannot be combined with isFallback">/);
    const ok = formatReport(validatePath(join(import.meta.dirname, '..', '..', '..', 'config', 'samples')), 'junit');
    expect(ok).toMatch(/tests="7" failures="0"/);
    expect(ok).not.toContain('<failure');
  });
});
