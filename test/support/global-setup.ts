// Starts one real etcd + kube-apiserver for the whole integration run and installs the CRDs.
// Tests find it through BYOK_TEST_KUBECONFIG (workers inherit this process's environment).
import { startControlPlane } from '../../src/controlplane/control-plane.ts';
import { installCrds } from '../../src/controlplane/install-crds.ts';
import { setControlPlane } from './control-plane-handle.ts';

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const controlPlane = await startControlPlane({ log: (line) => process.stderr.write(`[control-plane] ${line}\n`) });
  setControlPlane(controlPlane);
  process.env.BYOK_TEST_KUBECONFIG = controlPlane.kubeconfigPath;
  process.env.BYOK_TEST_WORKDIR = controlPlane.workDir;
  await installCrds(controlPlane.kubeconfigPath);
  process.stderr.write(`[control-plane] ${controlPlane.version} ready with CRDs in ${Date.now() - started} ms\n`);
}
