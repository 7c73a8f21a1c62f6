// What wakes the BYOKCredential reconciler (credential.ts): its own spec changes, and the siblings whose implicit
// sort order they move; its Secret; the GatewayAPIKeys (of any account) naming a hash it allows; its Workspace; its namespace's Account
// (the gate and the quota); and a deletion, which frees a place in the quota.
import type { V1Secret } from '@kubernetes/client-node';
import { INDEX } from '../../kube/resources.ts';
import type { BYOKCredential } from '../../schema/generated/types.ts';
import { type Controller, onSpecChange } from './controller.ts';
import type { CredentialReconciler } from './credential.ts';
import { namespacesNaming } from './key-holders.ts';
import { namespacedName, nsOf } from './objects.ts';
import { sortSection } from './sort-order.ts';

export function credentialController(reconciler: CredentialReconciler): Controller {
  return {
    for: 'credentials',
    watch({ credentials, secrets, apiKeys, workspaces, accounts }, enqueue) {
      // Credentials without spec.sortOrder are ordered among their provider and section: a change moves the others.
      const implicitSiblings = (c: BYOKCredential, old?: BYOKCredential) => {
        for (const other of credentials.list(nsOf(c))) {
          if (other.spec.sortOrder !== undefined || other.metadata.name === c.metadata.name) continue;
          const same = (x: BYOKCredential) =>
            x.spec.provider === other.spec.provider && sortSection(x) === sortSection(other);
          if (same(c) || (old && same(old))) enqueue(namespacedName(other));
        }
      };
      onSpecChange(
        credentials,
        (c, old) => {
          enqueue(namespacedName(c));
          if (
            !old ||
            old.spec.provider !== c.spec.provider ||
            sortSection(old) !== sortSection(c) ||
            old.spec.sortOrder !== c.spec.sortOrder
          )
            implicitSiblings(c, old);
        },
        (c) => {
          // A freed place in the quota goes to the oldest credential waiting for one.
          for (const k of reconciler.forget(c)) enqueue(k);
          implicitSiblings(c);
        },
      );

      const secretChanged = (s: V1Secret) => {
        for (const c of credentials.byIndex(INDEX.secret, `${nsOf(s)}/${s.metadata?.name ?? ''}`))
          enqueue(namespacedName(c));
      };
      secrets.on('add', secretChanged);
      secrets.on('update', (s, old) => {
        if (s.metadata?.resourceVersion !== old.metadata?.resourceVersion) secretChanged(s);
      });
      secrets.on('delete', secretChanged);

      // A key's arrival or deletion can move its hash's holder to another account: wake the filters of every holder.
      onSpecChange(apiKeys, (k, old) => {
        for (const h of new Set([k.spec.hash, old?.spec.hash, k.spec.previousHash, old?.spec.previousHash])) {
          if (!h) continue;
          for (const ns of new Set([nsOf(k), ...namespacesNaming(apiKeys, h)]))
            for (const c of credentials.byIndex(INDEX.apiKeyHash, `${ns}/${h}`)) enqueue(namespacedName(c));
        }
      });
      onSpecChange(workspaces, (w) => {
        for (const c of credentials.byIndex(INDEX.workspace, `${nsOf(w)}/${w.metadata.name ?? ''}`))
          enqueue(namespacedName(c));
      });
      // The credential quota may have changed, or the namespace gained or lost its Account (the gate).
      onSpecChange(accounts, (a) => {
        for (const c of credentials.list(nsOf(a))) enqueue(namespacedName(c));
      });
    },
    reconcile: (key) => reconciler.reconcile(key),
  };
}
