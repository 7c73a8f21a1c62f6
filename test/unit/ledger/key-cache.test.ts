// The gate's key cache: one set of key strings per scope object and day, equal to what the key space builds.
import { describe, expect, test } from '@jest/globals';
import { GateKeyCache } from '../../../src/ledger/gate/key-cache.ts';
import { keySpace, windowsAt } from '../../../src/ledger/index.ts';
import { ledgerAccount, WS1 } from '../../support/ledger-fixtures.ts';

const keys = keySpace({ prefix: 't:' });
const NOV23 = windowsAt(new Date('2026-11-23T10:00:00Z'));
const NOV24 = windowsAt(new Date('2026-11-24T10:00:00Z'));

describe('GateKeyCache', () => {
  test('builds the key space keys of every window of a scope, once per scope object and day', () => {
    const cache = new GateKeyCache(keys);
    const ws = { id: WS1 };
    const first = cache.scope('acct', 'workspace', ws, NOV23);
    expect(first.daily).toEqual({
      nonbyok: keys.budget('acct', 'workspace', WS1, NOV23.daily, 'nonbyok'),
      byok: keys.budget('acct', 'workspace', WS1, NOV23.daily, 'byok'),
      both: [
        keys.budget('acct', 'workspace', WS1, NOV23.daily, 'nonbyok'),
        keys.budget('acct', 'workspace', WS1, NOV23.daily, 'byok'),
      ],
      hold: keys.hold('acct', 'workspace', WS1, NOV23.daily),
      expiresAt: keys.expiresAt(NOV23.daily),
    });
    expect(first.lifetime.expiresAt).toBeNull();
    // Same object, same day: the very same strings (no new hashing in the counters' maps).
    expect(cache.scope('acct', 'workspace', ws, NOV23)).toBe(first);
    // Another day, another account, or a reloaded config (a new object): rebuilt.
    const nextDay = cache.scope('acct', 'workspace', ws, NOV24);
    expect(nextDay).not.toBe(first);
    expect(nextDay.daily.nonbyok).toBe(keys.budget('acct', 'workspace', WS1, NOV24.daily, 'nonbyok'));
    expect(cache.scope('other', 'workspace', ws, NOV24).daily.hold).toContain('{other}');
    expect(cache.scope('acct', 'workspace', { id: WS1 }, NOV24)).not.toBe(nextDay);
  });

  test("an account's month meters and validated key", () => {
    const cache = new GateKeyCache(keys);
    const acc = ledgerAccount();
    const a = cache.account(acc, NOV23);
    expect(a).toMatchObject({
      validated: keys.validated(acc.accountId),
      byokList: keys.account(acc.accountId, NOV23.monthly, 'byok_list'),
      fee: keys.account(acc.accountId, NOV23.monthly, 'fee'),
      charged: keys.account(acc.accountId, NOV23.monthly, 'charged'),
      expiresAt: keys.expiresAt(NOV23.monthly),
    });
    expect(cache.account(acc, NOV23)).toBe(a);
    expect(cache.account(acc, NOV24)).not.toBe(a);
  });
});
