// `byok-operator bundle-key stage | activate <keyId> | rotate`: rotate the data key that seals credential
// bundles. Stage first, let kubelet deliver the new key to gateway pods (about a minute), then activate; the
// leader reseals every bundle within seconds. See docs/compiler.md ("The key Secret and rotation").
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { DEFAULT_BUNDLE_KEY_SECRET } from '../contract/envelope.ts';
import { activateBundleKey, addBundleKey, ensureBundleKey } from '../operator/compile/bundle-key.ts';
import { kubeRoutingStore } from '../operator/compile/store.ts';

export type BundleKeyAction = { action: 'stage' } | { action: 'rotate' } | { action: 'activate'; keyId: string };

/** Returns the key id that was staged, activated or rotated to. */
export async function bundleKeyCommand(kubeConfig: KubeAccess, routingNamespace: string, request: BundleKeyAction, secretName = DEFAULT_BUNDLE_KEY_SECRET): Promise<string> {
  const store = kubeRoutingStore(kubeConfig, routingNamespace);
  await ensureBundleKey(store, routingNamespace, secretName);
  if (request.action === 'activate') {
    await activateBundleKey(store, secretName, request.keyId);
    return request.keyId;
  }
  return addBundleKey(store, secretName, { activate: request.action === 'rotate' });
}
