// Benchmark of the REST API on loopback against a real control plane, with 1,000 credentials in one account.
// The server runs in a child process (this file with --serve) so the load generator (autocannon, in this
// process) does not share its event loop; the same child serves a bare fastify route returning fixed JSON,
// measured in the same run as the baseline. Prints one JSON document.
//
//   node bench/api.ts [--duration 5] [--rounds 5] [--seed 1000]
import { type ChildProcess, fork } from 'node:child_process';
import { createRequire } from 'node:module';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import Fastify from 'fastify';
import { pino } from 'pino';
import { startApiServer } from '../src/api/server.ts';
import { startControlPlane } from '../src/controlplane/control-plane.ts';
import { installCrds } from '../src/controlplane/install-crds.ts';
import { GROUP, VERSION } from '../src/schema/resources.ts';
import { createManagementKey } from '../src/service/management-keys.ts';

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number; average: number; max: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
interface AutocannonOptions {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  connections?: number;
  duration?: number;
  overallRate?: number;
  pipelining?: number;
  requests?: { method?: string; path: string; headers?: Record<string, string>; body?: string }[];
}
const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as (opts: AutocannonOptions) => Promise<AutocannonResult>;

const PROVIDERS = [
  'openai',
  'anthropic',
  'groq',
  'mistral',
  'together',
  'deepseek',
  'fireworks',
  'xai',
  'cohere',
  'perplexity',
];

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

// ---- child: the servers under test ----

async function serve(kubeconfigPath: string, namespace: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const logger = pino({ level: 'warn' });
  const api = await startApiServer({ kubeConfig: kc, logger, watchNamespaces: [namespace], rateLimit: false });
  const bare = Fastify({ logger: false });
  const fixed = { data: { ok: true, id: '11111111-2222-3333-4444-555555555555' } };
  bare.get('/bare', async () => fixed);
  const bareUrl = await bare.listen({ host: '127.0.0.1', port: 0 });
  process.send?.({ apiUrl: api.url, bareUrl: `${bareUrl}/bare` });
  process.on('message', (m) => {
    if (m === 'stop') void Promise.all([api.close(), bare.close()]).then(() => process.exit(0));
  });
}

// ---- parent: control plane, seed, load ----

interface CaseResult {
  rps: number;
  p50_ms: number;
  p99_ms: number;
  requests: number;
  non2xx: number;
  errors: number;
  ratio_to_bare?: number;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** The median round by one measure (a whole round's sample, so its figures stay consistent). */
function median(xs: CaseResult[], by: 'rps' | 'p99_ms' = 'rps'): CaseResult {
  const sorted = [...xs].sort((a, b) => a[by] - b[by]);
  return { ...(sorted[Math.floor(sorted.length / 2)] as CaseResult) };
}

function summarise(r: AutocannonResult): CaseResult {
  return {
    rps: Math.round(r.requests.average),
    p50_ms: r.latency.p50,
    p99_ms: r.latency.p99,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
}

async function seed(apiUrl: string, key: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const provider = PROVIDERS[i % PROVIDERS.length] as string;
      const res = await fetch(`${apiUrl}/byok`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          provider,
          key: `sk-bench-${String(i).padStart(8, '0')}-abcdefghijklmnop`,
          name: `bench ${i}`,
          allowed_models: [`${provider}/model-${i % 7}`],
        }),
      });
      if (res.status !== 201) throw new Error(`seed POST ${res.status}: ${await res.text()}`);
      ids.push(((await res.json()) as { data: { id: string } }).data.id);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  return ids;
}

async function main(): Promise<void> {
  const duration = arg('duration', 5);
  const seedCount = arg('seed', 1000);
  const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
  const cp = await startControlPlane({ log });
  let child: ChildProcess | undefined;
  try {
    await installCrds(cp.kubeconfigPath);
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const namespace = 'bench-account';
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: 'workspaces',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'Workspace',
        metadata: { name: 'main' },
        spec: { default: true },
      },
    });
    const { key } = await createManagementKey(kc, namespace);

    child = fork(fileURLToPath(import.meta.url), ['--serve', cp.kubeconfigPath, namespace], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const urls = await new Promise<{ apiUrl: string; bareUrl: string }>((resolve, reject) => {
      child?.once('message', (m) => resolve(m as { apiUrl: string; bareUrl: string }));
      child?.once('exit', (code) => reject(new Error(`server process exited with ${code}`)));
    });

    const loadBefore = os.loadavg().map((x) => Math.round(x * 100) / 100);
    const seedStarted = Date.now();
    const ids = await seed(urls.apiUrl, key, seedCount);
    log(`seeded ${ids.length} credentials through POST /byok in ${Date.now() - seedStarted} ms`);

    const auth = { authorization: `Bearer ${key}` };
    const getRequests = ids
      .slice(0, 200)
      .map((id) => ({ method: 'GET', path: new URL(`${urls.apiUrl}/byok/${id}`).pathname, headers: auth }));
    const listUrl = `${urls.apiUrl}/byok`;
    const connections = 16;
    const run = (opts: AutocannonOptions) => autocannon({ connections, duration, ...opts });

    // Warm-up (JIT, connection pools) is not measured.
    await run({ url: urls.bareUrl, duration: 2 });
    await run({ url: listUrl, headers: auth, duration: 2 });

    // Rounds interleave the cases so background load on a shared machine hits them alike. Each API case's ratio
    // is taken against the mean of the bare runs just before and after it in the same round; the median over
    // rounds is reported.
    const rounds = arg('rounds', 5);
    const samples: Record<'bare' | 'list' | 'get' | 'listFixed' | 'getFixed', CaseResult[]> = {
      bare: [],
      list: [],
      get: [],
      listFixed: [],
      getFixed: [],
    };
    const ratios: { list: number[]; get: number[] } = { list: [], get: [] };
    // The 1-minute load average after each round shows how much other work shared the machine's cores.
    const loadAfterRound: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      log(
        `round ${round}/${rounds}: bare, GET /byok, GET /byok/{id}, bare; then both API cases at a fixed 2,000 req/s`,
      );
      const bareBefore = summarise(await run({ url: urls.bareUrl }));
      const l = summarise(await run({ url: listUrl, headers: auth }));
      const g = summarise(await run({ url: urls.apiUrl, requests: getRequests }));
      const bareAfter = summarise(await run({ url: urls.bareUrl }));
      const bareMean = (bareBefore.rps + bareAfter.rps) / 2;
      samples.bare.push(bareBefore, bareAfter);
      samples.list.push(l);
      samples.get.push(g);
      ratios.list.push(round2(l.rps / bareMean));
      ratios.get.push(round2(g.rps / bareMean));
      samples.listFixed.push(summarise(await run({ url: listUrl, headers: auth, overallRate: 2000 })));
      // One URL: autocannon's rate limiter overshoots (bursts above the rate) when cycling a `requests` array,
      // which would measure the load generator's queueing, not the server. The lookup cost is the same per id.
      samples.getFixed.push(
        summarise(await run({ url: `${urls.apiUrl}/byok/${ids[ids.length >> 1]}`, headers: auth, overallRate: 2000 })),
      );
      loadAfterRound.push(round2(os.loadavg()[0] ?? 0));
    }
    const bare = median(samples.bare);
    const list = median(samples.list);
    const get = median(samples.get);
    const listFixed = median(samples.listFixed, 'p99_ms');
    const getFixed = median(samples.getFixed, 'p99_ms');
    log('POST /byok');
    const post = summarise(
      await run({
        url: listUrl,
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ provider: 'openai', key: 'sk-bench-post-0123456789abcdef', name: 'bench post' }),
        connections: 8,
        duration: Math.max(duration, 10),
      }),
    );

    const mid = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? 0;
    list.ratio_to_bare = mid(ratios.list);
    get.ratio_to_bare = mid(ratios.get);
    post.ratio_to_bare = Math.round((post.rps / bare.rps) * 1000) / 1000;
    const report = {
      setup: {
        credentials_in_account: ids.length,
        list_page_size: 50,
        connections,
        duration_s: duration,
        rounds,
        node: process.version,
        cpus: os.cpus().length,
        loadavg_before: loadBefore,
        loadavg_1m_after_each_round: loadAfterRound,
        note: 'server (API + bare route) in a child process; autocannon in the parent; kube-apiserver and etcd on the same machine',
      },
      ratios_per_round: ratios,
      p99_ms_per_round_at_2000: {
        list: samples.listFixed.map((c) => c.p99_ms),
        get: samples.getFixed.map((c) => c.p99_ms),
      },
      rounds: samples,
      cases: { bare, list, get, post },
      fixed_rate_2000: { list: listFixed, get: getFixed },
      targets: {
        list_ratio_ge_0_5: list.ratio_to_bare >= 0.5,
        get_ratio_ge_0_5: get.ratio_to_bare >= 0.5,
        list_p99_le_20ms_at_2000: listFixed.p99_ms <= 20,
        get_p99_le_20ms_at_2000: getFixed.p99_ms <= 20,
      },
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    if (child && child.exitCode === null) {
      child.send('stop');
      await new Promise((r) => child?.once('exit', r));
    }
    await cp.stop();
  }
}

if (process.argv[2] === '--serve') {
  await serve(process.argv[3] as string, process.argv[4] as string);
} else {
  await main();
}
