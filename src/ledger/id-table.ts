// Ids mapped to numbers, stored compactly. The ids a ledger remembers are almost all one process's generation ids,
// `<prefix><12 lowercase hex digits>` (completions.ts), some with a `:<word>` after them (a fee's `<id>:fee`). Such an
// id is kept as its 12 digits read as an integer, in a map of its family (the prefix and the word): the id string
// itself is not kept. Any other id is kept whole. The split is exact: an id is its family and its number put back
// together, so two ids never share an entry (test/unit/ledger/id-table.properties.test.ts).
//
// A process numbers its generations in turn, so a family's numbers come in runs: once a run of CHUNK numbers holds
// DENSE_AT of them, their values move from the family's map into one array, a slot per number (NaN: absent).
const DIGITS = 12;
/** Numbers per array: a run of a family's numbers that share one array once it is dense. */
const CHUNK = 64;
/** Ids of one run that make it dense: below it a sparse family costs a map entry per id and a count per run. */
const DENSE_AT = 8;
/** The longest `:<word>` after the digits that still makes an id compact. */
const MAX_WORD = 8;

export class IdTable {
  /** Family (the word, NUL, the prefix) -> its numbers and their values. */
  private readonly families = new Map<string, Family>();
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
    if (!split(id)) {
      const before = this.whole.size;
      this.whole.set(id, value);
      this.count += this.whole.size - before;
      return;
    }
    let family = this.families.get(parsed.family);
    if (family === undefined) this.families.set(parsed.family, (family = new Family()));
    if (family.set(parsed.digits, value)) this.count++;
  }

  get size(): number {
    return this.count;
  }
}

/** One family's numbers -> values: runs of CHUNK numbers in arrays once dense, the others in a map. */
class Family {
  private readonly sparse = new Map<number, number>();
  /** Run (number / CHUNK) -> how many of its numbers `sparse` holds, until it is dense. */
  private readonly sparseRuns = new Map<number, number>();
  private readonly dense = new Map<number, number[]>();

  get(n: number): number | undefined {
    const slots = this.dense.get(Math.floor(n / CHUNK));
    if (slots === undefined) return this.sparse.get(n);
    const v = slots[n % CHUNK]!;
    return Number.isNaN(v) ? this.sparse.get(n) : v;
  }

  /** Sets n's value; true when n is new to the family. */
  set(n: number, value: number): boolean {
    const run = Math.floor(n / CHUNK);
    const slots = this.dense.get(run);
    if (slots !== undefined) {
      const i = n % CHUNK;
      const had = !Number.isNaN(slots[i]!) || this.sparse.has(n);
      // NaN marks an empty slot, so a NaN value (never a ledger total) is kept in the map.
      if (Number.isNaN(value)) {
        slots[i] = Number.NaN;
        this.sparse.set(n, value);
      } else {
        slots[i] = value;
        this.sparse.delete(n);
      }
      return !had;
    }
    const before = this.sparse.size;
    this.sparse.set(n, value);
    if (this.sparse.size === before) return false;
    const held = (this.sparseRuns.get(run) ?? 0) + 1;
    if (held < DENSE_AT) this.sparseRuns.set(run, held);
    else this.makeDense(run);
    return true;
  }

  /** Moves a run's numbers from the map into an array of their own. */
  private makeDense(run: number): void {
    // A JS array of numbers keeps them unboxed (double elements), in the heap, without an ArrayBuffer per run.
    const slots: number[] = Array.from({ length: CHUNK }, () => Number.NaN);
    for (let i = 0; i < CHUNK; i++) {
      const n = run * CHUNK + i;
      const v = this.sparse.get(n);
      if (v === undefined || Number.isNaN(v)) continue;
      slots[i] = v;
      this.sparse.delete(n);
    }
    this.sparseRuns.delete(run);
    this.dense.set(run, slots);
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
