// The compile pipeline's watches: a spec change of any of the five kinds, or its deletion, marks its namespace
// dirty so the account is compiled again. The reconcilers mark it too, when a verdict changes.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { ResourceInformers } from '../../kube/resources.ts';
import { onSpecChange } from '../reconcile/controller.ts';
import { nsOf } from '../reconcile/objects.ts';

export function watchForCompile(informers: ResourceInformers, markDirty: (namespace: string) => void): void {
  const dirty = (o: KubernetesObject) => markDirty(nsOf(o));
  onSpecChange(informers.credentials, dirty);
  onSpecChange(informers.apiKeys, dirty);
  onSpecChange(informers.workspaces, dirty);
  onSpecChange(informers.guardrails, dirty);
  onSpecChange(informers.accounts, dirty);
}
