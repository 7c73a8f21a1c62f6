// Reading the spend journal's lines back. A line is bytes from disk: a write cut by a kill or a full disk, a line
// from another version, or anything a hand left there. Every line is checked for the exact shape this process
// writes before anything of it is used, and one that does not fit is skipped with a reason (the caller counts it
// and names its file and line), never a TypeError that stops every start. Work is linear in the line's bytes
// (JSON.parse plus one walk of what it built), and a line longer than any real entry is skipped unparsed.
import type { Reservation } from '../../contract/spend-gate.ts';
import type { PlanName } from '../../domain/compiled.ts';
import { idNamespace } from '../keys.ts';
import type { CounterIncrement } from '../ledger.ts';
import type { SpendRecord } from './spend-record.ts';

/** Longer than any entry this code writes (a record of the most keys a request has is ~1.5 KB; an ack line of a 10 ms burst well under this). */
export const MAX_LINE_BYTES = 1 << 20;

export type JournalLine =
  | { kind: 'r'; plan: SpendRecord }
  | { kind: 'h'; hold: Reservation }
  | { kind: 'a'; ids: string[] };

const PLANS: readonly string[] = ['pay-as-you-go', 'enterprise'] satisfies PlanName[];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const isMicros = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isExpiry = (v: unknown): v is number | null => v === null || Number.isSafeInteger(v);
const own = (o: Obj, k: string): unknown => (Object.hasOwn(o, k) ? o[k] : undefined);

function strings(v: unknown): string[] | string {
  if (!Array.isArray(v)) return 'not an array';
  for (const s of v) if (!isStr(s)) return 'an element is not a non-empty string';
  return v as string[];
}

function increment(v: unknown): CounterIncrement | string {
  if (!isObj(v)) return 'an increment is not an object';
  const key = own(v, 'key');
  const by = own(v, 'by');
  const expiresAt = own(v, 'expiresAt');
  if (!isStr(key)) return 'an increment has no key';
  if (!isMicros(by)) return `the increment of ${key} is not a non-negative safe integer`;
  if (!isExpiry(expiresAt)) return `the increment of ${key} has no integer or null expiresAt`;
  return { key, by, expiresAt };
}

function recordPlan(v: unknown): SpendRecord | string {
  if (!isObj(v)) return 'the record is not an object';
  const id = own(v, 'id');
  if (!isStr(id)) return 'the record has no id';
  const incs = own(v, 'increments');
  if (!Array.isArray(incs)) return `record ${id}: increments is not an array`;
  const increments: CounterIncrement[] = [];
  for (const i of incs) {
    const inc = increment(i);
    if (typeof inc === 'string') return `record ${id}: ${inc}`;
    increments.push(inc);
  }
  const charged = own(v, 'chargedMicros');
  if (!isMicros(charged)) return `record ${id}: chargedMicros is not a non-negative safe integer`;
  const plan: SpendRecord = { id, increments, chargedMicros: charged };
  const settle = own(v, 'settle');
  if (settle !== undefined) {
    const s = holdRelease(settle, 'amount');
    if (typeof s === 'string') return `record ${id}: settle: ${s}`;
    plan.settle = { id: s.id, amount: s.amountMicros, holdKeys: s.holdKeys };
  }
  const byok = own(v, 'byok');
  if (byok !== undefined) {
    if (!isObj(byok)) return `record ${id}: byok is not an object`;
    const p = own(byok, 'plan');
    const list = own(byok, 'listCostMicros');
    const feeKey = own(byok, 'feeKey');
    const feeExpiresAt = own(byok, 'feeExpiresAt');
    if (typeof p !== 'string' || !PLANS.includes(p) || !isMicros(list) || !isStr(feeKey) || !isExpiry(feeExpiresAt))
      return `record ${id}: byok is malformed`;
    // The fee is read back as the first increment's total: a BYOK record without one has nothing to compute it from.
    if (increments.length === 0) return `record ${id}: a BYOK record without increments`;
    plan.byok = { plan: p as PlanName, listCostMicros: list, feeKey, feeExpiresAt };
  }
  const keep = own(v, 'keep');
  if (keep !== undefined) {
    // The id's landed mark lives beside the account's counters (one Redis Cluster slot): never another account's key.
    const ns = idNamespace(increments[0]?.key ?? plan.settle?.holdKeys[0] ?? '');
    if (!isStr(keep) || ns === '' || !keep.startsWith(`${ns}:`))
      return `record ${id}: keep is not a key of the record's account`;
    plan.keep = keep;
  }
  return plan;
}

/** A reservation as journaled ({id, amountMicros, holdKeys}), or a record's settle ({id, amount, holdKeys}). */
function holdRelease(v: unknown, amountField: 'amountMicros' | 'amount'): Reservation | string {
  if (!isObj(v)) return 'not an object';
  const id = own(v, 'id');
  const amount = own(v, amountField);
  const keys = strings(own(v, 'holdKeys'));
  if (!isStr(id)) return 'no id';
  if (!isMicros(amount)) return `${id}: the amount is not a non-negative safe integer`;
  if (typeof keys === 'string') return `${id}: holdKeys is ${keys}`;
  return { id, amountMicros: amount, holdKeys: keys };
}

/** One journal line (without its newline), or why it cannot be used. */
export function parseJournalLine(bytes: Buffer, start: number, end: number): JournalLine | { error: string } {
  if (end - start > MAX_LINE_BYTES) return { error: `longer than ${MAX_LINE_BYTES} bytes` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8', start, end));
  } catch {
    return { error: 'not JSON (a write cut short)' };
  }
  if (!isObj(parsed)) return { error: 'not a JSON object' };
  const keys = Object.keys(parsed);
  if (keys.length !== 1) return { error: 'not exactly one of "r", "h", "a"' };
  const [kind] = keys as [string];
  const v = parsed[kind];
  if (kind === 'r') {
    const plan = recordPlan(v);
    return typeof plan === 'string' ? { error: plan } : { kind: 'r', plan };
  }
  if (kind === 'h') {
    const hold = holdRelease(v, 'amountMicros');
    return typeof hold === 'string' ? { error: `hold ${hold}` } : { kind: 'h', hold };
  }
  if (kind === 'a') {
    const ids = strings(v);
    return typeof ids === 'string' ? { error: `ack: ${ids}` } : { kind: 'a', ids };
  }
  return { error: `unknown entry "${kind.slice(0, 20)}"` };
}
