// The ledger keys of budget scopes and accounts in today's windows, built once per scope and day instead of per
// request: the same string objects every time, so the counters' lookups hash nothing new (bench/ledger.ts). Keyed by
// the scope or account object of a loaded routing config: a config reload brings new objects and new keys.

import type { BudgetInterval } from '../../domain/compiled.ts';
import type { CompiledAccount } from '../../domain/index.ts';
import type { BudgetScopeKind, KeySpace } from '../keys.ts';
import type { DayWindows } from '../windows.ts';

/** One budget window's ledger keys for one scope. */
export interface WindowKeys {
  nonbyok: string;
  byok: string;
  /** [nonbyok, byok]: what a budget that includes BYOK counts. */
  both: readonly string[];
  hold: string;
  expiresAt: number | null;
}

export type ScopeKeys = { windows: DayWindows; accountId: string } & Record<BudgetInterval, WindowKeys>;

export interface AccountKeys {
  windows: DayWindows;
  validated: string;
  byokList: string;
  fee: string;
  charged: string;
  expiresAt: number | null;
}

export class GateKeyCache {
  readonly keys: KeySpace;
  private readonly scopes = new WeakMap<object, ScopeKeys>();
  private readonly accounts = new WeakMap<object, AccountKeys>();

  constructor(keys: KeySpace) {
    this.keys = keys;
  }

  /** The keys of a guardrail or workspace (`owner`) of `accountId` in `windows`. */
  scope(accountId: string, scope: BudgetScopeKind, owner: { id: string }, windows: DayWindows): ScopeKeys {
    const hit = this.scopes.get(owner);
    if (hit?.windows === windows && hit.accountId === accountId) return hit;
    const keysOf = (interval: BudgetInterval): WindowKeys => {
      const w = windows[interval];
      const nonbyok = this.keys.budget(accountId, scope, owner.id, w, 'nonbyok');
      const byok = this.keys.budget(accountId, scope, owner.id, w, 'byok');
      return {
        nonbyok,
        byok,
        both: [nonbyok, byok],
        hold: this.keys.hold(accountId, scope, owner.id, w),
        expiresAt: this.keys.expiresAt(w),
      };
    };
    const built: ScopeKeys = {
      windows,
      accountId,
      daily: keysOf('daily'),
      weekly: keysOf('weekly'),
      monthly: keysOf('monthly'),
      lifetime: keysOf('lifetime'),
    };
    this.scopes.set(owner, built);
    return built;
  }

  /** The account's month meters and its validated key. */
  account(account: CompiledAccount, windows: DayWindows): AccountKeys {
    const hit = this.accounts.get(account);
    if (hit?.windows === windows) return hit;
    const month = windows.monthly;
    const built: AccountKeys = {
      windows,
      validated: this.keys.validated(account.accountId),
      byokList: this.keys.account(account.accountId, month, 'byok_list'),
      fee: this.keys.account(account.accountId, month, 'fee'),
      charged: this.keys.account(account.accountId, month, 'charged'),
      expiresAt: this.keys.expiresAt(month),
    };
    this.accounts.set(account, built);
    return built;
  }
}
