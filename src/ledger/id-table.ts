// Ids mapped to numbers, stored compactly. The ids a ledger remembers are almost all one process's generation ids,
// `<prefix><12 lowercase hex digits>` (completions.ts), some with a `:<word>` after them (a fee's `<id>:fee`). Such an
// id is kept as its 12 digits read as an integer, in a map of its family (the prefix and the word): the id string
// itself is not kept. Any other id is kept whole. The split is exact: an id is its family and its number put back
// together, so two ids never share an entry (test/unit/ledger/id-table.properties.test.ts).
const DIGITS = 12;
/** The longest `:<word>` after the digits that still makes an id compact. */
const MAX_WORD = 8;

export class IdTable {
  /** Family (the word, NUL, the prefix) -> the digits as a number -> value. */
  private readonly families = new Map<string, Map<number, number>>();
  private readonly whole = new Map<string, number>();
  private count = 0;

  get(id: string): number | undefined {
    if (!split(id)) return this.whole.get(id);
    return this.families.get(parsed.family)?.get(parsed.digits);
  }

  has(id: string): boolean {
    return this.get(id) !== undefined;
  }

  set(id: string, value: number): void {
    if (!split(id)) return this.put(this.whole, id, value);
    let family = this.families.get(parsed.family);
    if (family === undefined) this.families.set(parsed.family, (family = new Map()));
    this.put(family, parsed.digits, value);
  }

  get size(): number {
    return this.count;
  }

  private put<K>(map: Map<K, number>, key: K, value: number): void {
    const before = map.size;
    map.set(key, value);
    this.count += map.size - before;
  }
}

/**
 * The last id split, shared by every table: a write looks its id up in two periods' tables, then sets it in one, so
 * the same string is split once. (One string is held a little longer; nothing else is kept.)
 */
const parsed = { id: '', compact: false, family: '', digits: 0 };

/**
 * The families of the last compact ids (a record and its fee alternate): the same name string is handed out again,
 * so a table's lookup finds its hash cached instead of building and hashing a new string per id.
 */
const recentFamilies: { prefix: string; word: string; name: string }[] = [];
const RECENT_FAMILIES = 2;

/** Splits `id` into `parsed`; false when it is not compact (kept whole). */
function split(id: string): boolean {
  if (id === parsed.id) return parsed.compact;
  parsed.id = id;
  const at = digitsStart(id);
  parsed.compact = at >= 0;
  if (at >= 0) {
    parsed.family = familyName(id, at);
    parsed.digits = digitsValue(id, at);
  }
  return parsed.compact;
}

function familyName(id: string, at: number): string {
  const wordLength = id.length - at - DIGITS;
  for (const f of recentFamilies)
    if (f.prefix.length === at && f.word.length === wordLength && id.startsWith(f.prefix) && id.endsWith(f.word))
      return f.name;
  const prefix = id.slice(0, at);
  const word = id.slice(at + DIGITS);
  // The word has no NUL (digitsStart allows a-z only): the first NUL ends it, so no two families share a name.
  const name = `${word}\0${prefix}`;
  if (recentFamilies.length === RECENT_FAMILIES) recentFamilies.pop();
  recentFamilies.unshift({ prefix, word, name });
  return name;
}

const COLON = 58;
const isLowerHex = (c: number) => (c >= 48 && c <= 57) || (c >= 97 && c <= 102);
const isLowerLetter = (c: number) => c >= 97 && c <= 122;

/** Where an id's 12 digits start (before an optional `:<word>` of 1-8 letters), or -1 when it has no such end. */
function digitsStart(id: string): number {
  let end = id.length;
  for (let i = id.length - 1; i >= 0 && i >= id.length - MAX_WORD - 1; i--) {
    const c = id.charCodeAt(i);
    if (c === COLON) {
      if (i < id.length - 1) end = i;
      break;
    }
    if (!isLowerLetter(c)) break;
  }
  const start = end - DIGITS;
  if (start < 0) return -1;
  for (let i = start; i < end; i++) if (!isLowerHex(id.charCodeAt(i))) return -1;
  return start;
}

/** The 12 hex digits at `at` as an integer (at most 2^48: exact in a double). */
function digitsValue(id: string, at: number): number {
  let n = 0;
  for (let i = at; i < at + DIGITS; i++) {
    const c = id.charCodeAt(i);
    n = n * 16 + (c <= 57 ? c - 48 : c - 87);
  }
  return n;
}
