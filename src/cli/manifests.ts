// Reads Kubernetes manifests (multi-document YAML or JSON) from files, folders or stdin, expanding `kind: List`
// (what `kubectl get -o yaml` prints), and keeps source positions so problems can be reported as file:line.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { type Document, isMap, isNode, LineCounter, parseAllDocuments } from 'yaml';

export type FieldPath = readonly (string | number)[];

export interface Position {
  line: number;
  column: number;
}

export interface LoadedManifest {
  file: string;
  /** Document number within the file (0-based). */
  index: number;
  /** Item number when the document is a `kind: List`. */
  item?: number;
  object: unknown;
  /** Where the object starts. */
  position: Position;
  /** Position of a field (or of its closest existing parent); `['spec', 'x', 0]`. */
  locate(path: FieldPath): Position;
}

export interface ParseError {
  file: string;
  index: number;
  position: Position;
  message: string;
}

/** The path given for standard input. */
export const STDIN = '-';

export function manifestFiles(path: string): string[] {
  if (path === STDIN) return [STDIN];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { recursive: true, encoding: 'utf8' })
    .filter((f) => ['.yaml', '.yml', '.json'].includes(extname(f)))
    .map((f) => join(path, f))
    .filter((f) => statSync(f).isFile())
    .sort();
}

/** Parses one source text (a file's or stdin's content). */
export function parseManifests(file: string, text: string): { manifests: LoadedManifest[]; parseErrors: ParseError[] } {
  const manifests: LoadedManifest[] = [];
  const parseErrors: ParseError[] = [];
  const lines = new LineCounter();
  const at = (offset: number): Position => {
    const { line, col } = lines.linePos(offset);
    return { line, column: col };
  };
  parseAllDocuments(text, { lineCounter: lines }).forEach((doc, index) => {
    if (doc.errors.length > 0) {
      const err = doc.errors[0]!;
      // yaml's first line ends in its own " at line L, column C:" (the position is reported separately).
      const message = (err.message.split('\n')[0] ?? 'invalid YAML').replace(/ at line \d+, column \d+:?$/, '');
      const quote = err.code === 'MISSING_CHAR' ? /^Missing closing (["'])quote/.exec(message)?.[1] : undefined;
      const opened = quote === undefined ? -1 : openingQuote(text, err.pos[0], quote);
      parseErrors.push(
        opened < 0
          ? { file, index, position: at(err.pos[0]), message }
          : // An unterminated quote is noticed where the text ends; the mistake is where the quote opens.
            {
              file,
              index,
              position: at(opened),
              message: `unterminated ${quote === '"' ? 'double' : 'single'}-quoted value: the ${quote} opened here is never closed`,
            },
      );
      return;
    }
    const object: unknown = doc.toJS();
    if (object === null || object === undefined) return;
    const locator =
      (prefix: FieldPath) =>
      (path: FieldPath): Position =>
        locateIn(doc, [...prefix, ...path], at);
    const list = object as { kind?: unknown; items?: unknown };
    if (typeof list === 'object' && list.kind === 'List' && Array.isArray(list.items)) {
      list.items.forEach((item: unknown, i) => {
        const locate = locator(['items', i]);
        manifests.push({ file, index, item: i, object: item, position: locate([]), locate });
      });
      return;
    }
    const locate = locator([]);
    manifests.push({ file, index, object, position: locate([]), locate });
  });
  return { manifests, parseErrors };
}

/** Offset of the quote that opens the unterminated scalar yaml gave up on at `end`, or -1. */
function openingQuote(text: string, end: number, quote: string): number {
  for (let i = Math.min(end, text.length) - 1; i >= 0; i--) {
    if (text[i] !== quote) continue;
    const before = i === 0 ? '\n' : text[i - 1]!;
    // A scalar opens after white space or a flow indicator; an escaped \" or a doubled '' is content.
    if (/[\s[{,:-]/.test(before) && !(quote === "'" && text[i + 1] === "'")) return i;
  }
  return -1;
}

/** The key or node at `path`, or its closest existing parent. */
function locateIn(doc: Document, path: FieldPath, at: (offset: number) => Position): Position {
  // A field named by key is reported at its key (`provider: x` -> the line and column of `provider`).
  const start = typeof path.at(-1) === 'string' ? path.length - 1 : path.length;
  for (let n = start; n >= 0; n--) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (isNode(node) && node.range) {
      // For a map, point at the key of the next (missing or unknown) field when there is one.
      const next = path[n];
      if (n < path.length && isMap(node) && typeof next === 'string') {
        const pair = node.items.find((p) => isNode(p.key) && (p.key as { value?: unknown }).value === next);
        if (pair && isNode(pair.key) && pair.key.range) return at(pair.key.range[0]);
      }
      return at(node.range[0]);
    }
  }
  return { line: 1, column: 1 };
}

export function loadManifests(
  path: string,
  readStdin: () => string = () => readFileSync(0, 'utf8'),
): { manifests: LoadedManifest[]; parseErrors: ParseError[]; files: string[] } {
  const manifests: LoadedManifest[] = [];
  const parseErrors: ParseError[] = [];
  const files = manifestFiles(path);
  for (const file of files) {
    const text = file === STDIN ? readStdin() : readFileSync(file, 'utf8');
    const parsed = parseManifests(file === STDIN ? '<stdin>' : file, text);
    manifests.push(...parsed.manifests);
    parseErrors.push(...parsed.parseErrors);
  }
  return { manifests, parseErrors, files };
}
