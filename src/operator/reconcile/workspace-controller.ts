// What wakes the Workspace reconciler (workspace.ts): its own spec changes, a sibling's default flag (default-ness
// decides conflicts between siblings), and any Guardrail of its namespace (a missing guardrail is its verdict).

import type { ResourceInformers } from '../../kube/resources.ts';
import { type Controller, onSpecChange } from './controller.ts';
import { namespacedName, nsOf } from './objects.ts';
import type { StatusWriter } from './status-writer.ts';
import { reconcileWorkspace } from './workspace.ts';

export function workspaceController(deps: { informers: ResourceInformers; writer: StatusWriter }): Controller {
  return {
    for: 'workspaces',
    watch({ workspaces, guardrails }, enqueue) {
      onSpecChange(workspaces, (w, old) => {
        enqueue(namespacedName(w));
        if (w.spec.default || old?.spec.default)
          for (const other of workspaces.list(nsOf(w))) if (other.spec.default) enqueue(namespacedName(other));
      });
      onSpecChange(guardrails, (g) => {
        for (const w of workspaces.list(nsOf(g))) enqueue(namespacedName(w));
      });
    },
    reconcile: (key) => reconcileWorkspace(deps, key),
  };
}
