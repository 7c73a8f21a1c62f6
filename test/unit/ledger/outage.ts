// The embedded ledger behind a switch: while `down`, every call fails as an unreachable ledger does
// (LedgerUnavailableError), without reaching the counters. What the gate's parts see in a Redis outage; the
// outage itself against a real redis-server is in test/integration/ledger/.
import {
  createEmbeddedLedger,
  type EmbeddedLedger,
  type Ledger,
  LedgerUnavailableError,
} from '../../../src/ledger/index.ts';

export interface SwitchedLedger extends Ledger {
  readonly inner: EmbeddedLedger;
  down: boolean;
  /** Calls refused while down, by method. */
  refused: Record<string, number>;
}

export function switchedLedger(inner: EmbeddedLedger = createEmbeddedLedger()): SwitchedLedger {
  const refused: Record<string, number> = {};
  const gate = <T>(op: string, call: () => Promise<T>): Promise<T> => {
    if (!ledger.down) return call();
    refused[op] = (refused[op] ?? 0) + 1;
    return Promise.reject(new LedgerUnavailableError(`ledger down (${op})`));
  };
  const ledger: SwitchedLedger = {
    backend: 'embedded',
    inner,
    down: false,
    refused,
    read: (keys) => gate('read', () => inner.read(keys)),
    add: (increments, settle, id, keep) => gate('add', () => inner.add(increments, settle, id, keep)),
    forgetKept: (keys) => gate('forgetKept', () => inner.forgetKept(keys)),
    reserve: (req) => gate('reserve', () => inner.reserve(req)),
    restore: (validatedKey, entries) => gate('restore', () => inner.restore(validatedKey, entries)),
    release: (id, amount, holdKeys) => gate('release', () => inner.release(id, amount, holdKeys)),
    admitRate: (check) => gate('admitRate', () => inner.admitRate(check)),
    settleRate: (check, used) => gate('settleRate', () => inner.settleRate(check, used)),
    // The counters outlive the gateway, as Redis does: closing a gate leaves them readable (close `inner` to end them).
    close: async () => {},
  };
  return ledger;
}
