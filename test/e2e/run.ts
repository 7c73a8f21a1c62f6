// The end-to-end run: the image built here, a one-node cluster from parts with a real kubelet and kube-router
// enforcing NetworkPolicies, and the chart installed as docs/install.md tells users, with ten gateway replicas and the
// delivery stream on, then switched off. Each check prints one line; the run writes its figures (delivery timings,
// apiserver cost, network-policy results) to a JSON file, ends with `e2e: N passed, N failed` and
// `e2e figures: <path>`, and exits non-zero on any failure. Everything it starts it tears down, interfaces, iptables
// chains and ipsets included.
//
//   npm run e2e            (node scripts/bootstrap.mjs --control-plane -- node test/e2e/run.ts)
//   BYOK_E2E_KEEP=1        leave the cluster up after the checks (Ctrl-C tears it down)
//   BYOK_E2E_FIGURES=FILE  where the figures go (default: a new file in the system's temp directory)
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type ControlPlane, startControlPlane } from '../../src/controlplane/control-plane.ts';
import { startUpstreams, type Upstreams } from '../support/upstreams.ts';
import { adminApi } from './api.ts';
import { log, results } from './checks.ts';
import { type ClusterDns, startClusterDns } from './dns.ts';
import { BRIDGE_ADDRESS, createBridge, deleteBridge, PAUSE_IMAGE, type RunningNode, startNode } from './node.ts';
import { type Cluster, deliveryChecks } from './scenario.ts';

const run = promisify(execFile);
const repo = join(import.meta.dirname, '..', '..');
const REDIS_IMAGE = 'localhost/byok-e2e-redis:e2e';
const figures: Record<string, unknown> = {};

async function bash(script: string, args: string[] = []): Promise<string> {
  const { stdout } = await run('bash', [join(repo, script), ...args], { encoding: 'utf8', maxBuffer: 64 << 20 });
  return stdout.trim().split('\n').pop() ?? '';
}

/** The pause image: the static binary hack/node/build.sh made, alone in an image, as an OCI archive containerd imports. */
function pauseImage(nodeBin: string, dir: string): string {
  const root = join(dir, 'pause-root');
  execFileSync('mkdir', ['-p', root]);
  execFileSync('cp', [join(nodeBin, 'pause'), join(root, 'pause')]);
  execFileSync('tar', ['-cf', join(dir, 'pause.tar'), '-C', root, 'pause']);
  execFileSync(
    'podman',
    ['--runtime', 'runc', 'import', '--change', 'ENTRYPOINT ["/pause"]', join(dir, 'pause.tar'), PAUSE_IMAGE],
    { stdio: 'ignore' },
  );
  const out = join(dir, 'pause.oci.tar');
  execFileSync('podman', ['--runtime', 'runc', 'save', '--format', 'oci-archive', '-o', out, PAUSE_IMAGE], {
    stdio: 'ignore',
  });
  return out;
}

/** The ledger's Redis for the e2e: this machine's redis-server (Debian package) and the libraries it links, alone in an image. */
function redisImage(dir: string): string {
  const root = join(dir, 'redis-root');
  const server = execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();
  const libs = execFileSync('ldd', [server], { encoding: 'utf8' })
    .split('\n')
    .map((l) => /(\/\S+)\s+\(0x/.exec(l)?.[1])
    .filter((l): l is string => !!l);
  for (const file of [server, ...libs]) {
    execFileSync('mkdir', ['-p', join(root, file, '..')]);
    execFileSync('cp', ['-L', file, join(root, file)]);
  }
  execFileSync('mkdir', ['-p', join(root, 'tmp'), join(root, 'data')]);
  execFileSync('tar', ['-cf', join(dir, 'redis.tar'), '-C', root, '.']);
  execFileSync(
    'podman',
    ['--runtime', 'runc', 'import', '--change', `ENTRYPOINT ["${server}"]`, join(dir, 'redis.tar'), REDIS_IMAGE],
    { stdio: 'ignore' },
  );
  const out = join(dir, 'redis.oci.tar');
  execFileSync('podman', ['--runtime', 'runc', 'save', '--format', 'oci-archive', '-o', out, REDIS_IMAGE], {
    stdio: 'ignore',
  });
  return out;
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'byok-e2e-'));
  // kubectl keeps its discovery cache in the run's directory: a cache an earlier run left for the same address could
  // describe another set of CRDs, and nothing of this run belongs in the user's ~/.kube.
  process.env.KUBECACHEDIR ??= join(work, 'kube-cache');
  const figuresPath =
    process.env.BYOK_E2E_FIGURES ?? join(mkdtempSync(join(tmpdir(), 'byok-e2e-figures-')), 'figures.json');
  let cp: ControlPlane | undefined;
  let node: RunningNode | undefined;
  let up: Upstreams | undefined;
  let dns: ClusterDns | undefined;
  const cleanup = async () => {
    await node?.stop().catch((e: unknown) => log(`node stop: ${String(e)}`));
    await dns?.close().catch(() => undefined);
    await cp?.stop().catch(() => undefined);
    await up?.close().catch(() => undefined);
    deleteBridge();
    rmSync(work, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    const t0 = Date.now();
    const image = await bash('hack/image/build.sh');
    figures.imageBuildSeconds = Math.round((Date.now() - t0) / 1000);
    const t1 = Date.now();
    const nodeBin = await bash('hack/node/build.sh');
    const netpolBin = await bash('hack/netpol/build.sh');
    figures.nodeBuildSeconds = Math.round((Date.now() - t1) / 1000);
    const pause = pauseImage(nodeBin, work);
    const redis = redisImage(work);
    createBridge();
    const auditLog = join(work, 'audit.log');
    // 6443 on the bridge's own address: NetworkPolicies see the port after kube-proxy's DNAT (chart: 443 and 6443).
    cp = await startControlPlane({
      address: BRIDGE_ADDRESS,
      port: 6443,
      serviceAccountAdmission: true,
      auditLogPath: auditLog,
      log,
    });
    const api = adminApi(cp.kubeconfigPath);
    dns = await startClusterDns(
      BRIDGE_ADDRESS,
      async (name, namespace) =>
        (
          await api
            .call<{ spec: { clusterIP?: string } }>('GET', `/api/v1/namespaces/${namespace}/services/${name}`)
            .catch(() => undefined)
        )?.spec.clusterIP,
    );
    node = await startNode({ nodeBin, netpolBin, cp, dir: join(work, 'node'), images: [image, pause, redis], log });
    up = await startUpstreams(BRIDGE_ADDRESS);
    const cluster: Cluster = { cp, node, up, work, api, auditLog, repo, figures, redisImage: REDIS_IMAGE, log };
    await deliveryChecks(cluster);
    if (process.env.BYOK_E2E_KEEP === '1') {
      log(`kept up: KUBECONFIG=${cp.kubeconfigPath}; Ctrl-C tears it down`);
      await new Promise(() => undefined);
    }
  } catch (err) {
    results.push({ name: 'setup', ok: false, detail: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    process.stdout.write(`FAIL setup: ${err instanceof Error ? err.message : String(err)}\n`);
    for (const name of ['kubelet', 'containerd', 'kube-router'])
      log(`${name} log (tail):\n${node?.logOf(name).split('\n').slice(-25).join('\n') ?? ''}`);
  } finally {
    if (results.some((r) => !r.ok))
      log(`kube-router log (tail):\n${node?.logOf('kube-router').split('\n').slice(-15).join('\n') ?? ''}`);
    await cleanup();
  }
  const passed = results.filter((r) => r.ok).length;
  writeFileSync(figuresPath, `${JSON.stringify(figures, null, 2)}\n`);
  process.stdout.write(`e2e: ${passed} passed, ${results.length - passed} failed\n`);
  process.stdout.write(`e2e figures: ${figuresPath}\n`);
  process.exitCode = passed === results.length && results.length > 0 ? 0 : 1;
}

await main();
