// Continue tokens: the list-order key of the last object served, so the next page starts just after it (a cursor,
// not an offset: objects created or deleted between pages never shift a page). A token is client input, so every
// position is checked against the resource's key types.
import { StatusError } from '../status.ts';
import type { CursorField, CursorKey } from './resource.ts';

/** A continue token is a few fields of one object; anything longer is not one of ours. */
const MAX_CONTINUE_LENGTH = 1024;
const TOKEN_VERSION = 1;

/** Position by position: strings by code unit, false before true, numbers by value. */
export function compareCursor(a: CursorKey, b: CursorKey): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === y) continue;
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (typeof x === 'number' && typeof y === 'number') return x - y;
    if (typeof x === 'boolean') return x ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return 0;
}

export const encodeCursor = (key: CursorKey): string =>
  Buffer.from(JSON.stringify([TOKEN_VERSION, ...key])).toString('base64url');

const fits = (v: unknown, type: CursorField): boolean =>
  type === 'integer' ? typeof v === 'number' && Number.isSafeInteger(v) : typeof v === type;

/** The key in a continue token, or a 400. */
export function decodeCursor(token: string, types: readonly CursorField[]): CursorKey {
  try {
    if (token.length > MAX_CONTINUE_LENGTH) throw new Error('too long');
    const t: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (!Array.isArray(t) || t.length !== types.length + 1 || t[0] !== TOKEN_VERSION) throw new Error('shape');
    const key = t.slice(1) as unknown[];
    if (!key.every((v, i) => fits(v, types[i] as CursorField))) throw new Error('types');
    return key as CursorKey;
  } catch {
    throw new StatusError(400, 'BadRequest', 'continue: invalid continue token');
  }
}
