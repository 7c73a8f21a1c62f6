// The end-to-end run (issue 33): the image built here, a one-node cluster from parts with a real kubelet, and the chart
// installed as docs/install.md tells users. Each check prints one line; the run ends with `e2e: N passed, N failed`
// and exits non-zero on any failure. Everything it starts it tears down, interfaces and iptables chains included.
//
//   npm run e2e            (node scripts/bootstrap.mjs --control-plane -- node test/e2e/run.ts)
//   BYOK_E2E_KEEP=1        leave the cluster up after the checks (Ctrl-C tears it down)
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startControlPlane, type ControlPlane } from '../../src/controlplane/control-plane.ts';
import { startUpstreams, type Upstreams } from '../support/upstreams.ts';
import { BRIDGE_ADDRESS, createBridge, deleteBridge, NODE_NAME, PAUSE_IMAGE, startNode, type RunningNode } from './node.ts';
import { until as pollUntil } from '../support/until.ts';

const run = promisify(execFile);
const repo = join(import.meta.dirname, '..', '..');
const log = (line: string) => process.stderr.write(`[e2e] ${line}\n`);
const results: { name: string; ok: boolean; detail: string }[] = [];
const figures: Record<string, unknown> = {};

async function check(name: string, fn: () => Promise<string>): Promise<boolean> {
  const t = Date.now();
  try {
    const detail = await fn();
    results.push({ name, ok: true, detail });
    process.stdout.write(`ok   ${name}${detail ? `: ${detail}` : ''} (${Date.now() - t} ms)\n`);
    return true;
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    results.push({ name, ok: false, detail });
    process.stdout.write(`FAIL ${name}: ${detail.slice(0, 2000)}\n`);
    return false;
  }
}

/** Polls fn every 500 ms until it returns something other than undefined. */
async function until<T>(what: string, timeoutMs: number, fn: () => Promise<T | undefined>): Promise<T> {
  const found = await pollUntil(what, async () => {
    const v = await fn();
    return v === undefined ? undefined : { v };
  }, timeoutMs, 500);
  return found.v;
}

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
  execFileSync('podman', ['--runtime', 'runc', 'import', '--change', 'ENTRYPOINT ["/pause"]', join(dir, 'pause.tar'), PAUSE_IMAGE], { stdio: 'ignore' });
  const out = join(dir, 'pause.oci.tar');
  execFileSync('podman', ['--runtime', 'runc', 'save', '--format', 'oci-archive', '-o', out, PAUSE_IMAGE], { stdio: 'ignore' });
  return out;
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'byok-e2e-'));
  let cp: ControlPlane | undefined;
  let node: RunningNode | undefined;
  let up: Upstreams | undefined;
  const cleanup = async () => {
    await node?.stop().catch((e: unknown) => log(`node stop: ${String(e)}`));
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
    figures.nodeBuildSeconds = Math.round((Date.now() - t1) / 1000);
    const pause = pauseImage(nodeBin, work);
    createBridge();
    cp = await startControlPlane({ address: BRIDGE_ADDRESS, serviceAccountAdmission: true, log });
    node = await startNode({ nodeBin, cp, dir: join(work, 'node'), images: [image, pause], log });
    up = await startUpstreams(BRIDGE_ADDRESS);
    await checks({ cp, node, up, work });
    if (process.env.BYOK_E2E_KEEP === '1') {
      log(`kept up: KUBECONFIG=${cp.kubeconfigPath}; Ctrl-C tears it down`);
      await new Promise(() => undefined);
    }
  } catch (err) {
    results.push({ name: 'setup', ok: false, detail: err instanceof Error ? err.stack ?? err.message : String(err) });
    process.stdout.write(`FAIL setup: ${err instanceof Error ? err.message : String(err)}\n`);
    for (const name of ['kubelet', 'containerd']) log(`${name} log (tail):\n${node?.logOf(name).split('\n').slice(-25).join('\n') ?? ''}`);
  } finally {
    await cleanup();
  }
  const passed = results.filter((r) => r.ok).length;
  process.stdout.write(`${JSON.stringify({ figures })}\n`);
  process.stdout.write(`e2e: ${passed} passed, ${results.length - passed} failed\n`);
  process.exitCode = passed === results.length && results.length > 0 ? 0 : 1;
}

interface Ctx {
  cp: ControlPlane;
  node: RunningNode;
  up: Upstreams;
  work: string;
}

async function checks({ cp, node, up, work }: Ctx): Promise<void> {
  const env = { ...process.env, KUBECONFIG: cp.kubeconfigPath, PATH: `${cp.binDir}:${process.env.PATH ?? ''}` };
  const kubectl = async (...args: string[]) => (await run('kubectl', args, { env, encoding: 'utf8', maxBuffer: 64 << 20 })).stdout;
  const helm = async (...args: string[]) => (await run('helm', args, { env, encoding: 'utf8', maxBuffer: 64 << 20 })).stdout;
  const json = async <T>(...args: string[]) => JSON.parse(await kubectl(...args, '-o', 'json')) as T;
  const NS = 'byok-system';

  await check('the node registers and is Ready on containerd with the CNI bridge', async () => {
    const ready = await until('node Ready', 120_000, async () => {
      const n = await json<{ status: { conditions: { type: string; status: string }[]; nodeInfo: { containerRuntimeVersion: string; kubeletVersion: string } } }>('get', 'node', NODE_NAME);
      return n.status.conditions.find((c) => c.type === 'Ready')?.status === 'True' ? n.status.nodeInfo : undefined;
    });
    return `${ready.kubeletVersion}, ${ready.containerRuntimeVersion}`;
  });

  // What docs/install.md tells users, with the image this run built and the e2e's own catalog and upstream CA.
  const catalog = JSON.stringify({
    format: 'byok-gateway-catalog/v1',
    models: [{
      model: 'openai/gpt-4o', name: 'GPT-4o', contextLength: 128000, maxOutputTokens: 16384,
      endpoints: [{ id: 'openai', provider: 'openai', zdr: false, dataCollection: false, pricing: { kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: '10' }, upstream: { baseUrl: `${up.base}/openai/v1`, model: 'gpt-4o' } }],
    }],
  });
  await kubectl('create', 'namespace', NS);
  await kubectl('create', 'configmap', 'e2e-catalog', '-n', NS, `--from-literal=catalog.json=${catalog}`);
  await kubectl('create', 'configmap', 'e2e-upstream-ca', '-n', NS, `--from-literal=ca.crt=${up.caPem}`);
  const values = [
    'image.repository=localhost/byok-operator', 'image.tag=dev', 'image.pullPolicy=Never',
    'operator.replicas=1', 'api.replicas=1', 'gateway.enabled=true',
    'gateway.catalog.configMap=e2e-catalog', 'gateway.upstreamCa.configMap=e2e-upstream-ca',
    `networkPolicy.kubeApiServerCidrs={${BRIDGE_ADDRESS}/32}`,
  ];
  const installed = await check('helm install (as docs/install.md)', async () => {
    const t = Date.now();
    await helm('install', 'byok', join(repo, 'charts', 'byok-operator'), '-n', NS, ...values.flatMap((v) => ['--set', v]));
    return `${Date.now() - t} ms`;
  });
  if (!installed) return;

  await check('operator, API and gateway pods Ready: non-root, read-only root filesystem, probes on the chart\'s ports', async () => {
    const pods = await until('pods Ready', 240_000, async () => {
      const list = await json<{ items: { metadata: { name: string }; spec: { containers: { securityContext?: { runAsNonRoot?: boolean; readOnlyRootFilesystem?: boolean }; readinessProbe?: unknown }[]; securityContext?: { runAsNonRoot?: boolean; runAsUser?: number } }; status: { conditions?: { type: string; status: string }[] } }[] }>('get', 'pods', '-n', NS);
      const ready = list.items.filter((p) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      return list.items.length >= 3 && ready.length === list.items.length ? list.items : undefined;
    });
    for (const p of pods) {
      for (const c of p.spec.containers) {
        if (c.securityContext?.readOnlyRootFilesystem !== true) throw new Error(`${p.metadata.name}: root filesystem not read-only`);
        if (!c.readinessProbe) throw new Error(`${p.metadata.name}: no readiness probe`);
      }
    }
    // The processes themselves, seen from the host: uid 10001, not root.
    const uids = node.ctr('tasks', 'ls').split('\n').slice(1).map((l) => l.trim().split(/\s+/)[1]).filter((pid): pid is string => !!pid && /^\d+$/.test(pid))
      .map((pid) => /Uid:\s+(\d+)/.exec(execFileSync('cat', [`/proc/${pid}/status`], { encoding: 'utf8' }))?.[1]).filter((u): u is string => !!u);
    if (!uids.includes('10001')) throw new Error(`no container process runs as uid 10001 (uids: ${uids.join(',')})`);
    return `${pods.map((p) => p.metadata.name).join(', ')}; container uids ${[...new Set(uids)].join(',')}`;
  });

  await check('the APIService is Available and kubectl get byokkeys reaches the API pod through the aggregator', async () => {
    await until('APIService Available', 120_000, async () => ((await kubectl('get', 'apiservice', 'v1.api.byok.gateway.dev', '-o', 'jsonpath={.status.conditions[?(@.type=="Available")].status}')) === 'True' ? true : undefined));
    const out = await kubectl('get', 'byokkeys', '-A');
    return out.trim() === '' || out.includes('No resources') ? 'no keys yet (list answered)' : out.split('\n')[0] ?? '';
  });

  // An account: its Account (the operator routes only namespaces with one), a default Workspace, a gateway key, a
  // Secret and a BYOKCredential.
  const ACCT = 'e2e-acme';
  const GATEWAY_KEY = 'sk-e2e-gateway-0123456789abcdef';
  const keyHash = execFileSync('sh', ['-c', `printf %s '${GATEWAY_KEY}' | sha256sum | cut -d' ' -f1`], { encoding: 'utf8' }).trim();
  const apply = async (yaml: string) => {
    const file = join(work, `apply-${Date.now()}.yaml`);
    writeFileSync(file, yaml);
    return kubectl('apply', '-f', file);
  };
  await kubectl('create', 'namespace', ACCT);
  await apply(`apiVersion: byok.gateway.dev/v1alpha1
kind: Account
metadata: { name: ${ACCT}, namespace: ${ACCT} }
spec: {}
---
apiVersion: byok.gateway.dev/v1alpha1
kind: Workspace
metadata: { name: default, namespace: ${ACCT} }
spec: { displayName: Default, default: true }
---
apiVersion: byok.gateway.dev/v1alpha1
kind: GatewayAPIKey
metadata: { name: app, namespace: ${ACCT} }
spec: { hash: "${keyHash}" }
---
apiVersion: v1
kind: Secret
metadata: { name: openai-1, namespace: ${ACCT} }
stringData: { key: sk-e2e-first-key-0001 }
---
apiVersion: byok.gateway.dev/v1alpha1
kind: BYOKCredential
metadata: { name: openai, namespace: ${ACCT} }
spec: { provider: openai, secretRef: { name: openai-1 } }
`);
  const svc = await json<{ spec: { clusterIP: string; ports: { port: number }[] } }>('get', 'service', '-n', NS, 'byok-gateway');
  const gatewayUrl = `http://${svc.spec.clusterIP}:${svc.spec.ports[0]?.port ?? 80}`;
  const chat = async () => {
    const res = await fetch(`${gatewayUrl}/api/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${GATEWAY_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-4o', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }), signal: AbortSignal.timeout(10_000) });
    return { status: res.status, body: await res.text() };
  };
  await check('kubelet projects the routing ConfigMaps and bundle Secrets: a chat completion through the gateway Service reaches the upstream with the decrypted BYOK key', async () => {
    await until('credential Ready', 60_000, async () => ((await kubectl('get', 'byokcredential', 'openai', '-n', ACCT, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')) === 'True' ? true : undefined));
    const t = Date.now();
    const answer = await until('a 200 through the gateway', 180_000, async () => {
      const r = await chat();
      return r.status === 200 ? r : undefined;
    });
    const hit = up.hits.at(-1);
    if (hit?.auth !== 'sk-e2e-first-key-0001') throw new Error(`the upstream saw ${hit?.auth ?? 'nothing'}`);
    figures.firstAnswerAfterReadyMs = Date.now() - t;
    return `${answer.status} via ${gatewayUrl}, upstream saw the BYOK key, ${Date.now() - t} ms after Ready`;
  });

  await check('rotation runbook x5: kubectl wait Delivered, then the gateway sends the new key (real kubelet lag)', async () => {
    const lags: number[] = [];
    const delivered: number[] = [];
    for (let i = 2; i <= 6; i++) {
      const key = `sk-e2e-rotated-key-000${i}`;
      const t = Date.now();
      await apply(`apiVersion: v1
kind: Secret
metadata: { name: openai-${i}, namespace: ${ACCT} }
stringData: { key: ${key} }
`);
      await kubectl('patch', 'byokcredential', 'openai', '-n', ACCT, '--type=merge', '-p', `{"spec":{"secretRef":{"name":"openai-${i}"}}}`);
      await kubectl('wait', '--for=condition=Delivered', 'byokcredential/openai', '-n', ACCT, '--timeout=300s');
      delivered.push(Date.now() - t);
      // Delivered must mean delivered: the very next request carries the new key.
      const r = await chat();
      const seen = up.hits.at(-1)?.auth;
      if (r.status !== 200 || seen !== key) throw new Error(`rotation ${i - 1}: Delivered after ${Date.now() - t} ms, but the next request sent ${seen ?? 'nothing'} (status ${r.status})`);
      lags.push(Date.now() - t);
      await kubectl('delete', 'secret', `openai-${i - 1}`, '-n', ACCT);
    }
    const sorted = [...lags].sort((a, b) => a - b);
    figures.rotationLagMs = lags;
    figures.deliveredMs = delivered;
    return `Delivered→new key in ${lags.map((l) => `${(l / 1000).toFixed(1)} s`).join(', ')} (p50 ${(sorted[2]! / 1000).toFixed(1)} s, worst ${(sorted[4]! / 1000).toFixed(1)} s)`;
  });

  await check('the upgrade page\'s two commands (CRDs applied, --reset-then-reuse-values keeps the set values), then helm uninstall leaves no pods, APIService or release objects (CRDs stay, as documented)', async () => {
    await kubectl('apply', '--server-side', '--force-conflicts', '-f', join(repo, 'charts', 'byok-operator', 'crds'));
    await helm('upgrade', 'byok', join(repo, 'charts', 'byok-operator'), '-n', NS, '--reset-then-reuse-values', '--set', 'operator.logLevel=debug', '--wait', '--timeout', '240s');
    // The values set at install survive the upgrade; the one set now is added to them.
    const kept = JSON.parse(await helm('get', 'values', 'byok', '-n', NS, '-o', 'json')) as { image?: { repository?: string }; operator?: { logLevel?: string }; gateway?: { enabled?: boolean } };
    if (kept.image?.repository !== 'localhost/byok-operator' || kept.gateway?.enabled !== true || kept.operator?.logLevel !== 'debug') throw new Error(`values after the upgrade: ${JSON.stringify(kept)}`);
    await helm('uninstall', 'byok', '-n', NS, '--wait', '--timeout', '240s');
    await until('pods gone', 120_000, async () => ((await kubectl('get', 'pods', '-n', NS, '-o', 'name')).trim() === '' ? true : undefined));
    const left = (await kubectl('get', 'all,configmaps,secrets,networkpolicies,serviceaccounts,roles,rolebindings', '-n', NS, '-o', 'name')).split('\n').filter((l) => l && !/configmap\/(kube-root-ca\.crt|e2e-)|serviceaccount\/default|byok-routing|byok-bundle/.test(l));
    const apiService = (await run('kubectl', ['get', 'apiservice', 'v1.api.byok.gateway.dev'], { env }).then(() => 'present', () => 'gone'));
    const crds = (await kubectl('get', 'crd', '-o', 'name')).split('\n').filter((l) => l.includes('byok.gateway.dev')).length;
    if (left.length > 0 || apiService !== 'gone') throw new Error(`left behind: ${left.join(' ')} apiservice ${apiService}`);
    return `APIService gone, ${crds} CRDs kept`;
  });
}

await main();
