// The compile pipeline's watches: a spec change of any of the five kinds, or its deletion, marks its namespace
// dirty so the account is compiled again (a GatewayAPIKey's, every namespace naming its hash). The reconcilers mark it too, when a verdict changes.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { ResourceInformers } from '../../kube/resources.ts';
import { onSpecChange } from '../reconcile/controller.ts';
import { namespacesNaming } from '../reconcile/key-holders.ts';
import { nsOf } from '../reconcile/objects.ts';

export function watchForCompile(informers: ResourceInformers, markDirty: (namespace: string) => void): void {
  const dirty = (o: KubernetesObject) => markDirty(nsOf(o));
  onSpecChange(informers.credentials, dirty);
  // Which account holds a hash can move when a key naming it arrives or leaves: every account naming it compiles again.
  onSpecChange(informers.apiKeys, (k, old) => {
    dirty(k);
    for (const h of new Set([k.spec?.hash, old?.spec?.hash, k.spec?.previousHash, old?.spec?.previousHash])) {
      if (h) for (const ns of namespacesNaming(informers.apiKeys, h)) if (ns !== nsOf(k)) markDirty(ns);
    }
  });
  onSpecChange(informers.workspaces, dirty);
  onSpecChange(informers.guardrails, dirty);
  onSpecChange(informers.accounts, dirty);
}
