// `byok-operator validate <path|->`: offline checks for GitOps CI, with the CRDs' own schemas and CEL rules,
// plus the filter shape rules the operator applies (model slugs are `<vendor>/<model>`). Problems carry
// file:line:column; output as text, JSON or JUnit XML (what CI systems render as test results).
import { FILTER_FIELDS, specFieldPath, validateFilterShape } from '../domain/filters.ts';
import { validateManifest } from '../schema/validators.ts';
import { loadManifests, type FieldPath, type LoadedManifest, type Position } from './manifests.ts';

export type Severity = 'error' | 'warning';
export const OUTPUT_FORMATS = ['text', 'json', 'junit'] as const;
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
  return path.split(/\.|(?=\[)/).filter(Boolean).map((part) => (/^\[\d+\]$/.test(part) ? Number(part.slice(1, -1)) : part));
}

/** The operator's filter rules that need no cluster (shape of hashes, user ids, model slugs). */
function filterFindings(manifest: LoadedManifest): { path: string; message: string }[] {
  const spec = (manifest.object as { spec?: Record<string, unknown> }).spec;
  if (!spec || typeof spec !== 'object') return [];
  const out: { path: string; message: string }[] = [];
  for (const field of FILTER_FIELDS) {
    const value = spec[specFieldPath(field)];
    if (!Array.isArray(value)) continue; // type errors come from the schema
    for (const v of validateFilterShape(field, value)) out.push({ path: `spec.${specFieldPath(v.field)}`, message: v.message });
  }
  return out;
}

export function formatFinding(f: Finding): string {
  return `${f.file}:${f.line}:${f.column}: ${f.severity}: ${f.object ? `${f.object}: ` : ''}${f.path ? `${f.path}: ` : ''}${f.message}`;
}

export function validatePath(path: string, opts: { readStdin?: () => string } = {}): ValidationReport {
  const { manifests, parseErrors, files } = loadManifests(path, opts.readStdin);
  const findings: Finding[] = parseErrors.map((e) => ({ severity: 'error', file: e.file, ...e.position, message: `invalid YAML (document ${e.index}): ${e.message}` }));
  const resources: CheckedResource[] = [];
  for (const manifest of manifests) {
    const verdict = validateManifest(manifest.object);
    if (!verdict) continue;
    const object = `${verdict.kind}/${verdict.name}`;
    const own: Finding[] = [];
    const seen = new Set<string>();
    const problems = [...verdict.problems, ...(verdict.kind === 'BYOKCredential' ? filterFindings(manifest) : [])];
    for (const p of problems) {
      const key = `${p.path}\n${p.message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      // An unknown field is reported on its parent; point at the field's own key.
      const unknown = /^unknown field "(.+)"$/.exec(p.message)?.[1];
      const at: Position = manifest.locate([...fieldPath(p.path), ...(unknown !== undefined ? [unknown] : [])]);
      own.push({ severity: 'error', file: manifest.file, ...at, object, path: p.path, message: p.message });
    }
    resources.push({ file: manifest.file, line: manifest.position.line, object, findings: own });
    findings.push(...own);
  }
  if (resources.length === 0 && parseErrors.length === 0) {
    findings.push({
      severity: 'warning',
      file: path === '-' ? '<stdin>' : path,
      line: 1,
      column: 1,
      message: files.length === 0 ? 'no .yaml, .yml or .json files found: nothing was checked' : `no byok.gateway.dev resources in ${files.length} file(s): nothing was checked`,
    });
  }
  return { checked: resources.length, files: files.length, resources, findings, problems: findings.filter((f) => f.severity === 'error').map(formatFinding) };
}

/** Exit status: 1 when there are errors, or (with strict) warnings such as nothing checked; else 0. */
export function exitCode(report: ValidationReport, strict: boolean): number {
  if (report.findings.some((f) => f.severity === 'error')) return 1;
  return strict && report.findings.length > 0 ? 1 : 0;
}

const xml = (s: string) => s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);

export function formatReport(report: ValidationReport, format: OutputFormat): string {
  const errors = report.findings.filter((f) => f.severity === 'error').length;
  const warnings = report.findings.length - errors;
  if (format === 'json') {
    return `${JSON.stringify({ checked: report.checked, files: report.files, errors, warnings, findings: report.findings, resources: report.resources.map(({ findings, ...r }) => ({ ...r, valid: findings.length === 0 })) }, null, 2)}\n`;
  }
  if (format === 'junit') {
    // One test case per resource; file-level findings (parse errors, nothing checked) are cases of their own.
    const cases: string[] = report.resources.map((r) => {
      const failures = r.findings.map((f) => `      <failure type="${f.severity}" message="${xml(`${f.path ?? ''}: ${f.message}`)}">${xml(formatFinding(f))}</failure>`);
      return `    <testcase classname="${xml(r.file)}" name="${xml(r.object)}" file="${xml(r.file)}" line="${r.line}">${failures.length ? `\n${failures.join('\n')}\n    ` : ''}</testcase>`;
    });
    for (const f of report.findings.filter((x) => !x.object)) {
      const tag = f.severity === 'error' ? 'failure' : 'skipped';
      cases.push(`    <testcase classname="${xml(f.file)}" name="${xml(f.file)}" file="${xml(f.file)}" line="${f.line}">\n      <${tag} message="${xml(f.message)}">${xml(formatFinding(f))}</${tag}>\n    </testcase>`);
    }
    const failed = report.resources.filter((r) => r.findings.length > 0).length + report.findings.filter((f) => !f.object && f.severity === 'error').length;
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
  lines.push(`${report.checked} byok.gateway.dev resources checked, ${errors} problems${warnings ? `, ${warnings} warning${warnings === 1 ? '' : 's'}` : ''}`);
  return `${lines.join('\n')}\n`;
}
