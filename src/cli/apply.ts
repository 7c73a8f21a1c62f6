// Server-Side Apply of arbitrary manifests (the dev command's sample data), with the project's field manager.
import { type KubeConfig, type KubernetesObject, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { FIELD_MANAGER } from '../kube/apply.ts';

export async function applyObjects(kubeConfig: KubeConfig, objects: KubernetesObject[]): Promise<void> {
  const client = KubernetesObjectApi.makeApiClient(kubeConfig);
  for (const object of objects) {
    await client.patch(object, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  }
}
