// Text hygiene for every free-text value a tenant can send (keys, names, filter entries, ids). Both doors (REST
// and Git/kubectl) apply these rules, so a value that one door refuses is refused by the other too. The point is
// integrity, not taste: YAML (which the apiserver uses for apply bodies and `kubectl get -o yaml`) refuses C0/C1
// controls, terminals interpret them, and replaced or lone UTF-16 halves mean the stored value differs from the
// one sent. Messages name the problem and its position, never the text.

export type TextIssueCode =
  | 'control_character'
  | 'line_separator'
  | 'noncharacter'
  | 'lone_surrogate'
  | 'replacement_character'
  | 'invalid_utf8';

export interface TextIssue {
  readonly code: TextIssueCode;
  /** 0-based UTF-16 index of the first offending character (-1 for byte-level problems). */
  readonly index: number;
  readonly message: string;
}

export interface TextRules {
  /** Allow TAB, LF and CR (multi-line payloads such as a pretty-printed service-account JSON). Default false. */
  multiline?: boolean;
}

const hex = (cp: number) => `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;

function issue(code: TextIssueCode, index: number, cp: number): TextIssue {
  const at = `at position ${index}`;
  switch (code) {
    case 'control_character':
      return { code, index, message: `contains a control character (${hex(cp)}) ${at}` };
    case 'line_separator':
      return { code, index, message: `contains a Unicode line or paragraph separator (${hex(cp)}) ${at}` };
    case 'noncharacter':
      return { code, index, message: `contains a Unicode noncharacter (${hex(cp)}) ${at}` };
    case 'lone_surrogate':
      return { code, index, message: `contains an unpaired UTF-16 surrogate (${hex(cp)}) ${at}` };
    case 'replacement_character':
      return { code, index, message: `contains U+FFFD, the replacement character left by invalid UTF-8, ${at}` };
    default:
      return { code, index, message: 'is not valid UTF-8' };
  }
}

/**
 * The single-line characters `textIssue` refuses, as the body of an ECMA-262 character class (JSON Schema
 * patterns of the REST OpenAPI document). Lone surrogates and astral noncharacters are refused too, but no portable
 * pattern says so.
 */
export const UNSAFE_TEXT_CLASS = '\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029\\ufdd0-\\ufdef\\ufffd-\\uffff';

/** The first character that makes `value` unsafe to store, or null when it is clean. */
export function textIssue(value: string, rules: TextRules = {}): TextIssue | null {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    // Fast path: printable ASCII and ordinary BMP text.
    if ((c >= 0x20 && c < 0x7f) || (c >= 0xa0 && c < 0xd800)) {
      if (c === 0x2028 || c === 0x2029) return issue('line_separator', i, c);
      if (c >= 0xfdd0 && c <= 0xfdef) return issue('noncharacter', i, c);
      continue;
    }
    if (c < 0x20 || (c >= 0x7f && c < 0xa0)) {
      if (rules.multiline && (c === 0x09 || c === 0x0a || c === 0x0d)) continue;
      return issue('control_character', i, c);
    }
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return issue('lone_surrogate', i, c);
      const cp = ((c - 0xd800) << 10) + (next - 0xdc00) + 0x10000;
      if ((cp & 0xfffe) === 0xfffe) return issue('noncharacter', i, cp);
      i++;
      continue;
    }
    if (c >= 0xdc00 && c <= 0xdfff) return issue('lone_surrogate', i, c);
    // 0xe000..0xffff
    if (c >= 0xfdd0 && c <= 0xfdef) return issue('noncharacter', i, c);
    if (c === 0xfffe || c === 0xffff) return issue('noncharacter', i, c);
    if (c === 0xfffd) return issue('replacement_character', i, c);
  }
  return null;
}

/** Checks raw bytes before they are decoded (a Secret's data, a request body): invalid UTF-8 would be replaced silently. */
export function bytesIssue(bytes: Uint8Array): TextIssue | null {
  // TextDecoder with fatal: true is the standard strict UTF-8 check (no I/O, available everywhere).
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return null;
  } catch {
    return issue('invalid_utf8', -1, 0);
  }
}

/**
 * Characters the apiserver's YAML decoder refuses, or that JSON-in-YAML readers mangle, even inside a quoted
 * string: DEL, C1 controls, U+2028/2029 and the BMP noncharacters U+FFFE/U+FFFF. JSON.stringify leaves them raw.
 */
const YAML_UNSAFE = /[\u007f-\u009f\u2028\u2029\ufffe\uffff]/g;
/** Unpaired surrogates: JSON.stringify writes them as \udXXX escapes, which YAML decoders reject; U+FFFD stands in. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * JSON text that every YAML 1.2 decoder reads back as the same value: the characters YAML refuses are written as
 * \uXXXX escapes. Use for every body sent with an apply-patch+yaml content type, so no tenant's text can make a
 * shared write fail.
 */
export function yamlSafeJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    typeof v === 'string' ? v.replace(LONE_SURROGATE, '\ufffd') : v,
  ).replace(YAML_UNSAFE, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
