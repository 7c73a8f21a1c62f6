// What every payload shape validates with: one ajv instance, error objects turned into field-and-rule messages, JSON
// parsing that never quotes the input, and the plain-key rule. Secrets never reach an error: ajv runs with verbose
// off, and every message is written here or in a shape module from the keyword and the schema, never from the data.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { PayloadIssue } from '../errors.ts';
import { textIssue, UNSAFE_TEXT_CLASS } from '../text.ts';

export const NO_SPACE = '^\\S+$';
export const HTTPS = '^https://';

// `verbose: false` keeps the validated data out of error objects; messages below are built from keyword + schema.
const ajv = new Ajv({ allErrors: true, verbose: false, strict: true, allowUnionTypes: false });
// ajv-formats is CommonJS; under NodeNext its default import is the module object or the plugin, depending on loader.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  a: Ajv,
  formats: string[],
) => Ajv;
addFormats(ajv, ['email', 'uri']);

/** A shape's JSON Schema, compiled once on the shared instance. */
export function compileSchema(schema: Record<string, unknown>): ValidateFunction {
  return ajv.compile(schema);
}

/** Field name -> what its `pattern` or `format` requires, said without the value. */
export type FieldRules = Readonly<Record<string, string>>;

// Unknown property names are echoed only when they look like field names, since a pasted secret could be a key.
const FIELD_NAME_LIKE = /^[a-z][a-z_]*(?:[A-Z][a-z]+)*$/;

function joinPath(prefix: string, pointer: string): string {
  let out = prefix;
  if (pointer === '') return out;
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^[0-9]+$/.test(seg) ? `[${seg}]` : out === '' ? seg : `.${seg}`;
  }
  return out;
}

function child(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`;
}

function lastSegment(path: string): string {
  const dot = path.lastIndexOf('.');
  return dot < 0 ? path : path.slice(dot + 1);
}

function article(type: string): string {
  return type === 'object' || type === 'array' || type === 'integer' ? `an ${type}` : `a ${type}`;
}

function issueFor(e: ErrorObject, prefix: string, rules: FieldRules): PayloadIssue {
  const path = joinPath(prefix, e.instancePath);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return { field: child(path, String(p['missingProperty'])), message: 'is required' };
    case 'additionalProperty':
    case 'additionalProperties': {
      const name = String(p['additionalProperty']);
      return name.length <= 32 && FIELD_NAME_LIKE.test(name)
        ? { field: child(path, name), message: 'is not a recognised field' }
        : { field: path, message: 'contains an unrecognised field' };
    }
    case 'type':
      return { field: path, message: `must be ${article(String(p['type']))}` };
    case 'minLength':
      return { field: path, message: 'must not be empty' };
    case 'const':
      return { field: path, message: `must be ${JSON.stringify(p['allowedValue'])}` };
    case 'enum':
      return { field: path, message: `must be one of: ${(p['allowedValues'] as unknown[]).join(', ')}` };
    case 'pattern':
    case 'format': {
      const name = lastSegment(path);
      return {
        field: path,
        message: (Object.hasOwn(rules, name) ? rules[name] : undefined) ?? 'has an invalid format',
      };
    }
    default:
      return { field: path, message: 'is invalid' };
  }
}

/** Validates `data`, appending one issue per failing field and rule to `into`; true when it passed. */
export function runSchema(
  validate: ValidateFunction,
  data: unknown,
  prefix: string,
  rules: FieldRules,
  into: PayloadIssue[],
): boolean {
  if (validate(data)) return true;
  const seen = new Set<string>();
  for (const e of validate.errors ?? []) {
    const issue = issueFor(e, prefix, rules);
    const key = `${issue.field}\u0000${issue.message}`;
    // A failing format and pattern on one field would otherwise say the same thing twice.
    if (!seen.has(key)) {
      seen.add(key);
      into.push(issue);
    }
  }
  return false;
}

type Parsed = { ok: true; value: unknown } | { ok: false; issue: PayloadIssue };

export function parseJson(text: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    // V8's message can quote the input, so only the position number is kept.
    const pos = /position (\d+)/.exec(err instanceof Error ? err.message : '');
    return { ok: false, issue: { field: '', message: `is not valid JSON${pos ? ` (at character ${pos[1]})` : ''}` } };
  }
}

/** The parsed document of a JSON-only shape, or undefined after recording why there is none. */
export function jsonDocument(text: string, looksJson: boolean, shapeRule: string, errors: PayloadIssue[]): unknown {
  if (!looksJson) {
    errors.push({ field: '', message: text === '' ? 'must not be empty' : shapeRule });
    return undefined;
  }
  const parsed = parseJson(text);
  if (!parsed.ok) {
    errors.push(parsed.issue);
    return undefined;
  }
  return parsed.value;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The string field `name` of a JSON object, or null. */
export function stringField(value: unknown, name: string): string | null {
  if (!isObject(value)) return null;
  const v = value[name];
  return typeof v === 'string' ? v : null;
}

/** What trim() removes around a key that textIssue allows there: \s without VT, FF and U+2028/2029. */
const TRIMMABLE = '[\\t\\n\\r \\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000\\ufeff]';
/**
 * The plain-key rule below as one JSON Schema pattern: after trimming whitespace, non-empty, one line without
 * control characters, separators or noncharacters, not starting with a bracket (a JSON document pasted for a
 * plain-key provider).
 */
export const PLAIN_KEY_PATTERN = `^${TRIMMABLE}*[^\\s${UNSAFE_TEXT_CLASS}\\[{][^${UNSAFE_TEXT_CLASS}]*${TRIMMABLE}*$`;

/** A trimmed plain key, or null after recording why it is not one. */
export function plainKey(text: string, errors: PayloadIssue[]): string | null {
  if (text === '') {
    errors.push({ field: '', message: 'must not be empty' });
    return null;
  }
  // A key travels in an HTTP header, which cannot carry control characters (a pasted line break, two keys pasted).
  const bad = textIssue(text);
  if (bad) {
    errors.push({ field: '', message: `must be a single line without control characters; it ${bad.message}` });
    return null;
  }
  return text;
}

/** A catalog URL template with its `{name}` placeholders filled; unknown ones stay as written. */
export function fillTemplate(template: string, values: Record<string, string>): string {
  return template.replace(/\{([a-z_]+)\}/g, (whole, name: string) => values[name] ?? whole);
}

/**
 * The two forms of a shape that takes a plain key or a JSON object: the key (when the text does not look like JSON),
 * or the object; null when neither, with the issue recorded. `objectForm` names the object in the error.
 */
export function plainKeyOrObject(
  text: string,
  looksJson: boolean,
  objectForm: string,
  errors: PayloadIssue[],
): { key: string } | { object: Record<string, unknown> } | null {
  if (!looksJson) {
    const key = plainKey(text, errors);
    return key === null ? null : { key };
  }
  const parsed = parseJson(text);
  if (!parsed.ok) {
    errors.push(parsed.issue);
    return null;
  }
  if (!isObject(parsed.value)) {
    errors.push({ field: '', message: `must be a plain API key or an object ${objectForm}` });
    return null;
  }
  return { object: parsed.value };
}
