// Offline validation of custom resources with the same schemas and CEL rules the apiserver enforces, so a
// GitOps pipeline can reject a bad manifest before it reaches a cluster. Transition rules (those that read
// oldSelf) need the stored object and are left to the apiserver.
import { evaluate } from '@marcbachmann/cel-js';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { closestName } from '../domain/hints.ts';
import type { CelRule, SchemaNode } from './json-schema.ts';
import { API_VERSION, RESOURCES, type ResourceDefinition } from './resources.ts';

export interface ManifestProblem {
  path: string;
  message: string;
  /** Which check refused it: the structural schema or a CEL rule (CEL messages are the more specific). */
  source: 'schema' | 'cel';
}

export interface ManifestVerdict {
  kind: string;
  name: string;
  problems: ManifestProblem[];
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

type Compiled = Map<string, { resource: ResourceDefinition; validate: ValidateFunction }>;
let compiledByKind: Compiled | undefined;

// Compiled on first use: the CLI imports this module for `validate`, and `operator`/`api` should not pay for it.
function compiled(): Compiled {
  if (compiledByKind) return compiledByKind;
  const ajv = new Ajv({ allErrors: true, verbose: true, useDefaults: true, strict: true, strictRequired: false });
  ajv.addVocabulary([
    'x-kubernetes-validations',
    'x-kubernetes-list-type',
    'x-kubernetes-list-map-keys',
    'x-kubernetes-map-type',
    'x-kubernetes-preserve-unknown-fields',
  ]);
  addFormats(ajv);
  compiledByKind = new Map(RESOURCES.map((r) => [r.kind, { resource: r, validate: ajv.compile(closed(r.spec)) }]));
  return compiledByKind;
}

/**
 * The schema with every object that lists its properties closed (`additionalProperties: false`) at any depth: an
 * unknown field anywhere (`budgets: { montly: 100 }`) is one the apiserver would prune or, with kubectl's strict
 * field validation, refuse. Objects that keep unknown fields or declare their own additionalProperties stay open.
 */
function closed(node: SchemaNode): SchemaNode {
  const out: SchemaNode = { ...node };
  if (node.properties) {
    out.properties = Object.fromEntries(Object.entries(node.properties).map(([k, v]) => [k, closed(v)]));
    if (node.additionalProperties === undefined && !node['x-kubernetes-preserve-unknown-fields'])
      out.additionalProperties = false;
  }
  if (node.items) out.items = closed(node.items);
  return out;
}

function ajvProblem(error: ErrorObject): ManifestProblem {
  const path = `spec${error.instancePath.replace(/\/(\d+)(?=\/|$)/g, '[$1]').replaceAll('/', '.')}`;
  if (error.keyword === 'additionalProperties') {
    const field = String(error.params.additionalProperty);
    const known = Object.keys((error.parentSchema as SchemaNode | undefined)?.properties ?? {});
    const hint = closestName(field, known);
    return { path, message: `unknown field "${field}"${hint ? `; did you mean "${hint}"?` : ''}`, source: 'schema' };
  }
  if (error.keyword === 'enum')
    return { path, message: enumMessage(error.data, error.params.allowedValues as unknown[]), source: 'schema' };
  return { path, message: error.message ?? error.keyword, source: 'schema' };
}

/** Names the value, suggests the closest allowed one (a typo is the usual cause) and lists them all. */
function enumMessage(value: unknown, allowed: readonly unknown[]): string {
  const names = allowed.map(String);
  const hint = typeof value === 'string' ? closestName(value, names) : undefined;
  return `unsupported value ${JSON.stringify(value)}${hint ? `; did you mean "${hint}"?` : '.'} Allowed values: ${names.join(', ')}`;
}

function celProblems(node: SchemaNode, value: unknown, path: string): ManifestProblem[] {
  const problems: ManifestProblem[] = [];
  const rules: CelRule[] = (node['x-kubernetes-validations'] ?? []).filter((r) => !r.rule.includes('oldSelf'));
  for (const rule of rules) {
    let ok = false;
    try {
      ok = evaluate(rule.rule, { self: value }) === true;
    } catch {
      ok = false;
    }
    if (!ok) problems.push({ path, message: rule.message, source: 'cel' });
  }
  if (node.properties && value && typeof value === 'object' && !Array.isArray(value)) {
    for (const [key, child] of Object.entries(node.properties)) {
      const childValue = (value as Record<string, unknown>)[key];
      if (childValue !== undefined) problems.push(...celProblems(child, childValue, `${path}.${key}`));
    }
  }
  return problems;
}

/** Validates one parsed manifest. Objects outside the byok.gateway.dev group are not ours: returns null. */
export function validateManifest(manifest: unknown): ManifestVerdict | null {
  if (!manifest || typeof manifest !== 'object') return null;
  const { apiVersion, kind, metadata, spec } = manifest as {
    apiVersion?: unknown;
    kind?: unknown;
    metadata?: { name?: unknown };
    spec?: unknown;
  };
  if (typeof apiVersion !== 'string' || !apiVersion.startsWith('byok.gateway.dev/')) return null;
  const name = typeof metadata?.name === 'string' ? metadata.name : '<unnamed>';
  const entry = typeof kind === 'string' ? compiled().get(kind) : undefined;
  if (apiVersion !== API_VERSION || !entry) {
    return {
      kind: String(kind),
      name,
      problems: [{ path: 'apiVersion', message: `unknown kind ${String(kind)} in ${apiVersion}`, source: 'schema' }],
    };
  }
  if (spec === undefined)
    return {
      kind: entry.resource.kind,
      name,
      problems: [{ path: 'spec', message: 'Required value', source: 'schema' }],
    };
  // JSON round-trip rather than structuredClone: the copy must belong to this realm for the CEL evaluator.
  const copy: unknown = JSON.parse(JSON.stringify(spec));
  const problems = entry.validate(copy)
    ? celProblems(entry.resource.spec, copy, 'spec')
    : (entry.validate.errors ?? []).map(ajvProblem);
  return { kind: entry.resource.kind, name, problems };
}
