// `byok-operator validate` for GitOps CI: the shipped samples pass; a broken manifest is reported by
// file:line:column, object and field; text, JSON and JUnit output; stdin; `kind: List`; nothing-checked warning.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { exitCode, formatReport, OUTPUT_FORMATS, validatePath } from '../../../src/cli/validate.ts';

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
    expect(report.problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /bad\.yaml:8:1: error: BYOKCredential\/both: spec: isByokOnly cannot be combined with isFallback/,
        ),
        expect.stringMatching(/bad\.yaml:14:3: error: GatewayAPIKey\/k: spec\.hash: /),
        expect.stringMatching(/broken\.yaml:1:\d+: error: invalid YAML/),
      ]),
    );
    expect(exitCode(report, false)).toBe(1);
  });

  test('enum errors name the value, suggest the closest and list the allowed values; unknown fields point at the key', () => {
    const dir = tempDir({
      'c.yaml':
        'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: c}\nspec:\n  provider: opnai\n  secretRef: {name: s}\n  colour: blue\n',
    });
    const [provider, unknown] = [...validatePath(dir).problems].sort();
    expect(unknown).toMatch(/c\.yaml:7:3: error: BYOKCredential\/c: spec: unknown field "colour"/);
    expect(provider).toMatch(
      /c\.yaml:5:3: .*spec\.provider: unsupported value "opnai"; did you mean "openai"\? Allowed values: ai21, .*, anthropic, .*, z-ai$/,
    );
  });

  test('model slugs must be <vendor>/<model>, offline', () => {
    const dir = tempDir({
      'm.yaml':
        'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: m}\nspec:\n  provider: openai\n  secretRef: {name: s}\n  allowedModels:\n    - openai/gpt-5\n    - gpt-5\n',
    });
    expect(validatePath(dir).problems).toEqual([
      expect.stringMatching(/m\.yaml:9:7: error: BYOKCredential\/m: spec\.allowedModels\[1\]: .*<vendor>\/<model>/),
    ]);
  });

  test('reads - from stdin and expands kind: List (kubectl get -o yaml)', () => {
    const list = [
      'apiVersion: v1',
      'kind: List',
      'items:',
      '- apiVersion: byok.gateway.dev/v1alpha1',
      '  kind: Account',
      '  metadata: {name: a}',
      '  spec: {plan: enterprise}',
      '- apiVersion: byok.gateway.dev/v1alpha1',
      '  kind: Account',
      '  metadata: {name: b}',
      '  spec: {plan: free}',
    ].join('\n');
    const report = validatePath('-', { readStdin: () => list });
    expect(report.checked).toBe(2);
    expect(report.problems).toEqual([
      expect.stringMatching(
        /^<stdin>:11:10: error: Account\/b: spec\.plan: unsupported value "free". Allowed values: pay-as-you-go, enterprise$/,
      ),
    ]);
  });

  test('nothing checked is a warning, and an error with --strict', () => {
    const dir = tempDir({ 'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n' });
    const report = validatePath(dir);
    expect(report.findings).toEqual([
      expect.objectContaining({ severity: 'warning', message: expect.stringMatching(/nothing was checked/) }),
    ]);
    expect(exitCode(report, false)).toBe(0);
    expect(exitCode(report, true)).toBe(1);
    expect(formatReport(report, 'text')).toMatch(/0 byok.gateway.dev resources checked, 0 problems, 1 warning\n$/);
  });

  test('unknown fields at any depth, with the closest known name', () => {
    const dir = tempDir({
      'w.yaml':
        'apiVersion: byok.gateway.dev/v1alpha1\nkind: Workspace\nmetadata: {name: w}\nspec:\n  budgets:\n    montly: 100\n  members:\n    - userId: u1\n      guardrial: g\n',
    });
    expect(validatePath(dir).problems.sort()).toEqual([
      expect.stringMatching(
        /w\.yaml:6:5: error: Workspace\/w: spec\.budgets: unknown field "montly"; did you mean "monthly"\?$/,
      ),
      expect.stringMatching(
        /w\.yaml:9:7: error: Workspace\/w: spec\.members\[0\]: unknown field "guardrial"; did you mean "guardrail"\?$/,
      ),
    ]);
  });

  test("one problem, one line: a bad hash is reported once, with the operator's message", () => {
    const dir = tempDir({
      'h.yaml':
        'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: h}\nspec:\n  provider: openai\n  secretRef: {name: s}\n  allowedApiKeyHashes: [abc]\n',
    });
    expect(validatePath(dir).problems).toEqual([
      expect.stringMatching(
        /h\.yaml:7:25: error: BYOKCredential\/h: spec\.allowedApiKeyHashes\[0\]: must be exactly 64 lowercase hexadecimal characters/,
      ),
    ]);
  });

  test("a raw key under a Secret's data: (not base64) is told to use stringData, without echoing it", () => {
    const canary = 'sk-proj-CANARY-raw-under-data-0123456789';
    // Alphanumeric only, a multiple of 4: base64 in form, garbage once decoded.
    const formOnly = 'sk9proj7CANARY3rawAB';
    const doc = (name: string, value: string) =>
      `apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: ${name}, namespace: acme}\nspec:\n  provider: openai\n  secretRef: {name: ${name}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: ${name}, namespace: acme}\ndata:\n  key: ${value}\n`;
    const dir = tempDir({
      'raw.yaml': doc('raw', canary),
      'form.yaml': doc('form', formOnly),
      'fine.yaml': doc('fine', Buffer.from(canary).toString('base64')),
    });
    const report = validatePath(dir);
    expect(report.problems).toEqual([
      expect.stringMatching(
        /form\.yaml:12:3: error: Secret\/form: data\.key: PayloadInvalid for openai \(referenced by BYOKCredential\/form\): data\.key is not base64 \(values under data: are base64-encoded\); for a plain-text key use stringData: instead of data:$/,
      ),
      expect.stringMatching(
        /raw\.yaml:12:3: error: Secret\/raw: data\.key: .*for a plain-text key use stringData: instead of data:$/,
      ),
    ]);
    expect(report.problems.join('\n')).not.toContain('UTF-8');
    for (const format of OUTPUT_FORMATS) {
      expect(formatReport(report, format)).not.toContain(canary);
      expect(formatReport(report, format)).not.toContain(formOnly);
    }
  });

  test("referenced Secrets get the operator's payload checks at their own line; missing ones are a warning; no key material is echoed", () => {
    const cred = (name: string, secret: string, provider = 'openai', key?: string) =>
      `apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: ${name}, namespace: acme}\nspec:\n  provider: ${provider}\n  secretRef: {name: ${secret}${key ? `, key: ${key}` : ''}}\n`;
    const secret = (name: string, data: string) =>
      `apiVersion: v1\nkind: Secret\nmetadata: {name: ${name}, namespace: acme}\n${data}\n`;
    const canary = 'CANARY-validate-9d8c7b6a';
    const dir = tempDir({
      'creds.yaml': [
        cred('ok', 'ok-key'),
        cred('bad', 'bad-key', 'amazon-bedrock'),
        cred('nokey', 'ok-key', 'openai', 'other'),
        cred('away', 'elsewhere'),
      ].join('---\n'),
      'secrets.yaml': [
        secret('ok-key', 'stringData: {key: sk-valid-0123456789}'),
        secret('bad-key', `data:\n  key: ${Buffer.from(`{"accessKeyId":"${canary}"}`).toString('base64')}`),
      ].join('---\n'),
    });
    const report = validatePath(dir);
    expect(report.problems).toEqual([
      expect.stringMatching(
        /secrets\.yaml:10:3: error: Secret\/bad-key: data\.key: PayloadInvalid for amazon-bedrock \(referenced by BYOKCredential\/bad\): /,
      ),
      expect.stringMatching(
        /secrets\.yaml:4:1: error: Secret\/ok-key: data\.other: KeyNotFound: the Secret has no key "other" \(referenced by BYOKCredential\/nokey\)/,
      ),
    ]);
    const warnings = report.findings.filter((f) => f.severity === 'warning');
    expect(warnings).toEqual([
      expect.objectContaining({
        object: 'BYOKCredential/away',
        path: 'spec.secretRef.name',
        line: 27,
        column: 15,
        message: expect.stringMatching(/Secret "elsewhere" is not among the checked files/),
      }),
    ]);
    expect(exitCode(report, false)).toBe(1);
    for (const format of OUTPUT_FORMATS) expect(formatReport(report, format)).not.toContain(canary);
  });

  test('an unterminated quote is reported where it opens, with no dangling position text', () => {
    const dir = tempDir({
      'q.yaml':
        'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata:\n  name: q\nspec:\n  provider: openai\n  displayName: "unterminated\n  secretRef: {name: s}\n  isFallback: false\n',
    });
    expect(validatePath(dir).problems).toEqual([
      '' +
        join(dir, 'q.yaml') +
        ':7:16: error: invalid YAML (document 0): unterminated double-quoted value: the " opened here is never closed',
    ]);
  });

  test('--output sarif and github', () => {
    const report = validatePath(tempDir({ 'bad.yaml': BAD }));
    const sarif = JSON.parse(formatReport(report, 'sarif')) as {
      version: string;
      runs: {
        tool: { driver: { rules: { id: string }[] } };
        results: {
          ruleId: string;
          level: string;
          locations: { physicalLocation: { region: { startLine: number } } }[];
        }[];
      }[];
    };
    expect(sarif.version).toBe('2.1.0');
    expect(
      sarif.runs[0]!.results.map((r) => [r.ruleId, r.level, r.locations[0]!.physicalLocation.region.startLine]),
    ).toEqual([
      ['byok/schema', 'error', 8],
      ['byok/secret-not-in-files', 'warning', 8],
      ['byok/schema', 'error', 14],
    ]);
    expect(sarif.runs[0]!.tool.driver.rules.map((r) => r.id)).toEqual(['byok/schema', 'byok/secret-not-in-files']);
    const github = formatReport(report, 'github').split('\n');
    expect(github[0]).toMatch(
      /^::error file=[^,]*bad\.yaml,line=8,col=1,title=BYOKCredential\/both::spec: isByokOnly cannot be combined with isFallback$/,
    );
    expect(github[1]).toMatch(/^::warning file=.*,line=8,col=\d+,title=BYOKCredential\/both::spec\.secretRef\.name: /);
  });

  test('--output json and junit', () => {
    const report = validatePath(tempDir({ 'bad.yaml': BAD }));
    const json = JSON.parse(formatReport(report, 'json')) as {
      checked: number;
      errors: number;
      findings: { file: string; line: number; path: string }[];
      resources: { object: string; valid: boolean }[];
    };
    // One line per problem: the bad hash fails the schema's pattern and length too, but is reported once.
    expect(json).toMatchObject({ checked: 2, errors: 2, warnings: 1 });
    expect(json.findings.map((f) => [f.line, f.path])).toEqual([
      [8, 'spec'],
      [8, 'spec.secretRef.name'],
      [14, 'spec.hash'],
    ]);
    expect(json.resources.map((r) => [r.object, r.valid])).toEqual([
      ['BYOKCredential/both', false],
      ['GatewayAPIKey/k', false],
    ]);
    const junit = formatReport(report, 'junit');
    expect(junit).toMatch(
      /^<\?xml version="1.0" encoding="UTF-8"\?>\n<testsuites name="byok-operator validate" tests="2" failures="2">/,
    );
    expect(junit).toMatch(
      /<testcase classname="[^"]*bad\.yaml" name="BYOKCredential\/both" file="[^"]*bad\.yaml" line="5">\n      <failure type="error" message="spec: isByokOnly cannot be combined with isFallback">/,
    );
    const ok = formatReport(validatePath(join(import.meta.dirname, '..', '..', '..', 'config', 'samples')), 'junit');
    expect(ok).toMatch(/tests="7" failures="0"/);
    expect(ok).not.toContain('<failure');
  });
});
