// The import statements of a TypeScript file, read with a parser (swc, which the unit tests already compile with)
// rather than a pattern: quotes of either kind, `import type`, `export … from`, side-effect imports and dynamic
// `import('…')` are all seen, and text inside strings or comments never counts.
// (TypeScript 7's package offers no in-process parser, only an IPC client to the native compiler.)
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseSync } from '@swc/core';

export interface ModuleReference {
  /** The specifier as written. */
  spec: string;
  /** `import type` / `export type`: erased at run time. Imports with some `type` specifiers still load the module. */
  typeOnly: boolean;
  /** `import('…')` with a literal specifier. */
  dynamic: boolean;
}

type Node = Record<string, unknown>;

const isNode = (value: unknown): value is Node => typeof value === 'object' && value !== null;

/** Every dynamic `import('literal')` below a node (any depth: they sit inside functions). */
function dynamicImports(node: unknown, out: ModuleReference[]): void {
  if (Array.isArray(node)) {
    for (const child of node) dynamicImports(child, out);
    return;
  }
  if (!isNode(node)) return;
  if (node.type === 'CallExpression' && isNode(node.callee) && node.callee.type === 'Import') {
    const [first] = node.arguments as { expression: Node }[];
    const arg = first?.expression;
    if (arg?.type === 'StringLiteral') out.push({ spec: arg.value as string, typeOnly: false, dynamic: true });
    else if (arg?.type === 'TemplateLiteral' && (arg.expressions as unknown[]).length === 0) {
      const [quasi] = arg.quasis as { cooked?: string; raw: string }[];
      out.push({ spec: quasi?.cooked ?? quasi?.raw ?? '', typeOnly: false, dynamic: true });
    }
  }
  for (const [key, value] of Object.entries(node))
    if (key !== 'span' && typeof value === 'object') dynamicImports(value, out);
}

/** The modules a file's source names: static imports and re-exports, then dynamic imports. */
export function moduleReferences(source: string, fileName = 'input.ts'): ModuleReference[] {
  let program;
  try {
    program = parseSync(source, { syntax: 'typescript', tsx: fileName.endsWith('.tsx'), target: 'es2024' });
  } catch (error) {
    throw new Error(`${fileName}: cannot parse: ${String(error)}`, { cause: error });
  }
  const out: ModuleReference[] = [];
  for (const item of program.body) {
    if (item.type === 'ImportDeclaration')
      out.push({ spec: item.source.value, typeOnly: item.typeOnly, dynamic: false });
    else if (item.type === 'ExportAllDeclaration')
      out.push({
        spec: item.source.value,
        typeOnly: Boolean((item as { typeOnly?: boolean }).typeOnly),
        dynamic: false,
      });
    else if (item.type === 'ExportNamedDeclaration' && item.source)
      out.push({ spec: item.source.value, typeOnly: item.typeOnly, dynamic: false });
    else if (item.type === 'TsImportEqualsDeclaration' && item.moduleRef.type === 'TsExternalModuleReference') {
      out.push({ spec: item.moduleRef.expression.value, typeOnly: item.isTypeOnly, dynamic: false });
    }
  }
  dynamicImports(program.body, out);
  return out;
}

/** Every module below `dir` (.ts, .mts, .mjs), as absolute paths: what the architecture tests read. */
export function moduleFilesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts|mjs)$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}
