// Latency of listing credentials through the kube-aggregator (api.byok.gateway.dev/v1 byokkeys) versus the direct
// REST list (/api/v1/byok), same data, same run: a real control plane, one account with --seed credentials (all in
// the default workspace, so both doors return the same set), both doors served by one process. Rounds alternate
// between the doors so load drift hits both. Prints one JSON document.
//
//   node bench/aggregated.ts [--seed 50] [--requests 200] [--kubectl 15]
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { DEFAULT_SERVICE, registerLoopback, waitForAvailable } from '../src/aggregated/register.ts';
import { startAggregatedServer } from '../src/aggregated/server.ts';
import { startApiServer } from '../src/api/server.ts';
import { startControlPlane } from '../src/controlplane/control-plane.ts';
import { installCrds } from '../src/controlplane/install-crds.ts';
import { createServingCertificate } from '../src/controlplane/pki.ts';
import { kubeClient } from '../src/kube/client.ts';
import { API_VERSION } from '../src/schema/resources.ts';
import { createManagementKey } from '../src/service/management-keys.ts';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

function stats(ms: number[]): { n: number; p50: number; p95: number; mean: number } {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => Number((s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0).toFixed(2));
  return {
    n: s.length,
    p50: at(0.5),
    p95: at(0.95),
    mean: Number((s.reduce((x, y) => x + y, 0) / s.length).toFixed(2)),
  };
}

async function main(): Promise<void> {
  const seed = arg('seed', 50);
  const requests = arg('requests', 200);
  const kubectlRuns = arg('kubectl', 15);
  const cp = await startControlPlane();
  try {
    await installCrds(cp.kubeconfigPath);
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const client = kubeClient(kc);
    const ns = 'bench';
    await client.request('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    });
    await client.request('POST', `/apis/${API_VERSION}/namespaces/${ns}/workspaces`, {
      body: { apiVersion: API_VERSION, kind: 'Workspace', metadata: { name: 'main' }, spec: { default: true } },
    });
    const { key } = await createManagementKey(kc, ns, { name: 'bench' });
    const logger = pino({ level: 'warn' });
    const api = await startApiServer({ kubeConfig: kc, logger, watchNamespaces: [ns], rateLimit: false });
    const serving = await createServingCertificate(DEFAULT_SERVICE);
    const agg = await startAggregatedServer({
      kubeConfig: kc,
      runtime: api.runtime,
      tls: serving,
      logger,
      host: '127.0.0.1',
      port: 0,
    });
    await registerLoopback({ kubeConfig: kc, port: agg.port, caPem: serving.caPem });
    await waitForAvailable(kc, 60_000);

    const auth = { authorization: `Bearer ${key}` };
    for (let i = 0; i < seed; i++) {
      const r = await fetch(`${api.url}/byok`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ provider: 'openai', key: `sk-bench-${i}-0123456789abcdef` }),
      });
      if (r.status !== 201) throw new Error(`seed failed: ${r.status}`);
    }

    const restUrl = `${api.url}/byok?limit=100`;
    const aggPath = `/apis/api.byok.gateway.dev/v1/namespaces/${ns}/byokkeys`;
    const tableAccept =
      'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';
    const restOnce = async () => {
      const t = performance.now();
      const r = await fetch(restUrl, { headers: auth });
      const body = (await r.json()) as { data: unknown[] };
      if (body.data.length !== seed) throw new Error(`REST list returned ${body.data.length}`);
      return performance.now() - t;
    };
    const aggOnce = async () => {
      const t = performance.now();
      const out = await client.request<{ items?: unknown[]; rows?: unknown[] }>('GET', aggPath);
      if ((out.items ?? out.rows ?? []).length !== seed) throw new Error('aggregated list size differs');
      return performance.now() - t;
    };
    // The Table form is what kubectl asks for; KubeClient sends Accept: application/json, so use fetch-like https here.
    const tableOnce = async () => {
      const url = client.url(aggPath);
      const t = performance.now();
      const user = kc.getCurrentUser();
      const cluster = kc.getCurrentCluster();
      const { request } = await import('node:https');
      await new Promise<void>((resolve, reject) => {
        const req = request(
          url,
          {
            headers: { accept: tableAccept },
            ca: Buffer.from(cluster?.caData ?? '', 'base64'),
            cert: Buffer.from(user?.certData ?? '', 'base64'),
            key: Buffer.from(user?.keyData ?? '', 'base64'),
            agent: tableAgent,
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => {
              const rows = (JSON.parse(text) as { rows?: unknown[] }).rows ?? [];
              if (rows.length !== seed) reject(new Error(`table rows ${rows.length}`));
              else resolve();
            });
          },
        );
        req.on('error', reject);
        req.end();
      });
      return performance.now() - t;
    };
    const { Agent } = await import('node:https');
    const tableAgent = new Agent({ keepAlive: true });

    // Warm up connections, caches and the SubjectAccessReview-free admin path.
    for (let i = 0; i < 20; i++) {
      await restOnce();
      await aggOnce();
      await tableOnce();
    }
    const rest: number[] = [];
    const aggJson: number[] = [];
    const aggTable: number[] = [];
    for (let i = 0; i < requests; i++) {
      rest.push(await restOnce());
      aggJson.push(await aggOnce());
      aggTable.push(await tableOnce());
    }

    // Whole commands, as a user sees them: kubectl (process start, discovery from its cache, TLS) vs curl.
    const kubectl = join(cp.binDir, 'kubectl');
    const cacheDir = mkdtempSync(join(tmpdir(), 'kubectl-cache-'));
    // Async: the servers live in this process, so a blocking spawn would stall them.
    const run = promisify(execFile);
    const time = async (cmd: string, args: string[]) => {
      const t = performance.now();
      await run(cmd, args);
      return performance.now() - t;
    };
    const kArgs = (what: string) => ['--kubeconfig', cp.kubeconfigPath, '--cache-dir', cacheDir, 'get', what, '-n', ns];
    await time(kubectl, kArgs('byokkeys'));
    await time(kubectl, kArgs('byokcredentials'));
    const kAgg: number[] = [];
    const kCrd: number[] = [];
    const curl: number[] = [];
    for (let i = 0; i < kubectlRuns; i++) {
      kAgg.push(await time(kubectl, kArgs('byokkeys')));
      kCrd.push(await time(kubectl, kArgs('byokcredentials')));
      curl.push(await time('curl', ['-sf', '-H', `Authorization: Bearer ${key}`, restUrl]));
    }

    process.stdout.write(
      `${JSON.stringify({
        credentials: seed,
        http: { restList: stats(rest), aggregatedList: stats(aggJson), aggregatedTable: stats(aggTable) },
        commands: {
          kubectlGetByokkeys: stats(kAgg),
          kubectlGetByokcredentialsCrd: stats(kCrd),
          curlRestList: stats(curl),
        },
      })}\n`,
    );
    tableAgent.destroy();
    await agg.close();
    await api.close();
  } finally {
    await cp.stop();
  }
}

await main();
