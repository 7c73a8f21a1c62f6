// What wakes the GatewayAPIKey reconciler (gateway-api-key.ts): its own spec changes, and those of every key, in
// any account, naming the same hash (one's arrival or deletion decides which holds it); its Workspace, and for keys
// that name none the namespace's default flag; for keys that name a guardrail, any Guardrail of the namespace; and
// the namespace's Accounts (the gate).
import { INDEX } from '../../kube/resources.ts';
import { type Controller, onSpecChange } from './controller.ts';
import { type ApiKeyReconcileDeps, reconcileApiKey } from './gateway-api-key.ts';
import { keysNaming } from './key-holders.ts';
import { namespacedName, nsOf } from './objects.ts';

export function apiKeyController(deps: ApiKeyReconcileDeps): Controller {
  return {
    for: 'apiKeys',
    watch({ apiKeys, workspaces, guardrails, accounts }, enqueue) {
      onSpecChange(apiKeys, (k, old) => {
        enqueue(namespacedName(k));
        for (const h of new Set([k.spec?.hash, old?.spec?.hash, k.spec?.previousHash, old?.spec?.previousHash])) {
          if (h)
            for (const other of keysNaming(apiKeys, h))
              if (namespacedName(other) !== namespacedName(k)) enqueue(namespacedName(other));
        }
      });
      onSpecChange(workspaces, (w, old) => {
        const ns = nsOf(w);
        for (const k of apiKeys.byIndex(INDEX.workspace, `${ns}/${w.metadata.name ?? ''}`)) enqueue(namespacedName(k));
        // Keys that name no workspace use the default one: their NoWorkspace verdict follows the default flag.
        if (w.spec.default || old?.spec.default)
          for (const k of apiKeys.list(ns)) if (!k.spec.workspace) enqueue(namespacedName(k));
      });
      onSpecChange(guardrails, (g) => {
        for (const k of apiKeys.list(nsOf(g))) if (k.spec.guardrail) enqueue(namespacedName(k));
      });
      onSpecChange(accounts, (a) => {
        for (const k of apiKeys.list(nsOf(a))) enqueue(namespacedName(k));
      });
    },
    reconcile: (key) => reconcileApiKey(deps, key),
  };
}
