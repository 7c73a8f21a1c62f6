// The export controller against a real kube-apiserver (with the targets' CRDs): a cold start that exports every
// account, then single credential changes. Reports the compile's and the export's time (their own histograms), the
// export's writes, and the writes and time per change.
//
//   node scripts/bootstrap.mjs --control-plane -- node bench/export-controller-apply.ts [credentials] [target]
//
// Default 1000 credentials (3 per account: openai, anthropic, groq plain keys), envoy-ai-gateway. The operator runs
// in this process (startOperator, as `--export-target` starts it). On the shared 2-core machine the times are noisy:
// read them as ratios within one run.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { startControlPlane } from '../src/controlplane/control-plane.ts';
import { installCrds } from '../src/controlplane/install-crds.ts';
import type { ExportTarget } from '../src/export/index.ts';
import { loadCatalog } from '../src/gateway/catalog.ts';
import { KubeClient } from '../src/kube/client.ts';
import { loadKubeConfig } from '../src/kube/kubeconfig.ts';
import { limited } from '../src/operator/compile/routing-writer.ts';
import { startOperator } from '../src/operator/run.ts';
import { API_VERSION } from '../src/schema/resources.ts';
import { CRD_NAMES, crdFiles } from '../test/support/export-crds.ts';

const run = promisify(execFile);
const CREDENTIALS = Number(process.argv[2] ?? 1000);
const TARGET = (process.argv[3] ?? 'envoy-ai-gateway') as ExportTarget;
const PROVIDERS = ['openai', 'anthropic', 'groq'];
const ACCOUNTS = Math.ceil(CREDENTIALS / PROVIDERS.length);
const CHANGES = 5;
const repo = join(import.meta.dirname, '..');
const accountNs = (a: number) => `exp-${String(a).padStart(6, '0')}`;

function metric(text: string, name: string, labels = ''): number {
  let total = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name}${labels ? `{${labels}` : ''}`) && !line.startsWith('#'))
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

async function main(): Promise<void> {
  const cp = await startControlPlane();
  const kubectl = (...args: string[]) =>
    run(join(process.env.BYOK_CONTROL_PLANE_BIN ?? '', 'kubectl'), ['--kubeconfig', cp.kubeconfigPath, ...args], {
      encoding: 'utf8',
      maxBuffer: 256 << 20,
    });
  try {
    await installCrds(cp.kubeconfigPath);
    for (const f of crdFiles()) await kubectl('apply', '--server-side', '--force-conflicts', '-f', f);
    await kubectl('wait', '--for=condition=Established', '--timeout=60s', ...CRD_NAMES.map((n) => `crd/${n}`));
    const kc = loadKubeConfig(cp.kubeconfigPath);
    const client = new KubeClient(kc);
    for (const ns of ['byok-system', 'byok-export'])
      await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
    const t0 = performance.now();
    await limited(
      Array.from({ length: ACCOUNTS }, (_, a) => a),
      16,
      async (a) => {
        const ns = accountNs(a);
        await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
        // The operator compiles, and so exports, only namespaces that hold an Account.
        await client.request('POST', `/apis/${API_VERSION}/namespaces/${ns}/accounts`, {
          body: { apiVersion: API_VERSION, kind: 'Account', metadata: { name: ns }, spec: {} },
        });
        for (const [c, provider] of PROVIDERS.entries()) {
          await client.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
            body: {
              metadata: { name: `${provider}-key` },
              stringData: { key: `sk-bench-${a}-${c}-${'x'.repeat(40)}` },
            },
          });
          await client.request('POST', `/apis/${API_VERSION}/namespaces/${ns}/byokcredentials`, {
            body: {
              apiVersion: API_VERSION,
              kind: 'BYOKCredential',
              metadata: { name: provider },
              spec: { provider, secretRef: { name: `${provider}-key` }, sortOrder: c },
            },
          });
        }
      },
    );
    process.stdout.write(
      `seeded ${ACCOUNTS} accounts, ${ACCOUNTS * PROVIDERS.length} credentials in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
    );
    const gatewayCatalog = loadCatalog(join(repo, 'config', 'catalog', 'catalog.json'));
    const start = performance.now();
    const op = await startOperator({
      kubeConfig: kc,
      routingNamespace: 'byok-system',
      httpPort: 0,
      httpHost: '127.0.0.1',
      logger: pino({ level: 'warn' }),
      leaderElection: { enabled: false },
      export: {
        target: TARGET,
        namespace: 'byok-export',
        catalog: { catalog: gatewayCatalog.catalog, upstream: (m, e) => gatewayCatalog.upstream(m, e) },
      },
    });
    const metrics = async () => (await fetch(`${op.httpAddress}/metrics`)).text();
    try {
      // Idle: the reconcilers, the compile and the export have caught up (waitForIdle flushes all three).
      for (;;) {
        await op.waitForIdle();
        const m = await metrics();
        if (metric(m, 'byok_export_duration_seconds_count') > 0 && metric(m, 'byok_compiled_accounts') >= ACCOUNTS)
          break;
        await new Promise((r) => setTimeout(r, 500));
      }
      await op.waitForIdle();
      const cold = await metrics();
      const line = (what: string, v: string) =>
        process.stdout.write(`${TARGET} ${CREDENTIALS} credentials  ${what.padEnd(48)} ${v}\n`);
      line('cold start to idle (s)', ((performance.now() - start) / 1000).toFixed(1));
      line(
        'compile runs / their time (s)',
        `${metric(cold, 'byok_compile_duration_seconds_count')} / ${metric(cold, 'byok_compile_duration_seconds_sum').toFixed(1)}`,
      );
      line(
        'export drains / their time (s)',
        `${metric(cold, 'byok_export_duration_seconds_count')} / ${metric(cold, 'byok_export_duration_seconds_sum').toFixed(1)}`,
      );
      line(
        'export writes: apply / delete / status',
        `${metric(cold, 'byok_export_writes_total', 'kind="apply"')} / ${metric(cold, 'byok_export_writes_total', 'kind="delete"')} / ${metric(cold, 'byok_export_writes_total', 'kind="status"')}`,
      );
      let prev = cold;
      for (let i = 0; i < CHANGES; i++) {
        const ns = accountNs(Math.floor((i * ACCOUNTS) / CHANGES));
        await client.request('PATCH', `/apis/${API_VERSION}/namespaces/${ns}/byokcredentials/groq`, {
          body: { spec: { isRequired: true } },
          contentType: 'application/merge-patch+json',
        });
        // The reconciler, the compile run and the export drain that follow.
        await new Promise((r) => setTimeout(r, 300));
        await op.waitForIdle();
        const now = await metrics();
        const d = (name: string, labels = '') => metric(now, name, labels) - metric(prev, name, labels);
        line(
          `change ${i + 1} (${ns} groq is_required)`,
          `export writes ${d('byok_export_writes_total')} (apply ${d('byok_export_writes_total', 'kind="apply"')}, status ${d('byok_export_writes_total', 'kind="status"')}); export ${(1000 * d('byok_export_duration_seconds_sum')).toFixed(0)} ms in ${d('byok_export_duration_seconds_count')} drain(s), compile ${(1000 * d('byok_compile_duration_seconds_sum')).toFixed(0)} ms in ${d('byok_compile_duration_seconds_count')} run(s)`,
        );
        prev = now;
      }
    } finally {
      await op.stop();
    }
  } finally {
    await cp.stop();
  }
}

await main();
