// Applies the generated CRDs and waits until the apiserver serves them (Established).
import { ApiextensionsV1Api, KubeConfig, PatchStrategy, setHeaderOptions, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { FIELD_MANAGER } from '../kube/apply.ts';
import { buildCrds } from '../schema/crd.ts';


export async function installCrds(kubeconfigPath: string, timeoutMs = 30_000): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const crds = buildCrds();
  for (const crd of crds) {
    await api.patchCustomResourceDefinition(
      { name: crd.metadata!.name!, body: crd as V1CustomResourceDefinition, fieldManager: FIELD_MANAGER, force: true },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
  }
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
