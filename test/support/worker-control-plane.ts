// Runs before each integration file, in its worker: points BYOK_TEST_KUBECONFIG / BYOK_TEST_WORKDIR at this worker's
// control plane (control-planes-setup.ts starts one per worker). Worker ids count from 1; more workers than planes share.
const count = Number(process.env.BYOK_TEST_CONTROL_PLANE_COUNT ?? '1');
const worker = Number(process.env.JEST_WORKER_ID ?? '1');
const index = ((Math.max(1, worker) - 1) % Math.max(1, count)) + 1;
const kubeconfig = process.env[`BYOK_TEST_KUBECONFIG_${index}`];
const workDir = process.env[`BYOK_TEST_WORKDIR_${index}`];
if (kubeconfig && workDir) {
  process.env.BYOK_TEST_KUBECONFIG = kubeconfig;
  process.env.BYOK_TEST_WORKDIR = workDir;
}
