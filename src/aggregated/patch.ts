// JSON merge patch (RFC 7386) and JSON patch (RFC 6902) on plain JSON values. Pure; the inputs are not mutated.
// Patch paths and keys are tenant input: a token or key that names a prototype (`__proto__`, `constructor`,
// `prototype`) is refused, and containers are only ever walked through their own properties.
import { PROTOTYPE_KEYS } from '../domain/json.ts';

export class PatchError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const refusePrototypeKey = (key: string) => {
  if (PROTOTYPE_KEYS.has(key))
    throw new PatchError(`the key ${JSON.stringify(key)} cannot be patched: no field here has that name`);
};

/** An object's own property, never one it inherits. */
const own = (o: Record<string, unknown>, key: string): unknown => (Object.hasOwn(o, key) ? o[key] : undefined);

export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    refusePrototypeKey(k);
    if (v === null) delete out[k];
    else out[k] = mergePatch(own(out, k), v);
  }
  return out;
}

function pointer(path: unknown): string[] {
  if (typeof path !== 'string' || (path !== '' && !path.startsWith('/')))
    throw new PatchError(`invalid JSON pointer ${JSON.stringify(path)}`);
  const tokens =
    path === ''
      ? []
      : path
          .slice(1)
          .split('/')
          .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  tokens.forEach(refusePrototypeKey);
  return tokens;
}

/** Parent container and last token of a pointer, in a deep copy the patch may mutate. */
function locate(doc: unknown, tokens: string[]): { parent: Record<string, unknown> | unknown[]; last: string } {
  let cur = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isObject(cur)) cur = own(cur, t);
    else cur = undefined;
    if (cur === undefined) throw new PatchError(`path ${tokens.join('/')} does not exist`);
  }
  if (!Array.isArray(cur) && !isObject(cur)) throw new PatchError(`path ${tokens.join('/')} does not exist`);
  return { parent: cur, last: tokens[tokens.length - 1] as string };
}

function read(doc: unknown, tokens: string[]): unknown {
  let cur = doc;
  for (const t of tokens) {
    cur = Array.isArray(cur) ? cur[Number(t)] : isObject(cur) ? own(cur, t) : undefined;
    if (cur === undefined) throw new PatchError(`path /${tokens.join('/')} does not exist`);
  }
  return cur;
}

function arrayIndex(arr: unknown[], token: string, forInsert: boolean): number {
  if (forInsert && token === '-') return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(token)) throw new PatchError(`invalid array index ${token}`);
  const i = Number(token);
  if (i > arr.length || (!forInsert && i === arr.length)) throw new PatchError(`array index ${token} out of range`);
  return i;
}

function add(doc: unknown, tokens: string[], value: unknown): unknown {
  if (tokens.length === 0) return value;
  const { parent, last } = locate(doc, tokens);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, true), 0, value);
  else parent[last] = value;
  return doc;
}

function remove(doc: unknown, tokens: string[]): unknown {
  if (tokens.length === 0) throw new PatchError('cannot remove the whole document');
  const { parent, last } = locate(doc, tokens);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, false), 1);
  else {
    if (!Object.hasOwn(parent, last)) throw new PatchError(`path /${tokens.join('/')} does not exist`);
    delete parent[last];
  }
  return doc;
}

export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw new PatchError('a JSON patch must be an array of operations');
  let doc = structuredClone(target);
  for (const raw of ops) {
    if (!isObject(raw)) throw new PatchError('each JSON patch operation must be an object');
    const path = pointer(raw.path);
    switch (raw.op) {
      case 'add':
        doc = add(doc, path, structuredClone(raw.value));
        break;
      case 'remove':
        doc = remove(doc, path);
        break;
      case 'replace':
        read(doc, path);
        doc = add(remove(doc, path), path, structuredClone(raw.value));
        break;
      case 'test':
        if (JSON.stringify(read(doc, path)) !== JSON.stringify(raw.value))
          throw new PatchError(`test failed at ${String(raw.path)}`);
        break;
      case 'move': {
        const from = pointer(raw.from);
        const v = read(doc, from);
        doc = add(remove(doc, from), path, v);
        break;
      }
      case 'copy':
        doc = add(doc, path, structuredClone(read(doc, pointer(raw.from))));
        break;
      default:
        throw new PatchError(`unsupported JSON patch operation ${JSON.stringify(raw.op)}`);
    }
  }
  return doc;
}
