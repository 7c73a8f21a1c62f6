// `byok-operator validate <path|->`: offline checks for GitOps CI, with the CRDs' own schemas and CEL rules (unknown
// fields at any depth included), the filter shape rules the operator applies (model slugs are `<vendor>/<model>`),
// and the operator's payload validation of every referenced Secret found among the manifests. Problems carry
// file:line:column, one line per problem; output as text, JSON, JUnit XML, SARIF or GitHub Actions annotations.
import type { V1Secret } from '@kubernetes/client-node';
import { describePayloadIssues } from '../domain/errors.ts';
import { FILTER_FIELDS, specFieldPath, validateFilterShape } from '../domain/filters.ts';
import { validatePayload } from '../domain/payloads.ts';
import { isProviderSlug } from '../domain/providers.ts';
import { bytesIssue } from '../domain/text.ts';
import { secretPayloadBytes } from '../kube/secret-payload.ts';
import { ConditionReason } from '../schema/conditions.ts';
import { validateManifest } from '../schema/validators.ts';
import { type FieldPath, type LoadedManifest, loadManifests, type Position } from './manifests.ts';

export type Severity = 'error' | 'warning';
export const OUTPUT_FORMATS = ['text', 'json', 'junit', 'sarif', 'github'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export interface Finding {
  severity: Severity;
  file: string;
  line: number;
  column: number;
  /** `Kind/name` of the object, absent for file-level findings (parse errors, nothing checked). */
  object?: string;
  /** Field path, e.g. `spec.allowedModels[2]`. */
  path?: string;
  message: string;
}

export interface CheckedResource {
  file: string;
  line: number;
  object: string;
  findings: Finding[];
}

export interface ValidationReport {
  /** byok.gateway.dev resources checked. */
  checked: number;
  /** Files read. */
  files: number;
  resources: CheckedResource[];
  /** Every finding, errors and warnings, in file order. */
  findings: Finding[];
  /** Formatted errors (one line each). */
  problems: string[];
}

/** `spec.allowedModels[2]` -> ['spec', 'allowedModels', 2]. */
function fieldPath(path: string): FieldPath {
  return path
    .split(/\.|(?=\[)/)
    .filter(Boolean)
    .map((part) => (/^\[\d+\]$/.test(part) ? Number(part.slice(1, -1)) : part));
}

/** The operator's filter rules that need no cluster (shape of hashes, user ids, model slugs). */
function filterFindings(manifest: LoadedManifest): { path: string; message: string }[] {
  const spec = (manifest.object as { spec?: Record<string, unknown> }).spec;
  if (!spec || typeof spec !== 'object') return [];
  const out: { path: string; message: string }[] = [];
  for (const field of FILTER_FIELDS) {
    const value = spec[specFieldPath(field)];
    if (!Array.isArray(value)) continue; // type errors come from the schema
    for (const v of validateFilterShape(field, value))
      out.push({ path: `spec.${specFieldPath(v.field)}`, message: v.message });
  }
  return out;
}

export function formatFinding(f: Finding): string {
  return `${f.file}:${f.line}:${f.column}: ${f.severity}: ${f.object ? `${f.object}: ` : ''}${f.path ? `${f.path}: ` : ''}${f.message}`;
}

interface SecretManifest {
  manifest: LoadedManifest;
  secret: V1Secret;
}

const nameOf = (o: unknown) => (o as { metadata?: { name?: unknown } }).metadata?.name;
const namespaceOf = (o: unknown) => {
  const ns = (o as { metadata?: { namespace?: unknown } }).metadata?.namespace;
  return typeof ns === 'string' ? ns : undefined;
};

/** Secrets among the manifests, by name and namespace (a manifest without a namespace matches any). */
function secretIndex(
  manifests: readonly LoadedManifest[],
): (name: string, namespace: string | undefined) => SecretManifest | undefined {
  const secrets: SecretManifest[] = [];
  for (const m of manifests) {
    const o = m.object as { apiVersion?: unknown; kind?: unknown };
    if (o && typeof o === 'object' && o.apiVersion === 'v1' && o.kind === 'Secret' && typeof nameOf(o) === 'string')
      secrets.push({ manifest: m, secret: o as V1Secret });
  }
  return (name, namespace) =>
    secrets.find(
      (s) =>
        nameOf(s.secret) === name &&
        (namespace === undefined || namespaceOf(s.secret) === undefined || namespaceOf(s.secret) === namespace),
    );
}

/**
 * Whether a `data:` value is a raw key rather than base64: not canonical base64 (Kubernetes refuses it on apply), or
 * base64 in form only (a plain alphanumeric key) that decodes to bytes that are not UTF-8 text.
 */
function rawUnderData(value: string, decoded: Uint8Array): boolean {
  const compact = value.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0) return true;
  return bytesIssue(decoded) !== null;
}

/**
 * What the reconciler would say about a credential's Secret (SecretNotFound, KeyNotFound, PayloadInvalid), checked
 * offline when the Secret is among the manifests. Messages never contain the payload.
 */
function secretFindings(
  manifest: LoadedManifest,
  object: string,
  findSecret: ReturnType<typeof secretIndex>,
): Finding[] {
  const spec = (manifest.object as { spec?: { provider?: unknown; secretRef?: { name?: unknown; key?: unknown } } })
    .spec;
  const ref = spec?.secretRef;
  if (typeof ref?.name !== 'string' || typeof spec?.provider !== 'string' || !isProviderSlug(spec.provider)) return []; // the schema reports these
  const key = typeof ref.key === 'string' ? ref.key : 'key';
  const found = findSecret(ref.name, namespaceOf(manifest.object));
  if (!found) {
    const at = manifest.locate(['spec', 'secretRef', 'name']);
    return [
      {
        severity: 'warning',
        file: manifest.file,
        ...at,
        object,
        path: 'spec.secretRef.name',
        message: `Secret "${ref.name}" is not among the checked files: its payload was not checked (the operator would report ${ConditionReason.SecretNotFound} if it does not exist)`,
      },
    ];
  }
  const secretObject = `Secret/${ref.name}`;
  const bytes = secretPayloadBytes(found.secret, key);
  const where = (field: 'data' | 'stringData') => found.manifest.locate([field, key]);
  const field = found.secret.data?.[key] !== undefined ? 'data' : 'stringData';
  if (bytes === undefined) {
    return [
      {
        severity: 'error',
        file: found.manifest.file,
        ...found.manifest.locate([found.secret.data ? 'data' : found.secret.stringData ? 'stringData' : 'metadata']),
        object: secretObject,
        path: `data.${key}`,
        message: `${ConditionReason.KeyNotFound}: the Secret has no key "${key}" (referenced by ${object})`,
      },
    ];
  }
  const at = { file: found.manifest.file, ...where(field), object: secretObject, path: `${field}.${key}` };
  if (field === 'data' && rawUnderData(found.secret.data![key]!, bytes)) {
    // The usual slip: a plain key pasted under `data:`, which Kubernetes base64-decodes into garbage.
    return [
      {
        severity: 'error',
        ...at,
        message: `${ConditionReason.PayloadInvalid} for ${spec.provider} (referenced by ${object}): data.${key} is not base64 (values under data: are base64-encoded); for a plain-text key use stringData: instead of data:`,
      },
    ];
  }
  const badBytes = bytesIssue(bytes);
  const result = badBytes
    ? { ok: false as const, errors: [{ field: '', message: badBytes.message }] }
    : validatePayload(spec.provider, Buffer.from(bytes).toString('utf8'));
  if (result.ok) return [];
  return [
    {
      severity: 'error',
      ...at,
      message: `${ConditionReason.PayloadInvalid} for ${spec.provider} (referenced by ${object}): ${describePayloadIssues(result.errors)}`,
    },
  ];
}

/**
 * One line per problem: where several rules refuse the same field (a bad hash fails the schema's length, its pattern
 * and the operator's rule), the most specific message stands: the operator's own, then CEL's, then the schema's first.
 */
function onePerPath(
  problems: readonly { path: string; message: string; rank: number }[],
): { path: string; message: string }[] {
  const best = new Map<string, { path: string; message: string; rank: number }>();
  for (const p of problems) {
    // Unknown fields are separate problems even on one parent.
    const key = p.message.startsWith('unknown field "') ? `${p.path}\n${p.message}` : p.path;
    const held = best.get(key);
    if (!held || p.rank > held.rank) best.set(key, p);
  }
  return [...best.values()];
}

export function validatePath(path: string, opts: { readStdin?: () => string } = {}): ValidationReport {
  const { manifests, parseErrors, files } = loadManifests(path, opts.readStdin);
  const findings: Finding[] = parseErrors.map((e) => ({
    severity: 'error',
    file: e.file,
    ...e.position,
    message: `invalid YAML (document ${e.index}): ${e.message}`,
  }));
  const resources: CheckedResource[] = [];
  const findSecret = secretIndex(manifests);
  for (const manifest of manifests) {
    const verdict = validateManifest(manifest.object);
    if (!verdict) continue;
    const object = `${verdict.kind}/${verdict.name}`;
    const own: Finding[] = [];
    const ranked = [
      ...verdict.problems.map((p) => ({ ...p, rank: p.source === 'cel' ? 1 : 0 })),
      ...(verdict.kind === 'BYOKCredential' ? filterFindings(manifest).map((p) => ({ ...p, rank: 2 })) : []),
    ];
    for (const p of onePerPath(ranked)) {
      // An unknown field is reported on its parent; point at the field's own key.
      const unknown = /^unknown field "([^"]+)"/.exec(p.message)?.[1];
      const at: Position = manifest.locate([...fieldPath(p.path), ...(unknown !== undefined ? [unknown] : [])]);
      own.push({ severity: 'error', file: manifest.file, ...at, object, path: p.path, message: p.message });
    }
    if (verdict.kind === 'BYOKCredential') own.push(...secretFindings(manifest, object, findSecret));
    resources.push({ file: manifest.file, line: manifest.position.line, object, findings: own });
    findings.push(...own);
  }
  if (resources.length === 0 && parseErrors.length === 0) {
    findings.push({
      severity: 'warning',
      file: path === '-' ? '<stdin>' : path,
      line: 1,
      column: 1,
      message:
        files.length === 0
          ? 'no .yaml, .yml or .json files found: nothing was checked'
          : `no byok.gateway.dev resources in ${files.length} file(s): nothing was checked`,
    });
  }
  return {
    checked: resources.length,
    files: files.length,
    resources,
    findings,
    problems: findings.filter((f) => f.severity === 'error').map(formatFinding),
  };
}

/** Exit status: 1 when there are errors, or (with strict) warnings such as nothing checked; else 0. */
export function exitCode(report: ValidationReport, strict: boolean): number {
  if (report.findings.some((f) => f.severity === 'error')) return 1;
  return strict && report.findings.length > 0 ? 1 : 0;
}

const xml = (s: string) =>
  s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);

/** A stable rule id per kind of finding, for SARIF consumers that group results. */
function ruleOf(f: Finding): string {
  if (!f.object) return f.message.startsWith('invalid YAML') ? 'byok/yaml' : 'byok/nothing-checked';
  if (f.object.startsWith('Secret/')) return 'byok/secret-payload';
  if (f.path === 'spec.secretRef.name' && f.severity === 'warning') return 'byok/secret-not-in-files';
  return f.message.startsWith('unknown field "') ? 'byok/unknown-field' : 'byok/schema';
}

const RULES: Record<string, string> = {
  'byok/yaml': 'The file is not valid YAML or JSON.',
  'byok/nothing-checked': 'No byok.gateway.dev resources were found.',
  'byok/secret-payload':
    'A referenced Secret is missing its key or holds a payload the operator would refuse (KeyNotFound, PayloadInvalid).',
  'byok/secret-not-in-files': 'A referenced Secret is not among the checked files, so its payload was not checked.',
  'byok/unknown-field': 'A field the CRD schema does not define (the apiserver would prune or refuse it).',
  'byok/schema': 'The CRD schema, a CEL rule or an operator filter rule refuses a value.',
};

/** GitHub Actions workflow commands: `%`, CR and LF escaped everywhere, `:` and `,` in properties too. */
const ghData = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
const ghProperty = (s: string) => ghData(s).replace(/:/g, '%3A').replace(/,/g, '%2C');

export function formatReport(report: ValidationReport, format: OutputFormat): string {
  const errors = report.findings.filter((f) => f.severity === 'error').length;
  const warnings = report.findings.length - errors;
  if (format === 'github') {
    const lines = report.findings.map(
      (f) =>
        `::${f.severity} file=${ghProperty(f.file)},line=${f.line},col=${f.column}${f.object ? `,title=${ghProperty(f.object)}` : ''}::${ghData(`${f.path ? `${f.path}: ` : ''}${f.message}`)}`,
    );
    lines.push(
      `${report.checked} byok.gateway.dev resources checked, ${errors} problems${warnings ? `, ${warnings} warning${warnings === 1 ? '' : 's'}` : ''}`,
    );
    return `${lines.join('\n')}\n`;
  }
  if (format === 'sarif') {
    const used = [...new Set(report.findings.map(ruleOf))].sort();
    const sarif = {
      $schema: 'https://json.schemastore.org/sarif-2.1.0.json',
      version: '2.1.0',
      runs: [
        {
          tool: {
            driver: {
              name: 'byok-operator validate',
              rules: used.map((id) => ({ id, shortDescription: { text: RULES[id] ?? id } })),
            },
          },
          results: report.findings.map((f) => ({
            ruleId: ruleOf(f),
            level: f.severity,
            message: { text: `${f.object ? `${f.object}: ` : ''}${f.path ? `${f.path}: ` : ''}${f.message}` },
            locations: [
              {
                physicalLocation: {
                  artifactLocation: { uri: f.file },
                  region: { startLine: f.line, startColumn: f.column },
                },
              },
            ],
          })),
        },
      ],
    };
    return `${JSON.stringify(sarif, null, 2)}\n`;
  }
  if (format === 'json') {
    return `${JSON.stringify({ checked: report.checked, files: report.files, errors, warnings, findings: report.findings, resources: report.resources.map(({ findings, ...r }) => ({ ...r, valid: findings.length === 0 })) }, null, 2)}\n`;
  }
  if (format === 'junit') {
    // One test case per resource; file-level findings (parse errors, nothing checked) are cases of their own.
    const cases: string[] = report.resources.map((r) => {
      const failures = r.findings.map(
        (f) =>
          `      <failure type="${f.severity}" message="${xml(`${f.path ?? ''}: ${f.message}`)}">${xml(formatFinding(f))}</failure>`,
      );
      return `    <testcase classname="${xml(r.file)}" name="${xml(r.object)}" file="${xml(r.file)}" line="${r.line}">${failures.length ? `\n${failures.join('\n')}\n    ` : ''}</testcase>`;
    });
    for (const f of report.findings.filter((x) => !x.object)) {
      const tag = f.severity === 'error' ? 'failure' : 'skipped';
      cases.push(
        `    <testcase classname="${xml(f.file)}" name="${xml(f.file)}" file="${xml(f.file)}" line="${f.line}">\n      <${tag} message="${xml(f.message)}">${xml(formatFinding(f))}</${tag}>\n    </testcase>`,
      );
    }
    const failed =
      report.resources.filter((r) => r.findings.length > 0).length +
      report.findings.filter((f) => !f.object && f.severity === 'error').length;
    const skipped = report.findings.filter((f) => !f.object && f.severity === 'warning').length;
    return [
      '<?xml version="1.0" encoding="UTF-8"?>',
      `<testsuites name="byok-operator validate" tests="${cases.length}" failures="${failed}">`,
      `  <testsuite name="byok-operator validate" tests="${cases.length}" failures="${failed}" errors="0" skipped="${skipped}">`,
      ...cases,
      '  </testsuite>',
      '</testsuites>',
      '',
    ].join('\n');
  }
  const lines = report.findings.map(formatFinding);
  lines.push(
    `${report.checked} byok.gateway.dev resources checked, ${errors} problems${warnings ? `, ${warnings} warning${warnings === 1 ? '' : 's'}` : ''}`,
  );
  return `${lines.join('\n')}\n`;
}
