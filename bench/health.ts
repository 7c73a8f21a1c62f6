// Benchmark of the leader's health/delivery writer (src/operator/health/health-status-writer.ts) at a given credential count:
// three child processes play gateway pods, each with the real CredentialHealth counters fed by a steady synthetic
// attempt stream (a share of the credentials active, a few answering 401/429 so verdicts change) and the real status
// report shape (counters + the envelope version of every credential). The parent runs the writer against them with
// in-memory informers and a counting applier: what is measured is the writer's own CPU and memory and the status
// writes (and Events) it asks for; the apiserver's side of a write is not in these figures.
//
//   node bench/health.ts [--credentials 10000] [--warmup 45] [--duration 60] [--poll-ms 10000] [--rate 1500]
import { fork } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { publicId } from '../src/domain/ids.ts';
import { CredentialHealth, type GatewayStatusReport } from '../src/gateway/health.ts';
import type { Applier } from '../src/kube/apply.ts';
import type { EventRecorder } from '../src/kube/events.ts';
import type { ResourceInformers } from '../src/kube/resources.ts';
import type { CompilePipeline } from '../src/operator/compile/pipeline.ts';
import { HealthStatusWriter } from '../src/operator/health/health-status-writer.ts';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const CREDENTIALS = arg('credentials', 10_000);
const PER_ACCOUNT = 10;
const DURATION_S = arg('duration', 60);
const WARMUP_S = arg('warmup', 45);
const POLL_MS = arg('poll-ms', 10_000);
const RATE = arg('rate', 1500);
const TOKEN = 'bench-status-token-0123456789';

const ns = (i: number) => `acct-${Math.floor(i / PER_ACCOUNT)}`;
const name = (i: number) => `cred-${i % PER_ACCOUNT}`;
const idOf = (i: number) => publicId('BYOKCredential', ns(i), name(i));
const versionOf = (i: number) => createHash('sha256').update(`v1:${i}`).digest('hex').slice(0, 16);

async function child(): Promise<void> {
  const ids = Array.from({ length: CREDENTIALS }, (_, i) => idOf(i));
  const versions = Object.fromEntries(ids.map((id, i) => [id, versionOf(i)]));
  const health = new CredentialHealth();
  // 20% of the credentials carry traffic; 1 in 250 of those is refused (401), 1 in 250 rate limited.
  const active = ids.filter((_, i) => i % 5 === 0);
  let n = 0;
  const tick = setInterval(() => {
    const batch = Math.round(RATE / 3 / 10);
    for (let k = 0; k < batch; k++) {
      const j = n++ % active.length;
      // The refused / rate-limited set moves every 20 s, so verdicts keep changing (transitions, writes, Events).
      const shift = Math.floor(Date.now() / 20_000);
      health.record(
        active[j]!,
        (j + shift) % 250 === 0 ? 'unauthorized' : (j + shift) % 250 === 1 ? 'rateLimited' : 'ok',
      );
    }
  }, 100);
  const app = Fastify();
  const instance = String(process.pid);
  app.get(
    '/byok/status',
    async (): Promise<GatewayStatusReport> => ({
      format: 'byok-gateway-status/v1',
      instance,
      at: Date.now(),
      routing: { version: 'bench' },
      bundle: { keyId: 'k1', generation: 'g1', credentials: versions },
      credentials: health.snapshot(),
      probes: {},
    }),
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  process.send!({ port: (app.server.address() as { port: number }).port });
  process.on('message', () => {
    clearInterval(tick);
    void app.close().then(() => process.exit(0));
  });
}

async function parent(): Promise<void> {
  const children = [0, 1, 2].map(() => fork(fileURLToPath(import.meta.url), ['--child', ...process.argv.slice(2)]));
  const ports = await Promise.all(
    children.map((c) => new Promise<number>((r) => c.once('message', (m: { port: number }) => r(m.port)))),
  );
  const creds = Array.from({ length: CREDENTIALS }, (_, i) => ({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'BYOKCredential',
    metadata: { namespace: ns(i), name: name(i), generation: 1 },
    spec: { provider: ['openai', 'anthropic', 'groq', 'mistral'][i % 4] },
    status: {} as Record<string, unknown>,
  }));
  const accounts = Array.from({ length: Math.ceil(CREDENTIALS / PER_ACCOUNT) }, (_, a) => ({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Account',
    metadata: { namespace: `acct-${a}`, name: 'account', generation: 1 },
    status: {} as Record<string, unknown>,
  }));
  const byKey = new Map<string, { status: Record<string, unknown> }>([
    ...creds.map((c) => [`BYOKCredential/${c.metadata.namespace}/${c.metadata.name}`, c] as const),
    ...accounts.map((a) => [`Account/${a.metadata.namespace}/${a.metadata.name}`, a] as const),
  ]);
  const versions = new Map<string, Map<string, string>>();
  for (let i = 0; i < CREDENTIALS; i++) {
    let m = versions.get(ns(i));
    if (!m) versions.set(ns(i), (m = new Map()));
    m.set(idOf(i), versionOf(i));
  }
  let writes = 0;
  let events = 0;
  // Writes land in the in-memory objects, as an informer would deliver them back.
  const applier = {
    fieldManager: 'bench',
    applyStatus: async (kind: string, namespace: string, n: string, status: object) => {
      writes++;
      const o = byKey.get(`${kind}/${namespace}/${n}`)!;
      o.status = { ...o.status, ...(status as Record<string, unknown>) };
      return o;
    },
  } as unknown as Applier;
  const recorder: EventRecorder = { record: async () => void events++ } as unknown as EventRecorder;
  const informers = {
    credentials: { list: () => creds },
    accounts: { list: () => accounts },
  } as unknown as ResourceInformers;
  // Routing entries as old as the pods' index (since 0): delivery follows the envelope versions the pods report.
  const delivery = new Map(
    [...versions].map(([n, m]) => [n, new Map([...m].map(([id, v]) => [id, { version: v, envelope: v, since: 0 }]))]),
  );
  const pipeline = {
    credentialVersions: (n: string) => versions.get(n),
    credentialDelivery: (n: string) => delivery.get(n),
    routingRun: () => 0,
  } as unknown as CompilePipeline;
  const writer = new HealthStatusWriter({
    config: { token: TOKEN, urls: ports.map((p) => `http://127.0.0.1:${p}`), pollMs: POLL_MS },
    kubeConfig: undefined as never,
    informers,
    pipeline,
    applier,
    events: recorder,
    registry: new Registry(),
    log: pino({ level: 'warn' }),
  });
  global.gc?.();
  const mem0 = process.memoryUsage();
  const t0 = performance.now();
  // The first pass writes every credential once (Unused/Delivered); then WARMUP_S of passes let the active
  // credentials reach Serving (one write each, after the 30 s write interval). Both are reported apart from steady.
  await writer.syncOnce();
  const firstPassWrites = writes;
  const firstPassMs = performance.now() - t0;
  while (performance.now() < t0 + WARMUP_S * 1000) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    await writer.syncOnce();
  }
  const warmupWrites = writes - firstPassWrites;
  const steadyFrom = { writes, events, cpu: process.cpuUsage(), at: performance.now() };
  const passMs: number[] = [];
  const end = steadyFrom.at + DURATION_S * 1000;
  while (performance.now() < end) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    const s = performance.now();
    await writer.syncOnce();
    passMs.push(performance.now() - s);
  }
  const wall = (performance.now() - steadyFrom.at) / 1000;
  const cpu = process.cpuUsage(steadyFrom.cpu);
  global.gc?.();
  const mem1 = process.memoryUsage();
  for (const c of children) c.send('stop');
  passMs.sort((a, b) => a - b);
  process.stdout.write(
    `${JSON.stringify({
      credentials: CREDENTIALS,
      accounts: accounts.length,
      gatewayPods: 3,
      attemptsPerSecond: RATE,
      pollMs: POLL_MS,
      durationS: Math.round(wall),
      firstPass: { writes: firstPassWrites, ms: Math.round(firstPassMs) },
      warmup: { seconds: WARMUP_S, writes: warmupWrites },
      steady: {
        statusWritesPerSecond: Number(((writes - steadyFrom.writes) / wall).toFixed(2)),
        eventsPerSecond: Number(((events - steadyFrom.events) / wall).toFixed(2)),
        leaderCpuPercent: Number((((cpu.user + cpu.system) / 1e6 / wall) * 100).toFixed(1)),
        passMsP50: Math.round(passMs[Math.floor(passMs.length / 2)] ?? 0),
        passMsMax: Math.round(passMs[passMs.length - 1] ?? 0),
      },
      leaderHeapAddedMiB: Number(((mem1.heapUsed - mem0.heapUsed) / 2 ** 20).toFixed(1)),
      leaderRssAddedMiB: Number(((mem1.rss - mem0.rss) / 2 ** 20).toFixed(1)),
    })}\n`,
  );
}

if (process.argv.includes('--child')) void child();
else void parent();
