// Label and field selectors (equality-based): parsed from the query, matched against an object's own labels and
// its strategy's field values. Keys are tenant input: only own properties ever match.
import { str } from '../request.ts';
import { StatusError } from '../status.ts';

export interface Requirement {
  key: string;
  op: '=' | '!=' | 'exists' | '!exists';
  value: string;
}

export class SelectorError extends Error {}

export function parseSelector(text: string | undefined): Requirement[] {
  if (text === undefined || text.trim() === '') return [];
  return text.split(',').map((part) => {
    const p = part.trim();
    let m = /^([^=!\s]+)\s*(==|=|!=)\s*([^=!\s]*)$/.exec(p);
    if (m) return { key: m[1] as string, op: m[2] === '!=' ? '!=' : '=', value: m[3] as string };
    m = /^(!?)([^=!\s()]+)$/.exec(p);
    if (m) return { key: m[2] as string, op: m[1] === '!' ? '!exists' : 'exists', value: '' };
    throw new SelectorError(`unsupported selector "${p}": use key=value, key!=value, key or !key`);
  });
}

export function matches(reqs: readonly Requirement[], values: Record<string, string | undefined>): boolean {
  return reqs.every((r) => {
    // Keys are tenant input (`-l constructor`): only the object's own labels count, never what a plain object inherits.
    const v = Object.hasOwn(values, r.key) ? values[r.key] : undefined;
    switch (r.op) {
      case '=':
        return v === r.value;
      case '!=':
        return v !== r.value;
      case 'exists':
        return v !== undefined;
      default:
        return v === undefined;
    }
  });
}

export interface Selection {
  labels: Requirement[];
  fields: Requirement[];
}

/** labelSelector and fieldSelector of a query; a 400 for a selector we cannot judge or a field we do not index. */
export function selectionOf(query: Record<string, unknown>, selectableFields: readonly string[]): Selection {
  try {
    const fields = parseSelector(str(query.fieldSelector));
    for (const f of fields)
      if (!selectableFields.includes(f.key)) throw new SelectorError(`field label not supported: ${f.key}`);
    return { labels: parseSelector(str(query.labelSelector)), fields };
  } catch (err) {
    if (err instanceof SelectorError) throw new StatusError(400, 'BadRequest', err.message);
    throw err;
  }
}
