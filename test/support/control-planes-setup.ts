// Starts the real etcd + kube-apiserver pairs for the integration run and installs the CRDs in each. One pair per
// Jest worker (BYOK_TEST_CONTROL_PLANES, capped by --maxWorkers; 1 by default): a worker runs its files one after
// another on its own pair, so files keep the isolation they had when the suite ran in one process, while their
// waits (apiserver round trips, stalls, process starts) overlap across workers.
// Workers find theirs through BYOK_TEST_KUBECONFIG_<worker id> (test/support/worker-control-plane.ts).
import { type ControlPlane, startControlPlane } from '../../src/controlplane/control-plane.ts';
import { installCrds } from '../../src/controlplane/install-crds.ts';
import { setControlPlanes } from './control-plane-handle.ts';

export function controlPlaneCount(maxWorkers: number, requested = process.env.BYOK_TEST_CONTROL_PLANES): number {
  const wanted = Number.parseInt(requested ?? '1', 10);
  return Math.max(1, Math.min(Number.isFinite(wanted) ? wanted : 1, maxWorkers));
}

async function startOne(index: number): Promise<ControlPlane> {
  const started = Date.now();
  const log = (line: string) => process.stderr.write(`[control-plane ${index}] ${line}\n`);
  const plane = await startControlPlane({ log });
  try {
    await installCrds(plane.kubeconfigPath);
  } catch (err) {
    await plane.stop();
    throw err;
  }
  log(`${plane.version} ready with CRDs in ${Date.now() - started} ms`);
  return plane;
}

export default async function startControlPlanes(globalConfig: { maxWorkers: number }): Promise<void> {
  const count = controlPlaneCount(globalConfig.maxWorkers);
  const results = await Promise.allSettled(Array.from({ length: count }, (_, i) => startOne(i + 1)));
  const planes = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(planes.map((plane) => plane.stop()));
    throw failed.reason;
  }
  setControlPlanes(planes);
  planes.forEach((plane, i) => {
    process.env[`BYOK_TEST_KUBECONFIG_${i + 1}`] = plane.kubeconfigPath;
    process.env[`BYOK_TEST_WORKDIR_${i + 1}`] = plane.workDir;
  });
  process.env.BYOK_TEST_CONTROL_PLANE_COUNT = String(planes.length);
  // A file run in band (worker id 1) and anything reading the plain names get the first pair.
  process.env.BYOK_TEST_KUBECONFIG = planes[0]!.kubeconfigPath;
  process.env.BYOK_TEST_WORKDIR = planes[0]!.workDir;
}
