// Operator benchmark on a local control plane (issue 4): cold start to all Ready and compiled with peak RSS,
// apply-to-compiled latency for single changes at steady state, and ConfigMap writes per change.
// Prints one JSON object. Sizes: BENCH_ACCOUNTS (1000), BENCH_CREDS_PER_ACCOUNT (10), BENCH_CHANGES (50),
// BENCH_CONCURRENCY (48); or --accounts=N --creds=N --changes=N. Smoke run: --accounts=20 --creds=5 --changes=10.
// The operator runs in a child process with the image's NODE_OPTIONS (Dockerfile; override: BENCH_NODE_OPTIONS).
// BENCH_DIAG=<file>: memory/queue samples from the operator (bench/lib/operator-child.ts) and apiserver request
// totals during the cold start.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { startControlPlane } from '../src/controlplane/control-plane.ts';
import { installCrds } from '../src/controlplane/install-crds.ts';
import { INDEX_KEY, INDEX_NAME, ROUTING_LABEL, type RoutingIndex } from '../src/compiler/format.ts';
import { KubeClient, loadKubeConfig } from '../src/kube/client.ts';
import { API_VERSION, GROUP, VERSION } from '../src/schema/resources.ts';

const arg = (name: string, env: string, dflt: number): number => {
  const flag = process.argv.find((a) => a.startsWith(`--${name}=`));
  const raw = flag?.split('=')[1] ?? process.env[env];
  return raw === undefined ? dflt : Number(raw);
};
const ACCOUNTS = arg('accounts', 'BENCH_ACCOUNTS', 1000);
const CREDS = arg('creds', 'BENCH_CREDS_PER_ACCOUNT', 10);
const CHANGES = arg('changes', 'BENCH_CHANGES', 50);
const CONCURRENCY = arg('concurrency', 'BENCH_CONCURRENCY', 48);
const COLD_TIMEOUT_S = arg('cold-timeout', 'BENCH_COLD_TIMEOUT_S', 600);
const ROUTING_NS = 'byok-system';
const CRED_SECRET_LABEL = 'byok.gateway.dev/credential-secret';

/** NODE_OPTIONS of the operator image (Dockerfile): the benchmark runs its operator with the same heap flags. */
function imageNodeOptions(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  const m = /^ENV NODE_OPTIONS="([^"]*)"/m.exec(readFileSync(join(here, '..', 'Dockerfile'), 'utf8'));
  return m?.[1];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const crPath = (ns: string, plural: string) => `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}`;

async function pool<T>(items: readonly T[], n: number, fn: (t: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]!);
  }));
}

async function retry<T>(fn: () => Promise<T>, tries = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= tries || (err as { status?: number }).status === 409) throw err;
      await sleep(100 * attempt);
    }
  }
}

const accountNs = (a: number) => `bench-a${String(a).padStart(5, '0')}`;
const hashFor = (a: number) => (a.toString(16).padStart(8, '0')).repeat(8);

async function seed(client: KubeClient): Promise<void> {
  const post = (path: string, body: object) => retry(() => client.request('POST', path, { body }));
  const namespaces = Array.from({ length: ACCOUNTS }, (_, a) => a);
  await pool(namespaces, CONCURRENCY, async (a) => {
    const ns = accountNs(a);
    await post('/api/v1/namespaces', { metadata: { name: ns } });
    await post(crPath(ns, 'accounts'), { apiVersion: API_VERSION, kind: 'Account', metadata: { name: 'account' }, spec: { plan: 'pay-as-you-go' } });
    await post(crPath(ns, 'workspaces'), { apiVersion: API_VERSION, kind: 'Workspace', metadata: { name: 'main' }, spec: { default: true } });
    await post(crPath(ns, 'gatewayapikeys'), { apiVersion: API_VERSION, kind: 'GatewayAPIKey', metadata: { name: 'key' }, spec: { hash: hashFor(a) } });
  });
  const creds = namespaces.flatMap((a) => Array.from({ length: CREDS }, (_, c) => ({ a, c })));
  const providers = ['openai', 'anthropic', 'mistral', 'groq', 'deepseek'];
  await pool(creds, CONCURRENCY, async ({ a, c }) => {
    const ns = accountNs(a);
    const name = `cred-${c}`;
    await post(`/api/v1/namespaces/${ns}/secrets`, {
      metadata: { name: `${name}-key`, labels: { [CRED_SECRET_LABEL]: 'true' } },
      stringData: { key: `sk-bench-${a}-${c}-${'x'.repeat(40)}` },
    });
    await post(crPath(ns, 'byokcredentials'), {
      apiVersion: API_VERSION,
      kind: 'BYOKCredential',
      metadata: { name },
      spec: { provider: providers[c % providers.length], secretRef: { name: `${name}-key`, key: 'key' }, displayName: `bench ${a}/${c}`, ...(c % 3 === 0 ? { allowedApiKeyHashes: [hashFor(a)] } : {}) },
    });
  });
}

interface Cred {
  metadata: { namespace: string; name: string; generation?: number; resourceVersion: string };
  status?: { observedGeneration?: number; conditions?: { type: string; status: string; observedGeneration?: number }[] };
}
interface ConfigMap {
  metadata: { name: string; resourceVersion: string };
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}
interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

/** A self-restarting watch that keeps the latest object per name. */
function watchAll<T extends { metadata: { name: string; resourceVersion: string; namespace?: string } }>(
  client: KubeClient,
  path: string,
  query: Record<string, string>,
  onEvent: (e: WatchEvent<T>) => void,
): { stop(): void } {
  const ac = new AbortController();
  void (async () => {
    let rv: string | undefined;
    while (!ac.signal.aborted) {
      try {
        if (rv === undefined) {
          const list = await client.request<{ metadata: { resourceVersion: string }; items: T[] }>('GET', path, { query });
          for (const item of list.items) onEvent({ type: 'ADDED', object: item });
          rv = list.metadata.resourceVersion;
        }
        await client.stream(path, { ...query, watch: true, resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds: 300 }, (raw) => {
          const e = raw as WatchEvent<T>;
          if (e.type === 'ERROR') {
            rv = undefined;
            return;
          }
          rv = e.object.metadata.resourceVersion;
          if (e.type !== 'BOOKMARK') onEvent(e);
        }, ac.signal);
      } catch {
        if (ac.signal.aborted) return;
        rv = undefined;
        await sleep(200);
      }
    }
  })();
  return { stop: () => ac.abort() };
}

function cmPayload(cm: ConfigMap): string {
  for (const v of Object.values(cm.data ?? {})) return v;
  for (const v of Object.values(cm.binaryData ?? {})) {
    const raw = Buffer.from(v, 'base64');
    return raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw).toString('utf8') : raw.toString('utf8');
  }
  return '';
}

function compiledCredentials(cms: Map<string, ConfigMap>): number | undefined {
  const index = cms.get(INDEX_NAME);
  if (!index?.data?.[INDEX_KEY]) return undefined;
  const idx = JSON.parse(index.data[INDEX_KEY]) as RoutingIndex;
  let total = 0;
  for (const shard of idx.shards) {
    const chunks: Buffer[] = [];
    for (const part of shard.parts) {
      const cm = cms.get(part.name);
      if (!cm) return undefined;
      chunks.push(cm.data?.[part.key] !== undefined ? Buffer.from(cm.data[part.key]!, 'utf8') : Buffer.from(cm.binaryData?.[part.key] ?? '', 'base64'));
    }
    const payload = Buffer.concat(chunks);
    const doc = JSON.parse((shard.encoding === 'gzip' ? gunzipSync(payload) : payload).toString('utf8')) as { accounts: { credentials: unknown[] }[] };
    for (const a of doc.accounts) total += a.credentials.length;
  }
  return total;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;

function vm(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Diagnostics (BENCH_DIAG): apiserver request count and total seconds by verb/resource/subresource, minus `before`. */
function apiserverRequestSummary(kubeconfigPath: string, before?: Record<string, { n: number; s: number }>): Record<string, { n: number; s: number }> {
  let raw = '';
  try {
    raw = execFileSync(join(process.env.BYOK_CONTROL_PLANE_BIN ?? '', 'kubectl'), ['--kubeconfig', kubeconfigPath, 'get', '--raw', '/metrics'], { encoding: 'utf8', maxBuffer: 256 << 20 });
  } catch {
    return {};
  }
  const out: Record<string, { n: number; s: number }> = {};
  for (const line of raw.split('\n')) {
    const m = /^apiserver_request_duration_seconds_(sum|count)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (labels.verb === 'WATCH') continue;
    const key = `${labels.verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`;
    const e = (out[key] ??= { n: 0, s: 0 });
    if (m[1] === 'sum') e.s += Number(m[3]);
    else e.n += Number(m[3]);
  }
  if (before) for (const [k, v] of Object.entries(out)) { v.n -= before[k]?.n ?? 0; v.s = +(v.s - (before[k]?.s ?? 0)).toFixed(2); }
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v.n > 0).sort((a, b) => b[1].s - a[1].s));
}

async function main(): Promise<void> {
  const out: Record<string, unknown> = { benchmark: 'operator', config: { accounts: ACCOUNTS, credentialsPerAccount: CREDS, credentials: ACCOUNTS * CREDS, changes: CHANGES } };
  const cp = await startControlPlane();
  let child: ReturnType<typeof spawn> | undefined;
  const watches: { stop(): void }[] = [];
  try {
    await installCrds(cp.kubeconfigPath);
    const client = new KubeClient(loadKubeConfig(cp.kubeconfigPath));
    await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ROUTING_NS } } });
    const seedStart = performance.now();
    await seed(client);
    out.seedSeconds = +((performance.now() - seedStart) / 1000).toFixed(1);

    // Observers: credential readiness and routing ConfigMaps (with every write event, for counting).
    const ready = new Map<string, boolean>();
    watches.push(watchAll<Cred>(client, `/apis/${GROUP}/${VERSION}/byokcredentials`, {}, (e) => {
      const key = `${e.object.metadata.namespace}/${e.object.metadata.name}`;
      const cond = e.object.status?.conditions?.find((c) => c.type === 'Ready');
      ready.set(key, e.type !== 'DELETED' && cond?.status === 'True' && (cond.observedGeneration ?? e.object.status?.observedGeneration) === e.object.metadata.generation);
    }));
    const cms = new Map<string, ConfigMap>();
    const cmEvents: { at: number; name: string; type: string; text?: string }[] = [];
    watches.push(watchAll<ConfigMap>(client, `/api/v1/namespaces/${ROUTING_NS}/configmaps`, { labelSelector: ROUTING_LABEL }, (e) => {
      if (e.type === 'DELETED') cms.delete(e.object.metadata.name);
      else cms.set(e.object.metadata.name, e.object);
      cmEvents.push({ at: performance.now(), name: e.object.metadata.name, type: e.type, ...(e.object.metadata.name !== INDEX_NAME && e.type !== 'DELETED' ? { text: cmPayload(e.object) } : {}) });
    }));

    // Cold start.
    const apiBefore = process.env.BENCH_DIAG ? apiserverRequestSummary(cp.kubeconfigPath) : undefined;
    const here = dirname(fileURLToPath(import.meta.url));
    const t0 = performance.now();
    const nodeOptions = process.env.BENCH_NODE_OPTIONS ?? imageNodeOptions();
    out.operatorNodeOptions = nodeOptions ?? null;
    child = spawn(process.execPath, [join(here, 'lib', 'operator-child.ts'), cp.kubeconfigPath, ROUTING_NS], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_OPTIONS: nodeOptions ?? '' },
    });
    let childErr = '';
    child.stderr!.on('data', (d: Buffer) => (childErr = (childErr + d.toString()).slice(-4000)));
    const exited = new Promise<number>((r) => child!.once('exit', (code) => r(code ?? -1)));
    const total = ACCOUNTS * CREDS;
    let peak = 0;
    let coldSeconds = NaN;
    let allReadySeconds = NaN;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`operator exited (${child.exitCode}): ${childErr}`);
      peak = Math.max(peak, vm(child.pid!, 'VmHWM') || 0);
      let readyCount = 0;
      for (const v of ready.values()) if (v) readyCount++;
      if (readyCount === total && Number.isNaN(allReadySeconds)) allReadySeconds = (performance.now() - t0) / 1000;
      if (readyCount === total && compiledCredentials(cms) === total) {
        coldSeconds = (performance.now() - t0) / 1000;
        break;
      }
      if ((performance.now() - t0) / 1000 > COLD_TIMEOUT_S) {
        out.coldStartProgress = { ready: readyCount, compiled: compiledCredentials(cms) ?? 0 };
        break;
      }
      await sleep(100);
    }
    peak = Math.max(peak, vm(child.pid!, 'VmHWM') || 0);
    if (process.env.BENCH_DIAG) out.apiserverDuringColdStart = apiserverRequestSummary(cp.kubeconfigPath, apiBefore);
    out.coldStart = {
      seconds: +coldSeconds.toFixed(2),
      allReadySeconds: +allReadySeconds.toFixed(2),
      routingConfigMapWrites: cmEvents.length,
      peakRssMB: +peak.toFixed(1),
      target: { seconds: 60, peakRssMB: 300 },
      met: coldSeconds <= 60 && peak <= 300,
    };

    // Steady state: one change at a time; latency = PATCH sent -> a shard ConfigMap carrying the change observed.
    await sleep(1000);
    const latencies: number[] = [];
    const writes: number[] = [];
    const shardWrites: number[] = [];
    for (let i = 0; i < CHANGES && Number.isFinite(coldSeconds); i++) {
      const a = (i * 7919) % ACCOUNTS;
      const c = i % CREDS;
      const marker = `chg-${i}-${Date.now().toString(36)}`;
      const from = cmEvents.length;
      const sent = performance.now();
      await client.request('PATCH', `${crPath(accountNs(a), 'byokcredentials')}/cred-${c}`, {
        body: { spec: { displayName: marker } },
        contentType: 'application/merge-patch+json',
      });
      let seenAt: number | undefined;
      while (performance.now() - sent < 10_000) {
        const hit = cmEvents.slice(from).find((e) => e.text?.includes(marker));
        if (hit) {
          seenAt = hit.at;
          break;
        }
        await sleep(2);
      }
      if (seenAt === undefined) continue;
      latencies.push(seenAt - sent);
      // Quiet period, then count the ConfigMap writes this change caused.
      let last = cmEvents.length;
      do {
        last = cmEvents.length;
        await sleep(300);
      } while (cmEvents.length !== last);
      const caused = cmEvents.slice(from);
      writes.push(caused.length);
      shardWrites.push(caused.filter((e) => e.name !== INDEX_NAME).length);
    }
    const sorted = [...latencies].sort((x, y) => x - y);
    const p50 = percentile(sorted, 50);
    const p99 = percentile(sorted, 99);
    out.applyToCompiled = {
      samples: latencies.length,
      missed: CHANGES - latencies.length,
      p50Ms: +p50.toFixed(1),
      p99Ms: +p99.toFixed(1),
      maxMs: +(sorted.at(-1) ?? NaN).toFixed(1),
      target: { p50Ms: 100, p99Ms: 500 },
      met: latencies.length === CHANGES && p50 <= 100 && p99 <= 500,
    };
    const maxShard = Math.max(...shardWrites);
    out.configMapWritesPerChange = {
      median: percentile([...writes].sort((x, y) => x - y), 50),
      max: Math.max(...writes),
      shardWritesMax: maxShard,
      target: 'one change touches one shard (plus the index)',
      met: shardWrites.length > 0 && maxShard === 1,
    };
    const index = cms.get(INDEX_NAME)?.data?.[INDEX_KEY];
    out.routing = index ? { shards: (JSON.parse(index) as RoutingIndex).shards.length, buckets: (JSON.parse(index) as RoutingIndex).buckets } : null;
    out.operatorRssMBAtEnd = +vm(child.pid!, 'VmRSS').toFixed(1);
    out.met = [out.coldStart, out.applyToCompiled, out.configMapWritesPerChange].every((x) => (x as { met: boolean }).met);
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(5000)]);
  } catch (err) {
    out.error = err instanceof Error ? err.message : String(err);
    out.met = false;
  } finally {
    for (const w of watches) w.stop();
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await cp.stop();
  }
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
}

await main();
