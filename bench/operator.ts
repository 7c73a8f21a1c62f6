// Operator benchmark on a local control plane: cold start to all Ready and compiled with peak RSS,
// as a ratio to a baseline measured in the same run on the same control plane (a plain client applying a status
// of the same shape to every credential with the operator's concurrency, no operator logic: the apiserver's own
// floor), apply-to-compiled latency under a steady stream of changes right after the cold start (--steady-rate
// changes per second for --steady-seconds) and for single changes one at a time, and ConfigMap writes per change.
// Prints one JSON object. Sizes: BENCH_ACCOUNTS (1000), BENCH_CREDS_PER_ACCOUNT (10), BENCH_CHANGES (50),
// BENCH_CONCURRENCY (48, seeding), BENCH_STEADY_RATE (2), BENCH_STEADY_SECONDS (30); or --accounts=N --creds=N
// --changes=N --steady-rate=N --steady-seconds=N. Smoke run: --accounts=20 --creds=5 --changes=10 --steady-seconds=5.
// BENCH_MEMORY=1: the operator's heap broken down per structure after the run (bench/lib/memory-breakdown.ts).
// The operator runs in a child process as in the image: compiled to JavaScript (tsc, like `npm run build`; Node's
// TypeScript stripping alone costs ~30 MB of RSS the image does not pay; BENCH_FROM_SOURCE=1 runs the .ts files)
// and with the image's NODE_OPTIONS and allocator (Dockerfile: jemalloc through LD_PRELOAD, needs the
// libjemalloc2 package here too; overrides: BENCH_NODE_OPTIONS, BENCH_LD_PRELOAD, BENCH_MALLOC_CONF).
// BENCH_DIAG=<file>: memory/queue samples from the operator (bench/lib/operator-child.ts) and apiserver request
// totals during the cold start.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { INDEX_KEY, INDEX_NAME, ROUTING_LABEL, type RoutingIndex, SHA_ANNOTATION } from '../src/contract/routing.ts';
import { startControlPlane } from '../src/controlplane/control-plane.ts';
import { installCrds } from '../src/controlplane/install-crds.ts';
import { publicId } from '../src/domain/ids.ts';
import { createApplier } from '../src/kube/apply.ts';
import { KubeClient } from '../src/kube/client.ts';
import { loadKubeConfig } from '../src/kube/kubeconfig.ts';
import { API_VERSION, GROUP, VERSION } from '../src/schema/resources.ts';
import { procStatusMB } from './lib/proc.ts';
import { dockerfileEnv, OPERATOR_NODE_OPTIONS } from './lib/runtime-flags.ts';

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
const STEADY_RATE = arg('steady-rate', 'BENCH_STEADY_RATE', 2);
const STEADY_SECONDS = arg('steady-seconds', 'BENCH_STEADY_SECONDS', 30);
/** The operator's credential reconcile workers (src/operator/controllers.ts default), also the baseline's. */
const OPERATOR_CONCURRENCY = Number(process.env.BENCH_CRED_CONCURRENCY ?? 8);
const ROUTING_NS = 'byok-system';
const CRED_SECRET_LABEL = 'byok.gateway.dev/credential-secret';

const execFileAsync = promisify(execFile);

/** The operator image's runtime tuning (Dockerfile ENV lines): the benchmark runs its operator with the same. */
function imageEnv(name: 'NODE_OPTIONS' | 'MALLOC_ARENA_MAX' | 'LD_PRELOAD' | 'MALLOC_CONF'): string | undefined {
  return name === 'NODE_OPTIONS' ? OPERATOR_NODE_OPTIONS : dockerfileEnv(name);
}

/** 'jemalloc' when the operator process mapped it, else glibc's malloc (and why). */
async function loadedAllocator(pid: number, preload: string | undefined): Promise<string> {
  if (!preload) return 'glibc malloc';
  for (let i = 0; i < 50; i++) {
    try {
      if (readFileSync(`/proc/${pid}/maps`, 'utf8').includes('jemalloc')) return 'jemalloc';
    } catch {
      break;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return `glibc malloc (${preload} not loaded: install libjemalloc2)`;
}

/** The operator child (and the src it imports) compiled to JavaScript the way the image's build does. */
function buildOperatorChild(root: string): { script: string; cleanup: () => void } {
  // Under dist/ (git-ignored) so the compiled files resolve node_modules like the image's dist/ does.
  mkdirSync(join(root, 'dist'), { recursive: true });
  const dir = mkdtempSync(join(root, 'dist', 'bench-'));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      extends: join(root, 'tsconfig.build.json'),
      compilerOptions: {
        outDir: join(dir, 'out'),
        rootDir: root,
        sourceMap: false,
        declaration: false,
        tsBuildInfoFile: null,
      },
      include: [join(root, 'src'), join(root, 'bench', 'lib', 'operator-child.ts')],
    }),
  );
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.json')],
    { stdio: 'inherit' },
  );
  return {
    script: join(dir, 'out', 'bench', 'lib', 'operator-child.js'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const crPath = (ns: string, plural: string) => `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}`;

async function pool<T>(items: readonly T[], n: number, fn: (t: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (i < items.length) await fn(items[i++]!);
    }),
  );
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
const hashFor = (a: number) => a.toString(16).padStart(8, '0').repeat(8);

async function seed(client: KubeClient): Promise<void> {
  const post = (path: string, body: object) => retry(() => client.request('POST', path, { body }));
  const namespaces = Array.from({ length: ACCOUNTS }, (_, a) => a);
  await pool(namespaces, CONCURRENCY, async (a) => {
    const ns = accountNs(a);
    await post('/api/v1/namespaces', { metadata: { name: ns } });
    await post(crPath(ns, 'accounts'), {
      apiVersion: API_VERSION,
      kind: 'Account',
      metadata: { name: 'account' },
      spec: { plan: 'pay-as-you-go' },
    });
    await post(crPath(ns, 'workspaces'), {
      apiVersion: API_VERSION,
      kind: 'Workspace',
      metadata: { name: 'main' },
      spec: { default: true },
    });
    await post(crPath(ns, 'gatewayapikeys'), {
      apiVersion: API_VERSION,
      kind: 'GatewayAPIKey',
      metadata: { name: 'key' },
      spec: { hash: hashFor(a) },
    });
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
      spec: {
        provider: providers[c % providers.length],
        secretRef: { name: `${name}-key`, key: 'key' },
        displayName: `bench ${a}/${c}`,
        ...(c % 3 === 0 ? { allowedApiKeyHashes: [hashFor(a)] } : {}),
      },
    });
  });
}

interface Cred {
  metadata: { namespace: string; name: string; generation?: number; resourceVersion: string };
  status?: {
    observedGeneration?: number;
    conditions?: { type: string; status: string; observedGeneration?: number }[];
  };
}
interface ConfigMap {
  metadata: { name: string; resourceVersion: string; annotations?: Record<string, string> };
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
          const list = await client.request<{ metadata: { resourceVersion: string }; items: T[] }>('GET', path, {
            query,
          });
          for (const item of list.items) onEvent({ type: 'ADDED', object: item });
          rv = list.metadata.resourceVersion;
        }
        await client.stream(
          path,
          { ...query, watch: true, resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds: 300 },
          (raw) => {
            const e = raw as WatchEvent<T>;
            if (e.type === 'ERROR') {
              rv = undefined;
              return;
            }
            rv = e.object.metadata.resourceVersion;
            if (e.type !== 'BOOKMARK') onEvent(e);
          },
          ac.signal,
        );
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
      // Mid-run the shards are newer than the index (it is written last): not compiled yet, as a gateway sees it.
      if (!cm || cm.metadata.annotations?.[SHA_ANNOTATION] !== part.sha256) return undefined;
      chunks.push(
        cm.data?.[part.key] !== undefined
          ? Buffer.from(cm.data[part.key]!, 'utf8')
          : Buffer.from(cm.binaryData?.[part.key] ?? '', 'base64'),
      );
    }
    const payload = Buffer.concat(chunks);
    const doc = JSON.parse((shard.encoding === 'gzip' ? gunzipSync(payload) : payload).toString('utf8')) as {
      accounts: { credentials: unknown[] }[];
    };
    for (const a of doc.accounts) total += a.credentials.length;
  }
  return total;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;

/**
 * The apiserver's /metrics. Asynchronous: while a synchronous child ran (seconds at 100k) this process read
 * nothing from the operator's stdout and stderr pipes, and an operator that logged more than a pipe holds
 * stopped in write() until it returned.
 */
async function apiserverMetrics(kubeconfigPath: string): Promise<string | undefined> {
  try {
    const { stdout } = await execFileAsync(
      join(process.env.BYOK_CONTROL_PLANE_BIN ?? '', 'kubectl'),
      ['--kubeconfig', kubeconfigPath, 'get', '--raw', '/metrics'],
      { encoding: 'utf8', maxBuffer: 256 << 20 },
    );
    return stdout;
  } catch {
    return undefined;
  }
}

/** Diagnostics (BENCH_DIAG): apiserver request count and total seconds by verb/resource/subresource, minus `before`. */
async function apiserverRequestSummary(
  kubeconfigPath: string,
  before?: Record<string, { n: number; s: number }>,
): Promise<Record<string, { n: number; s: number }>> {
  const raw = await apiserverMetrics(kubeconfigPath);
  if (raw === undefined) return {};
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
  if (before)
    for (const [k, v] of Object.entries(out)) {
      v.n -= before[k]?.n ?? 0;
      v.s = +(v.s - (before[k]?.s ?? 0)).toFixed(2);
    }
  return Object.fromEntries(
    Object.entries(out)
      .filter(([, v]) => v.n > 0)
      .sort((a, b) => b[1].s - a[1].s),
  );
}

/**
 * The floor: one status apply per credential, through the same Server-Side Apply path and field manager as the
 * operator, with its concurrency, and a status of the same shape (five fields, four conditions). The values say
 * "not reconciled yet" (Unknown), so the operator still has to write every status afterwards and cannot take a
 * verdict from it.
 */
async function baseline(kubeconfigPath: string): Promise<{ seconds: number; writes: number; concurrency: number }> {
  const applier = createApplier(loadKubeConfig(kubeconfigPath));
  const creds = Array.from({ length: ACCOUNTS }, (_, a) => a).flatMap((a) =>
    Array.from({ length: CREDS }, (_, c) => ({ ns: accountNs(a), name: `cred-${c}` })),
  );
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const cond = (type: string) => ({
    type,
    status: 'Unknown',
    reason: 'Baseline',
    message: 'written by the benchmark baseline, not by the operator',
    lastTransitionTime: now,
    observedGeneration: 1,
  });
  const t0 = performance.now();
  await pool(creds, OPERATOR_CONCURRENCY, async ({ ns, name }) => {
    await retry(() =>
      applier.applyStatus('BYOKCredential', ns, name, {
        id: publicId('BYOKCredential', ns, name),
        observedGeneration: 1,
        conditions: ['Ready', 'SecretResolved', 'PayloadValid', 'FiltersValid'].map(cond),
        label: 'sk-b...xxxx',
        createdAt: now,
        sortOrder: 0,
        secretResourceVersion: '0000000',
      }),
    );
  });
  return {
    seconds: +((performance.now() - t0) / 1000).toFixed(2),
    writes: creds.length,
    concurrency: OPERATOR_CONCURRENCY,
  };
}

interface CmEvent {
  at: number;
  name: string;
  type: string;
  text?: string;
}

/** Changes at a fixed rate, each to a different credential, not waiting for the previous one to be compiled. */
async function steadyStream(
  client: KubeClient,
  cmEvents: CmEvent[],
  rate: number,
  seconds: number,
): Promise<Record<string, unknown>> {
  const n = Math.max(1, Math.round(rate * seconds));
  const pending = new Map<string, { sent: number; i: number }>();
  const latencies: number[] = [];
  const byIndex: { i: number; ms: number }[] = [];
  let scanned = cmEvents.length;
  const scan = () => {
    for (; scanned < cmEvents.length; scanned++) {
      const e = cmEvents[scanned]!;
      if (!e.text) continue;
      for (const [marker, { sent, i }] of pending) {
        if (e.text.includes(marker)) {
          latencies.push(e.at - sent);
          byIndex.push({ i, ms: +(e.at - sent).toFixed(1) });
          pending.delete(marker);
        }
      }
    }
  };
  const scanner = setInterval(scan, 2);
  const start = performance.now();
  const sends: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait > 0) await sleep(wait);
    const a = (i * 7919 + 13) % ACCOUNTS;
    const c = (i + 3) % CREDS;
    const marker = `steady-${i}-${Date.now().toString(36)}`;
    pending.set(marker, { sent: performance.now(), i });
    sends.push(
      client
        .request('PATCH', `${crPath(accountNs(a), 'byokcredentials')}/cred-${c}`, {
          body: { spec: { displayName: marker } },
          contentType: 'application/merge-patch+json',
        })
        .catch(() => pending.delete(marker)),
    );
  }
  await Promise.all(sends);
  const deadline = performance.now() + 10_000;
  while (pending.size > 0 && performance.now() < deadline) await sleep(20);
  clearInterval(scanner);
  scan();
  const sorted = [...latencies].sort((x, y) => x - y);
  const p50 = percentile(sorted, 50);
  const p99 = percentile(sorted, 99);
  return {
    ratePerSecond: rate,
    seconds,
    samples: latencies.length,
    missed: n - latencies.length,
    p50Ms: +p50.toFixed(1),
    p99Ms: +p99.toFixed(1),
    maxMs: +(sorted.at(-1) ?? NaN).toFixed(1),
    /** The slowest changes with their position in the stream (0 = the first change after the cold start). */
    slowest: byIndex.sort((x, y) => y.ms - x.ms).slice(0, 3),
    target: { p50Ms: 100, p99Ms: 500 },
    met: latencies.length === n && p50 <= 100 && p99 <= 500,
  };
}

/** etcd's database size and object counts as the apiserver reports them (for the 1M-credential projection). */
async function storageSummary(kubeconfigPath: string): Promise<{ etcdDbMB?: number; objects: Record<string, number> }> {
  const raw = await apiserverMetrics(kubeconfigPath);
  if (raw === undefined) return { objects: {} };
  let db: number | undefined;
  const objects: Record<string, number> = {};
  for (const line of raw.split('\n')) {
    const size = /^apiserver_storage_size_bytes\{[^}]*\} (\S+)$/.exec(line);
    if (size) db = Math.max(db ?? 0, Number(size[1]));
    const count = /^apiserver_storage_objects\{resource="([^"]+)"\} (\S+)$/.exec(line);
    if (count && /byokcredentials|^secrets$|^configmaps$/.test(count[1]!)) objects[count[1]!] = Number(count[2]);
  }
  return { ...(db !== undefined ? { etcdDbMB: +(db / 1048576).toFixed(1) } : {}), objects };
}

/** Steady state: one change at a time; latency = PATCH sent -> a shard ConfigMap carrying the change observed. */
async function steadyChanges(
  client: KubeClient,
  cmEvents: CmEvent[],
): Promise<{ applyToCompiled: Record<string, unknown>; configMapWritesPerChange: Record<string, unknown> }> {
  await sleep(1000);
  const latencies: number[] = [];
  const writes: number[] = [];
  const shardWrites: number[] = [];
  for (let i = 0; i < CHANGES; i++) {
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
  const applyToCompiled = {
    samples: latencies.length,
    missed: CHANGES - latencies.length,
    p50Ms: +p50.toFixed(1),
    p99Ms: +p99.toFixed(1),
    maxMs: +(sorted.at(-1) ?? NaN).toFixed(1),
    target: { p50Ms: 100, p99Ms: 500 },
    met: latencies.length === CHANGES && p50 <= 100 && p99 <= 500,
  };
  const maxShard = Math.max(...shardWrites);
  const configMapWritesPerChange = {
    median: percentile(
      [...writes].sort((x, y) => x - y),
      50,
    ),
    max: Math.max(...writes),
    shardWritesMax: maxShard,
    target: 'one change touches one shard (plus the index)',
    met: shardWrites.length > 0 && maxShard === 1,
  };
  return { applyToCompiled, configMapWritesPerChange };
}

async function main(): Promise<void> {
  const out: Record<string, unknown> = {
    benchmark: 'operator',
    config: {
      accounts: ACCOUNTS,
      credentialsPerAccount: CREDS,
      credentials: ACCOUNTS * CREDS,
      changes: CHANGES,
      steadyRate: STEADY_RATE,
      steadySeconds: STEADY_SECONDS,
    },
    machine: { cpus: cpus().length, loadAverageAtStart: loadavg().map((x) => +x.toFixed(2)) },
  };
  const cp = await startControlPlane();
  let child: ReturnType<typeof spawn> | undefined;
  const watches: { stop(): void }[] = [];
  const cleanups: (() => void)[] = [];
  try {
    await installCrds(cp.kubeconfigPath);
    const client = new KubeClient(loadKubeConfig(cp.kubeconfigPath));
    await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ROUTING_NS } } });
    const seedStart = performance.now();
    await seed(client);
    out.seedSeconds = +((performance.now() - seedStart) / 1000).toFixed(1);

    // Observers: credential readiness and routing ConfigMaps (with every write event, for counting).
    const ready = new Map<string, boolean>();
    watches.push(
      watchAll<Cred>(client, `/apis/${GROUP}/${VERSION}/byokcredentials`, {}, (e) => {
        const key = `${e.object.metadata.namespace}/${e.object.metadata.name}`;
        const cond = e.object.status?.conditions?.find((c) => c.type === 'Ready');
        ready.set(
          key,
          e.type !== 'DELETED' &&
            cond?.status === 'True' &&
            (cond.observedGeneration ?? e.object.status?.observedGeneration) === e.object.metadata.generation,
        );
      }),
    );
    const cms = new Map<string, ConfigMap>();
    const cmEvents: CmEvent[] = [];
    watches.push(
      watchAll<ConfigMap>(
        client,
        `/api/v1/namespaces/${ROUTING_NS}/configmaps`,
        { labelSelector: ROUTING_LABEL },
        (e) => {
          if (e.type === 'DELETED') cms.delete(e.object.metadata.name);
          else cms.set(e.object.metadata.name, e.object);
          cmEvents.push({
            at: performance.now(),
            name: e.object.metadata.name,
            type: e.type,
            ...(e.object.metadata.name !== INDEX_NAME && e.type !== 'DELETED' ? { text: cmPayload(e.object) } : {}),
          });
        },
      ),
    );

    const here = dirname(fileURLToPath(import.meta.url));
    const compiled = process.env.BENCH_FROM_SOURCE ? undefined : buildOperatorChild(join(here, '..'));
    cleanups.push(() => compiled?.cleanup());
    out.operatorCode = compiled ? 'compiled JavaScript (as in the image)' : 'TypeScript source (Node type stripping)';

    // The floor, on the same control plane with the same objects, before the operator exists.
    const floor = await baseline(cp.kubeconfigPath);
    out.baseline = floor;

    // Cold start.
    const apiBefore = process.env.BENCH_DIAG ? await apiserverRequestSummary(cp.kubeconfigPath) : undefined;
    const t0 = performance.now();
    const nodeOptions = process.env.BENCH_NODE_OPTIONS ?? imageEnv('NODE_OPTIONS');
    const arenas = process.env.BENCH_MALLOC_ARENA_MAX ?? imageEnv('MALLOC_ARENA_MAX');
    // The image's allocator (jemalloc through LD_PRELOAD); BENCH_LD_PRELOAD= (empty) measures glibc's malloc.
    const preload = process.env.BENCH_LD_PRELOAD ?? imageEnv('LD_PRELOAD');
    const mallocConf = process.env.BENCH_MALLOC_CONF ?? imageEnv('MALLOC_CONF');
    out.operatorNodeOptions = nodeOptions ?? null;
    out.operatorMallocArenaMax = arenas ?? null;
    child = spawn(
      process.execPath,
      [
        ...(process.env.BENCH_MEMORY ? ['--expose-gc'] : []),
        compiled?.script ?? join(here, 'lib', 'operator-child.ts'),
        cp.kubeconfigPath,
        ROUTING_NS,
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          NODE_OPTIONS: nodeOptions ?? '',
          ...(arenas ? { MALLOC_ARENA_MAX: arenas } : {}),
          ...(preload ? { LD_PRELOAD: preload } : {}),
          ...(mallocConf ? { MALLOC_CONF: mallocConf } : {}),
        },
      },
    );
    // Which allocator the operator really got: a missing libjemalloc2 is skipped by the loader with a warning.
    out.operatorAllocator = await loadedAllocator(child.pid!, preload);
    let childErr = '';
    let childErrBytes = 0;
    child.stderr!.on('data', (d: Buffer) => {
      childErrBytes += d.length;
      childErr = (childErr + d.toString()).slice(-4000);
    });
    let childOut = '';
    let childOutBytes = 0;
    child.stdout!.on('data', (d: Buffer) => {
      childOutBytes += d.length;
      childOut += d.toString();
    });
    const exited = new Promise<number>((r) => child!.once('exit', (code) => r(code ?? -1)));
    const total = ACCOUNTS * CREDS;
    let peak = 0;
    let coldSeconds = NaN;
    let allReadySeconds = NaN;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`operator exited (${child.exitCode}): ${childErr}`);
      peak = Math.max(peak, procStatusMB(child.pid!, 'VmHWM') || 0);
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
    peak = Math.max(peak, procStatusMB(child.pid!, 'VmHWM') || 0);
    if (process.env.BENCH_DIAG)
      out.apiserverDuringColdStart = await apiserverRequestSummary(cp.kubeconfigPath, apiBefore);
    const ratio = coldSeconds / floor.seconds;
    const rssTarget = total <= 10_000 ? 200 : 512;
    out.coldStart = {
      seconds: +coldSeconds.toFixed(2),
      allReadySeconds: +allReadySeconds.toFixed(2),
      ratioToBaseline: +ratio.toFixed(2),
      routingConfigMapWrites: cmEvents.length,
      peakRssMB: +peak.toFixed(1),
      target: { ratioToBaseline: 1.5, peakRssMB: rssTarget },
      met: ratio <= 1.5 && peak <= rssTarget,
    };

    out.storageAfterColdStart = await storageSummary(cp.kubeconfigPath);

    // Right after the cold start: a steady stream of changes (the pipeline's batching must not linger).
    out.steadyStream =
      STEADY_RATE > 0 && STEADY_SECONDS > 0 && Number.isFinite(coldSeconds)
        ? await steadyStream(client, cmEvents, STEADY_RATE, STEADY_SECONDS)
        : null;

    // Steady state: one change at a time, once the cold start has finished.
    const steady = Number.isFinite(coldSeconds) ? await steadyChanges(client, cmEvents) : undefined;
    out.applyToCompiled = steady?.applyToCompiled ?? { samples: 0, missed: CHANGES, met: false };
    out.configMapWritesPerChange = steady?.configMapWritesPerChange ?? { met: false };
    const index = cms.get(INDEX_NAME)?.data?.[INDEX_KEY];
    out.routing = index
      ? {
          shards: (JSON.parse(index) as RoutingIndex).shards.length,
          buckets: (JSON.parse(index) as RoutingIndex).buckets,
        }
      : null;
    out.operatorRssMBAtEnd = +procStatusMB(child.pid!, 'VmRSS').toFixed(1);
    out.operatorOutputBytes = { stdout: childOutBytes, stderr: childErrBytes };
    out.operatorPeakRssMBOverall = +procStatusMB(child.pid!, 'VmHWM').toFixed(1);
    if (process.env.BENCH_MEMORY) {
      const from = childOut.length;
      child.kill('SIGUSR2');
      const until = performance.now() + 120_000;
      while (!/\nmemory .*\n/.test(`\n${childOut.slice(from)}`) && performance.now() < until) await sleep(200);
      const line = /memory (.*)\n/.exec(childOut.slice(from))?.[1];
      out.memoryBreakdown = line
        ? (JSON.parse(line) as unknown)
        : { error: childErr.slice(-1000) || 'no answer from the operator' };
    }
    out.machine = { ...(out.machine as object), loadAverageAtEnd: loadavg().map((x) => +x.toFixed(2)) };
    out.met = [
      out.coldStart,
      out.applyToCompiled,
      out.configMapWritesPerChange,
      ...(out.steadyStream ? [out.steadyStream] : []),
    ].every((x) => (x as { met: boolean }).met);
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(5000)]);
  } catch (err) {
    out.error = err instanceof Error ? err.message : String(err);
    if (err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
    out.met = false;
  } finally {
    for (const w of watches) w.stop();
    for (const c of cleanups) c();
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await cp.stop();
  }
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
}

await main();
