// Applies the generated CRDs and waits until the apiserver serves them (Established).
import { ApiextensionsV1Api, KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { createApplier } from '../kube/apply.ts';
import { buildCrds } from '../schema/crd.ts';

export async function installCrds(kubeconfigPath: string, timeoutMs = 30_000): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const crds = buildCrds();
  // Our applier, not client-node's patch: the text patterns hold U+2028 and noncharacters, which an apply body
  // must escape (src/kube/client.ts serializeBody).
  const applier = createApplier(kc);
  // Independent objects: applied side by side, which saves the round trips of a fresh apiserver at every start.
  await Promise.all(crds.map((crd) => applier.apply(crd as KubernetesObject)));
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (;;) {
      const live = await api.readCustomResourceDefinition({ name: crd.metadata!.name! });
      if (live.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${crd.metadata!.name} not Established after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
