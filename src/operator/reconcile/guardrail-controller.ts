// What wakes the Guardrail reconciler (guardrail.ts): its own spec changes. The Workspaces and GatewayAPIKeys that
// name a guardrail watch Guardrails themselves.

import type { ResourceInformers } from '../../kube/resources.ts';
import { type Controller, onSpecChange } from './controller.ts';
import { reconcileGuardrail } from './guardrail.ts';
import { namespacedName } from './objects.ts';
import type { StatusWriter } from './status-writer.ts';

export function guardrailController(deps: { informers: ResourceInformers; writer: StatusWriter }): Controller {
  return {
    for: 'guardrails',
    watch({ guardrails }, enqueue) {
      onSpecChange(guardrails, (g) => enqueue(namespacedName(g)));
    },
    reconcile: (key) => reconcileGuardrail(deps, key),
  };
}
