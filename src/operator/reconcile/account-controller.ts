// What wakes the Account reconciler (account.ts): a change of any Account of the namespace (the oldest one is the
// account; the others are Conflicting). The compile pipeline's quarantines enqueue through setQuarantine().
import type { AccountReconciler } from './account.ts';
import { type Controller, onSpecChange } from './controller.ts';
import { namespacedName, nsOf } from './objects.ts';

export function accountController(reconciler: AccountReconciler): Controller {
  return {
    for: 'accounts',
    watch({ accounts }, enqueue) {
      onSpecChange(accounts, (a) => {
        for (const other of accounts.list(nsOf(a))) enqueue(namespacedName(other));
        enqueue(namespacedName(a));
      });
    },
    reconcile: (key) => reconciler.reconcile(key),
  };
}
