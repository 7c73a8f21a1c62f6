// The gateway on its real path, beside the floors the same runtime sets. Every system under test runs
// alone on one core (taskset), with the load generator (oha) and a loopback upstream on the other cores. Each round
// starts every system fresh and runs: a warm-up, an open loop at 500/s, the same at 1,000/s, a closed loop at the
// maximum rate, and a streaming open loop (SSE, 20 chunks). Figures are medians over the rounds; "added" latency is
// the system's percentile minus direct's in the same round. CPU per request comes from /proc/<pid>/stat, RSS from
// /proc/<pid>/status after the load, and the upstream counts what it served, which must equal the OKs.
//
// Systems: direct (no proxy), a bare node:http pipe, a bare fastify proxy, and the gateway as users start it: the
// built CLI (`node dist/cli/main.js gateway`) with the flags the image ships for the gateway, with the embedded
// ledger and with Redis; then the gateway with Node's defaults and with the operator's flags, for comparison.
//
//   npm run bench:peers -- [--rounds 3] [--seconds 5] [--systems gateway,fastify-proxy] [--gateway-flags "<a>|<b>"] [--oha <path>]
//                          [--baseline-cli <other checkout>/dist/cli/main.js] [--cycles 6] [--burst-seconds 2]
//
// After the rounds, the selected systems run side by side and are measured in alternating short bursts
// (runInterleaved): the same targets again, each ratio taken between bursts seconds apart.
//
// Prints one JSON document on stdout; progress on stderr.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/controlplane/ports.ts';
import { openLedger } from '../src/ledger/open.ts';
import { cpuStealSeconds, processCpuSeconds } from '../test/support/proc-cpu.ts';
import { ohaPath } from './lib/cache-root.ts';
import { BENCH_API_KEY, BENCH_MODEL, type GatewayFixture, writeGatewayFixture } from './lib/gateway-fixture.ts';
import { CHUNKS, type PeerRole, peerArgv } from './lib/peer-servers.ts';
import { procStatusMB } from './lib/proc.ts';
import { GATEWAY_NODE_OPTIONS, IMAGE_ENV, OPERATOR_NODE_OPTIONS } from './lib/runtime-flags.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// The floors and the upstream run from their own small module, so their heaps hold nothing of this runner's.
const REQUEST = JSON.stringify({ model: BENCH_MODEL, messages: [{ role: 'user', content: 'Say hello.' }] });
const STREAM_REQUEST = JSON.stringify({
  model: BENCH_MODEL,
  stream: true,
  messages: [{ role: 'user', content: 'Say hello.' }],
});

// ---- the run ----

interface System {
  name: string;
  /** Where requests go, and the headers they carry. */
  path: string;
  auth: boolean;
  start?(ctx: RoundContext): Promise<{ proc: ChildProcess; port: number }>;
  note: string;
}

interface RoundContext {
  upstream: string;
  fixture: GatewayFixture;
  redisUrl: string | null;
}

interface Pinning {
  pinned: boolean;
  sut: string;
  others: string;
  note: string;
}

function pinning(): Pinning {
  // The machine's cpus, not this process's affinity (availableParallelism shrinks once the parent pins itself).
  const cpus = os.cpus().length;
  const taskset = spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0;
  if (cpus >= 2 && taskset)
    return {
      pinned: true,
      sut: '0',
      others: cpus === 2 ? '1' : `1-${cpus - 1}`,
      note: `system under test alone on cpu 0; generator, upstream (and Redis) on cpus ${cpus === 2 ? '1' : `1-${cpus - 1}`}`,
    };
  return {
    pinned: false,
    sut: '',
    others: '',
    note:
      cpus < 2
        ? 'NOT PINNED: fewer than 2 cpus; the generator shares the core with the system under test'
        : 'NOT PINNED: taskset not found (util-linux); figures are noisier',
  };
}

/** The image's allocator, where this machine has it (Debian's libjemalloc2). */
const JEMALLOC = ['/usr/lib/x86_64-linux-gnu/libjemalloc.so.2', '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2'].find(
  (p) => existsSync(p),
);

/** The image's environment for a Node process: its flags, NODE_ENV and jemalloc. */
function imageEnv(nodeOptions: string | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...IMAGE_ENV, NODE_ENV: 'production' };
  delete env.NODE_OPTIONS;
  if (nodeOptions) env.NODE_OPTIONS = nodeOptions;
  if (JEMALLOC) env.LD_PRELOAD = JEMALLOC;
  else delete env.LD_PRELOAD;
  return env;
}

function launch(
  pin: Pinning,
  cpus: 'sut' | 'others',
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): ChildProcess {
  const set = cpus === 'sut' ? pin.sut : pin.others;
  const [file, argv] = pin.pinned ? ['taskset', ['-c', set, cmd, ...args]] : [cmd, args];
  return spawn(file, argv, { stdio: ['ignore', 'ignore', 'inherit'], env, cwd: repoRoot });
}

async function waitHttp(url: string, deadline = Date.now() + 30_000): Promise<void> {
  for (;;) {
    const ok = await new Promise<boolean>((done) => {
      const r = request(url, { method: 'GET', timeout: 1000, agent: false }, (res) => {
        res.resume();
        res.once('end', () => done((res.statusCode ?? 500) < 500 || res.statusCode === 404));
      });
      r.once('error', () => done(false));
      r.once('timeout', () => r.destroy());
      r.end();
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${url} did not come up`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function upstreamServed(upstream: string): Promise<number> {
  const text = await new Promise<string>((done, fail) => {
    // A connection of its own: a pooled one may have been closed by the upstream while spawnSync held this loop.
    const r = request(`${upstream}/count`, { method: 'GET', agent: false }, (res) => {
      let t = '';
      res.on('data', (c: Buffer) => (t += c.toString()));
      res.once('end', () => done(t));
    });
    r.once('error', fail);
    r.end();
  });
  return (JSON.parse(text) as { served: number }).served;
}

/** The warm-up's burst at the maximum rate (see runSystem). */
const WARM_MAX_SECONDS = 5;

/** CPU seconds (user + system) a process has used. */
const cpuSeconds = (pid: number) => processCpuSeconds(pid).self;

const rssMb = (pid: number) => Math.round(procStatusMB(pid, 'VmRSS'));

interface OhaReport {
  latencyPercentiles: Record<string, number | null>;
  firstBytePercentiles?: Record<string, number | null>;
  summary: { requestsPerSec: number; total: number };
  statusCodeDistribution: Record<string, number>;
  errorDistribution: Record<string, number>;
}

interface Phase {
  ok: number;
  non2xx: number;
  errors: number;
  rps: number;
  p50_us: number;
  p99_us: number;
  p999_us: number;
  ttfb_p50_us: number;
  ttfb_p99_us: number;
  cpu_us_per_request: number | null;
}

function oha(
  bin: string,
  pin: Pinning,
  url: string,
  opts: { seconds: number; rate?: number; connections: number; body: string; auth: boolean },
): OhaReport {
  const args = [
    '--no-tui',
    '--output-format',
    'json',
    '-z',
    `${opts.seconds}s`,
    '-w',
    '-c',
    String(opts.connections),
    '-m',
    'POST',
    '-T',
    'application/json',
    '-d',
    opts.body,
  ];
  if (opts.rate) args.push('-q', String(opts.rate), '--latency-correction');
  if (opts.auth) args.push('-H', `authorization: Bearer ${BENCH_API_KEY}`);
  args.push(url);
  const [file, argv] = pin.pinned ? ['taskset', ['-c', pin.others, bin, ...args]] : [bin, args];
  const out = spawnSync(file, argv, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, TOKIO_WORKER_THREADS: '1' },
  });
  if (out.status !== 0) throw new Error(`oha failed: ${out.stderr}`);
  return JSON.parse(out.stdout) as OhaReport;
}

interface Load {
  rate?: number;
  connections: number;
  body: string;
  seconds: number;
}

/** The warm-up's buffered loads: pools and the ledger's first writes, then the JIT (see runSystem). */
const WARM_BUFFERED: readonly Load[] = [
  { rate: 500, connections: 64, body: REQUEST, seconds: 2 },
  { connections: 32, body: REQUEST, seconds: WARM_MAX_SECONDS },
];

/** One load against `url`, with the CPU the process `pid` (if any) used meanwhile. */
function measureLoad(
  bin: string,
  pin: Pinning,
  url: string,
  auth: boolean,
  pid: number | undefined,
  load: Load,
): Phase {
  const before = pid ? cpuSeconds(pid) : null;
  const report = oha(bin, pin, url, { ...load, auth });
  return phase(report, pid && before !== null ? cpuSeconds(pid) - before : null);
}

const us = (s: number | null | undefined) => (typeof s === 'number' ? Math.round(s * 1e6) : NaN);

function phase(report: OhaReport, cpu: number | null): Phase {
  const codes = report.statusCodeDistribution;
  const ok = codes['200'] ?? 0;
  const all = Object.values(codes).reduce((a, b) => a + b, 0);
  const errors = Object.values(report.errorDistribution).reduce((a, b) => a + b, 0);
  return {
    ok,
    non2xx: all - ok,
    errors,
    rps: Math.round(ok / report.summary.total),
    p50_us: us(report.latencyPercentiles.p50),
    p99_us: us(report.latencyPercentiles.p99),
    p999_us: us(report.latencyPercentiles['p99.9']),
    ttfb_p50_us: us(report.firstBytePercentiles?.p50),
    ttfb_p99_us: us(report.firstBytePercentiles?.p99),
    cpu_us_per_request: cpu === null || ok === 0 ? null : Math.round((cpu / ok) * 1e6),
  };
}

interface RoundResult {
  open_500: Phase;
  open_1000: Phase;
  max: Phase;
  stream_200: Phase;
  rss_mb_after: number | null;
  upstream_served: number;
  ok_total: number;
}

async function runSystem(
  system: System,
  ctx: RoundContext,
  pin: Pinning,
  bin: string,
  seconds: number,
): Promise<RoundResult> {
  let proc: ChildProcess | undefined;
  let base = ctx.upstream;
  if (system.start) {
    const started = await system.start(ctx);
    proc = started.proc;
    base = `http://127.0.0.1:${started.port}`;
  }
  const url = `${base}${system.path}`;
  const pid = proc?.pid;
  const measure = (load: Load) => measureLoad(bin, pin, url, system.auth, pid, load);
  try {
    const served0 = await upstreamServed(ctx.upstream);
    // Warm-up: pools and the ledger's first writes, then the JIT. V8 tiers code up by how often it runs, not by time, so
    // a burst at the maximum rate brings every system to the optimised code it serves with in steady state. With only
    // 2 s at 500/s the gateway (far more code than a floor) was still being compiled while measured: its V8 worker
    // took ~300 ms of the core per 8 s and CPU per request was ~15 % higher (docs/gateway.md, "Speed").
    const warm = [
      ...WARM_BUFFERED.map(measure),
      measure({ rate: 200, connections: 64, body: STREAM_REQUEST, seconds: 2 }),
    ];
    const open500 = measure({ rate: 500, connections: 64, body: REQUEST, seconds });
    const open1000 = measure({ rate: 1000, connections: 64, body: REQUEST, seconds });
    const max = measure({ connections: 32, body: REQUEST, seconds });
    const stream = measure({ rate: 200, connections: 64, body: STREAM_REQUEST, seconds });
    const rss = pid ? rssMb(pid) : null;
    const served = (await upstreamServed(ctx.upstream)) - served0;
    const okTotal = [...warm, open500, open1000, max, stream].reduce((a, p) => a + p.ok, 0);
    return {
      open_500: open500,
      open_1000: open1000,
      max,
      stream_200: stream,
      rss_mb_after: rss,
      upstream_served: served,
      ok_total: okTotal,
    };
  } finally {
    if (proc) {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    }
  }
}

/** One interleaved cycle's figures of one system (see runInterleaved). */
interface CycleResult {
  max_rps: number;
  cpu_us_at_500: number | null;
  cpu_us_at_1000: number | null;
  p99_us_at_1000: number;
  /** The host's steal on the measured cpu during this system's bursts of the cycle (see cpuStealMs). */
  steal_ms: number;
}

/**
 * The same systems alive side by side, measured in short alternating bursts: each cycle runs one phase for every
 * system back to back (the order rotated each cycle) before the next phase. A ratio is then taken between bursts
 * seconds apart, not between rounds a minute apart, so a neighbour's burst on the shared host moves both sides of
 * most ratios or neither. The rounds above stay the issue's table; this is the steadier reading of the same ratios.
 */
async function runInterleaved(
  systems: readonly System[],
  ctx: RoundContext,
  pin: Pinning,
  bin: string,
  opts: { cycles: number; seconds: number; log: (line: string) => void },
): Promise<{ cycles: Map<string, CycleResult[]>; upstreamServedEqualsOk: boolean; errors: number; non2xx: number }> {
  const started: { system: System; proc?: ChildProcess; url: string }[] = [];
  let okTotal = 0;
  let errors = 0;
  let non2xx = 0;
  try {
    for (const system of systems) {
      if (!system.start) {
        started.push({ system, url: `${ctx.upstream}${system.path}` });
        continue;
      }
      const s = await system.start(ctx);
      started.push({ system, proc: s.proc, url: `http://127.0.0.1:${s.port}${system.path}` });
    }
    const served0 = await upstreamServed(ctx.upstream);
    // This cycle's figures, per system, while a cycle runs.
    let figures: Map<string, Partial<CycleResult>> | undefined;
    const stealMs = () => cpuStealSeconds(pin.sut || '0') * 1000;
    const measure = (one: (typeof started)[number], load: Load): Phase => {
      const stealBefore = stealMs();
      const p = measureLoad(bin, pin, one.url, one.system.auth, one.proc?.pid, load);
      const f = figures?.get(one.system.name);
      if (f) f.steal_ms = (f.steal_ms ?? 0) + Math.round(stealMs() - stealBefore);
      okTotal += p.ok;
      errors += p.errors;
      non2xx += p.non2xx;
      return p;
    };
    for (const one of started) for (const load of WARM_BUFFERED) measure(one, load);
    const cycles = new Map<string, CycleResult[]>();
    for (let cycle = 1; cycle <= opts.cycles; cycle++) {
      opts.log(`interleaved cycle ${cycle}/${opts.cycles}`);
      const order = roundOrder(
        started.map((s) => s.system),
        cycle,
      ).map((system) => started.find((s) => s.system === system)!);
      figures = new Map<string, Partial<CycleResult>>(order.map((s) => [s.system.name, {}]));
      for (const one of order) {
        figures.get(one.system.name)!.max_rps = measure(one, {
          connections: 32,
          body: REQUEST,
          seconds: opts.seconds,
        }).rps;
      }
      for (const one of order) {
        const p = measure(one, { rate: 500, connections: 64, body: REQUEST, seconds: opts.seconds });
        figures.get(one.system.name)!.cpu_us_at_500 = p.cpu_us_per_request;
      }
      for (const one of order) {
        const p = measure(one, { rate: 1000, connections: 64, body: REQUEST, seconds: opts.seconds });
        Object.assign(figures.get(one.system.name)!, {
          cpu_us_at_1000: p.cpu_us_per_request,
          p99_us_at_1000: p.p99_us,
        });
      }
      for (const [name, f] of figures) cycles.set(name, [...(cycles.get(name) ?? []), f as CycleResult]);
    }
    const served = (await upstreamServed(ctx.upstream)) - served0;
    return { cycles, upstreamServedEqualsOk: served === okTotal, errors, non2xx };
  } finally {
    for (const { proc } of started) {
      if (!proc) continue;
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    }
  }
}

/** Ratios of two systems' figures cycle by cycle: the median and [lowest, highest]. */
function pairedRatios(
  cycles: Map<string, CycleResult[]>,
  a: string,
  b: string,
  f: (x: CycleResult, y: CycleResult, direct: CycleResult | undefined) => number | null,
): { median: number; range: [number, number]; per_cycle: number[] } | null {
  const xs = cycles.get(a);
  const ys = cycles.get(b);
  if (!xs || !ys) return null;
  const direct = cycles.get('direct');
  const v = xs
    .map((x, i) => f(x, ys[i]!, direct?.[i]))
    .filter((r): r is number => r !== null && Number.isFinite(r))
    .map((r) => Math.round(r * 100) / 100);
  if (v.length === 0) return null;
  // median() rounds to a whole number: take it in hundredths.
  return { median: median(v.map((r) => r * 100)) / 100, range: [Math.min(...v), Math.max(...v)], per_cycle: v };
}

/** The issue's targets read from the interleaved cycles. */
function interleavedTargets(cycles: Map<string, CycleResult[]>) {
  const met = (r: ReturnType<typeof pairedRatios>, ok: (m: number) => boolean) =>
    r ? { ...r, met: ok(r.median) } : null;
  return {
    max_rps_ge_0_8x_fastify: met(
      pairedRatios(cycles, 'gateway', 'fastify-proxy', (g, f) => g.max_rps / f.max_rps),
      (m) => m >= 0.8,
    ),
    added_p99_at_1000_le_2x_fastify: met(
      pairedRatios(cycles, 'gateway', 'fastify-proxy', (g, f, d) =>
        d ? (g.p99_us_at_1000 - d.p99_us_at_1000) / (f.p99_us_at_1000 - d.p99_us_at_1000) : null,
      ),
      (m) => m <= 2,
    ),
    cpu_per_request_at_500_le_1_2x_fastify: met(
      pairedRatios(cycles, 'gateway', 'fastify-proxy', (g, f) => (g.cpu_us_at_500 ?? NaN) / (f.cpu_us_at_500 ?? NaN)),
      (m) => m <= 1.2,
    ),
    redis_cpu_at_1000_le_1_15x_embedded: met(
      pairedRatios(cycles, 'gateway-redis', 'gateway', (r, e) => (r.cpu_us_at_1000 ?? NaN) / (e.cpu_us_at_1000 ?? NaN)),
      (m) => m <= 1.15,
    ),
    // With --baseline-cli: this build against that one (no target; above 1 is faster, below 1 is cheaper).
    max_rps_against_baseline: pairedRatios(cycles, 'gateway', 'gateway-baseline', (g, b) => g.max_rps / b.max_rps),
    cpu_at_500_against_baseline: pairedRatios(
      cycles,
      'gateway',
      'gateway-baseline',
      (g, b) => (g.cpu_us_at_500 ?? NaN) / (b.cpu_us_at_500 ?? NaN),
    ),
    // A difference in microseconds, not a ratio.
    redis_p99_at_1000_over_embedded_le_500us: met(
      pairedRatios(cycles, 'gateway-redis', 'gateway', (r, e) => r.p99_us_at_1000 - e.p99_us_at_1000),
      (m) => m <= 500,
    ),
    best_of_cycles: bestOfCycles(cycles),
  };
}

/**
 * Each system's best figure over the cycles, and their ratios. On a shared host a neighbour only ever slows a system
 * down (steal, caches, memory bandwidth), so the best of many short bursts is the closest reading of what the code
 * itself costs; the paired medians above say what a user of this host would see.
 */
function bestOfCycles(cycles: Map<string, CycleResult[]>) {
  const best = (system: string, pick: (c: CycleResult) => number | null, better: (a: number, b: number) => number) => {
    const v = (cycles.get(system) ?? []).map(pick).filter((x): x is number => x !== null && Number.isFinite(x));
    return v.length ? v.reduce((a, b) => better(a, b)) : null;
  };
  const ratio = (a: number | null, b: number | null) => (a !== null && b ? Math.round((a / b) * 100) / 100 : null);
  const highest = (system: string) => best(system, (c) => c.max_rps, Math.max);
  const lowest = (system: string, pick: (c: CycleResult) => number | null) => best(system, pick, Math.min);
  return {
    max_rps_gateway_over_fastify: ratio(highest('gateway'), highest('fastify-proxy')),
    cpu_at_500_gateway_over_fastify: ratio(
      lowest('gateway', (c) => c.cpu_us_at_500),
      lowest('fastify-proxy', (c) => c.cpu_us_at_500),
    ),
    cpu_at_1000_redis_over_embedded: ratio(
      lowest('gateway-redis', (c) => c.cpu_us_at_1000),
      lowest('gateway', (c) => c.cpu_us_at_1000),
    ),
  };
}

function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2]! : Math.round((v[v.length / 2 - 1]! + v[v.length / 2]!) / 2);
}

function ensureOha(explicit: string | undefined): string {
  const candidates = [explicit, process.env.OHA, ohaPath()].filter((c): c is string => !!c);
  for (const c of candidates) if (existsSync(c)) return c;
  if (spawnSync('oha', ['--version'], { stdio: 'ignore' }).status === 0) return 'oha';
  const installed = spawnSync('bash', [join(repoRoot, 'scripts', 'install-oha.sh')], { stdio: ['ignore', 2, 2] });
  if (installed.status === 0 && existsSync(candidates[candidates.length - 1]!))
    return candidates[candidates.length - 1]!;
  throw new Error('oha is not installed and scripts/install-oha.sh could not build it (it needs cargo)');
}

function ensureBuilt(): string {
  const entry = join(repoRoot, 'dist', 'cli', 'main.js');
  const newest = (dir: string): number => {
    let t = 0;
    for (const e of spawnSync('find', [dir, '-name', '*.ts', '-newer', entry], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean))
      t = Math.max(t, statSync(e).mtimeMs);
    return t;
  };
  if (!existsSync(entry) || newest(join(repoRoot, 'src')) > 0) {
    process.stderr.write('[bench] building dist/ (npm run build)\n');
    const b = spawnSync('npm', ['run', 'build'], { cwd: repoRoot, stdio: ['ignore', 2, 2] });
    if (b.status !== 0) throw new Error('npm run build failed');
  }
  return entry;
}

/**
 * The systems in the order round `round` runs them: direct first, the others rotated by one place a round, so no
 * system always runs last (a host that quietens or gets busier during a round would favour one column).
 */
function roundOrder(systems: readonly System[], round: number): System[] {
  const rest = systems.filter((s) => s.name !== 'direct');
  const shift = rest.length === 0 ? 0 : (round - 1) % rest.length;
  return [...systems.filter((s) => s.name === 'direct'), ...rest.slice(shift), ...rest.slice(0, shift)];
}

async function startRedis(pin: Pinning): Promise<{ url: string; stop(): void } | null> {
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status !== 0) return null;
  const port = await freePort();
  const proc = launch(pin, 'others', 'redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--dir',
    os.tmpdir(),
    '--appendfilename',
    `bench-${port}.aof`,
  ]);
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout?.trim() === 'PONG') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, stop: () => proc.kill('SIGKILL') };
}

async function main(): Promise<void> {
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? process.argv[i + 1] : undefined;
  };
  const rounds = Number(arg('rounds') ?? 3);
  const seconds = Number(arg('seconds') ?? 5);
  // --cycles 0 skips the interleaved phase (runInterleaved); --burst-seconds sets its bursts.
  const cycles = Number(arg('cycles') ?? 6);
  const burstSeconds = Number(arg('burst-seconds') ?? 2);
  const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
  const pin = pinning();
  // The parent (the streaming bookkeeping, this script) stays off the measured core too.
  if (pin.pinned) spawnSync('taskset', ['-p', '-c', pin.others, String(process.pid)], { stdio: 'ignore' });
  const bin = ensureOha(arg('oha'));
  const cli = ensureBuilt();
  const redis = await startRedis(pin);

  const gateway = (
    name: string,
    nodeOptions: string | null,
    ledger: 'embedded' | 'redis' | 'redis-journal',
    note: string,
    entry = cli,
  ): System => ({
    name,
    path: '/api/v1/chat/completions',
    auth: true,
    note,
    async start(ctx) {
      const port = await freePort();
      const opsPort = await freePort();
      if (ledger !== 'embedded') {
        if (!ctx.redisUrl) throw new Error('redis-server is not installed');
        // In a cluster the operator's spend pass validates an account's counters; here the bench does it.
        const { ledger: l, keys } = await openLedger({ redisUrl: ctx.redisUrl });
        await l.restore(keys.validated(ctx.fixture.accountId), []);
        await l.close();
      }
      const args = [
        entry,
        'gateway',
        '--config-dir',
        ctx.fixture.configDir,
        '--bundle-dir',
        ctx.fixture.bundleDir,
        '--key-dir',
        ctx.fixture.keyDir,
        '--catalog',
        ctx.fixture.catalogFile,
        '--port',
        String(port),
        '--ops-port',
        String(opsPort),
        '--attempt-timeout-ms',
        '60000',
      ];
      // gateway-redis: no journal, as in the figures this bench recorded before the journal was required;
      // gateway-redis-journal: the journal the CLI requires by default (fsync 'batch'), in a directory of its own (under the fixture, removed with it).
      if (ledger === 'redis') args.push('--ledger-redis-url', ctx.redisUrl!, '--ledger-journal', 'none');
      if (ledger === 'redis-journal')
        args.push(
          '--ledger-redis-url',
          ctx.redisUrl!,
          '--ledger-journal',
          mkdtempSync(join(ctx.fixture.root, 'journal-')),
        );
      const proc = launch(pin, 'sut', process.execPath, args, imageEnv(nodeOptions));
      await waitHttp(`http://127.0.0.1:${opsPort}/readyz`);
      return { proc, port };
    },
  });
  const nodeChild = (role: PeerRole, nodeOptions: string | null) => async (ctx: RoundContext) => {
    const port = await freePort();
    const proc = launch(
      pin,
      'sut',
      process.execPath,
      peerArgv(role, ctx.upstream, String(port)),
      imageEnv(nodeOptions),
    );
    await waitHttp(`http://127.0.0.1:${port}/`);
    return { proc, port };
  };
  const all: System[] = [
    {
      name: 'direct',
      path: '/v1/chat/completions',
      auth: false,
      note: 'the upstream itself: the baseline every "added" figure subtracts',
    },
    {
      name: 'node-http-pipe',
      path: '/v1/chat/completions',
      auth: false,
      start: nodeChild('pipe', GATEWAY_NODE_OPTIONS),
      note: 'node:http server piping to node:http client, nothing parsed',
    },
    {
      name: 'fastify-proxy',
      path: '/api/v1/chat/completions',
      auth: false,
      start: nodeChild('fastify', GATEWAY_NODE_OPTIONS),
      note: 'bare fastify route: JSON parsed, forwarded with node:http, answered as JSON',
    },
    gateway(
      'gateway',
      GATEWAY_NODE_OPTIONS,
      'embedded',
      `the CLI (dist/cli/main.js gateway) with the image's gateway flags (${GATEWAY_NODE_OPTIONS || 'none'}) and the embedded ledger`,
    ),
    gateway(
      'gateway-redis',
      GATEWAY_NODE_OPTIONS,
      'redis',
      'the same with the Redis ledger (redis-server with AOF on the other cores), without a spend journal',
    ),
    gateway(
      'gateway-redis-journal',
      GATEWAY_NODE_OPTIONS,
      'redis-journal',
      'the Redis gateway with its spend journal (the default: the CLI requires one unless told none)',
    ),
    gateway('gateway-node-defaults', null, 'embedded', "the gateway with Node's default heap flags"),
    gateway(
      'gateway-operator-flags',
      OPERATOR_NODE_OPTIONS,
      'embedded',
      `the gateway with the operator's flags (${OPERATOR_NODE_OPTIONS}), what the image gave every process before`,
    ),
  ];
  // --baseline-cli <dist/cli/main.js of another checkout>: that build as one more system, for before/after in one run.
  const baseline = arg('baseline-cli');
  if (baseline)
    all.push(
      gateway(
        'gateway-baseline',
        GATEWAY_NODE_OPTIONS,
        'embedded',
        `the gateway built from ${baseline}, embedded ledger`,
        resolve(baseline),
      ),
    );
  // --gateway-flags "a|b": more gateway variants with these NODE_OPTIONS, for the flags table in docs/gateway.md.
  for (const flags of (arg('gateway-flags') ?? '').split('|').filter(Boolean))
    all.push(gateway(`gateway[${flags}]`, flags, 'embedded', `the gateway with NODE_OPTIONS=${flags}`));
  const wanted = arg('systems')?.split(',');
  const systems = all.filter(
    (s) =>
      s.name === 'direct' ||
      !wanted ||
      wanted.includes(s.name) ||
      s.name.startsWith('gateway[') ||
      s.name === 'gateway-baseline',
  );
  if (!redis) log('redis-server not found: gateway-redis is skipped');

  const upstreamPort = await freePort();
  const upstreamProc = launch(pin, 'others', process.execPath, peerArgv('upstream', String(upstreamPort)));
  const upstream = `http://127.0.0.1:${upstreamPort}`;
  await waitHttp(`${upstream}/count`);
  // A budgeted account: admission reserves on the ledger for every request (on Redis, a round trip before the upstream).
  const fixture = writeGatewayFixture(upstream, { budget: true });
  const results = new Map<string, RoundResult[]>();
  let interleaved: Awaited<ReturnType<typeof runInterleaved>> | null = null;
  const runnable = systems.filter((s) => !(s.name.startsWith('gateway-redis') && !redis));
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const system of roundOrder(runnable, round)) {
        log(`round ${round}/${rounds}: ${system.name}`);
        const r = await runSystem(system, { upstream, fixture, redisUrl: redis?.url ?? null }, pin, bin, seconds);
        results.set(system.name, [...(results.get(system.name) ?? []), r]);
      }
    }
    if (cycles > 0) {
      log(
        `interleaved: ${runnable.map((s) => s.name).join(', ')} side by side, ${cycles} cycles of ${burstSeconds} s bursts`,
      );
      interleaved = await runInterleaved(runnable, { upstream, fixture, redisUrl: redis?.url ?? null }, pin, bin, {
        cycles,
        seconds: burstSeconds,
        log,
      });
    }
  } finally {
    upstreamProc.kill('SIGKILL');
    redis?.stop();
    rmSync(fixture.root, { recursive: true, force: true });
  }

  const summary = summarize(systems, results);
  const result = {
    bench: 'peers',
    date: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      model: os.cpus()[0]?.model ?? 'unknown',
      node: process.version,
      load1: Math.round(os.loadavg()[0]! * 100) / 100,
      jemalloc: JEMALLOC ?? null,
    },
    pinning: pin,
    rounds,
    seconds_per_phase: seconds,
    warm_up: `2 s at 500/s, ${WARM_MAX_SECONDS} s at the maximum rate, 2 s of streams at 200/s (not measured)`,
    flags: { gateway: GATEWAY_NODE_OPTIONS, operator: OPERATOR_NODE_OPTIONS },
    systems: summary,
    // The gateway against the bare fastify proxy of the same run (medians over the rounds), and per round.
    targets: targetsOf(summary, results),
    // The systems side by side in alternating bursts: the same targets from ratios taken seconds apart.
    interleaved: interleaved && {
      cycles,
      seconds_per_burst: burstSeconds,
      errors: interleaved.errors,
      non2xx: interleaved.non2xx,
      upstream_served_equals_ok: interleaved.upstreamServedEqualsOk,
      targets: interleavedTargets(interleaved.cycles),
      systems: Object.fromEntries(interleaved.cycles),
    },
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

/** Per system, the medians over the rounds and the rounds themselves. */
function summarize(systems: readonly System[], results: Map<string, RoundResult[]>): Record<string, unknown> {
  const directRounds = results.get('direct')!;
  const summary: Record<string, unknown> = {};
  for (const system of systems) {
    const rs = results.get(system.name);
    if (!rs) continue;
    const m = (f: (r: RoundResult, i: number) => number | null) => median(rs.map((r, i) => f(r, i) ?? NaN));
    const added = (
      key: 'open_500' | 'open_1000' | 'stream_200',
      p: 'p50_us' | 'p99_us' | 'p999_us' | 'ttfb_p50_us' | 'ttfb_p99_us',
    ) => m((r, i) => r[key][p] - directRounds[i]![key][p]);
    summary[system.name] = {
      note: system.note,
      added_us_at_500:
        system.name === 'direct'
          ? null
          : { p50: added('open_500', 'p50_us'), p99: added('open_500', 'p99_us'), p999: added('open_500', 'p999_us') },
      added_us_at_1000:
        system.name === 'direct'
          ? null
          : {
              p50: added('open_1000', 'p50_us'),
              p99: added('open_1000', 'p99_us'),
              p999: added('open_1000', 'p999_us'),
            },
      latency_us_at_1000: {
        p50: m((r) => r.open_1000.p50_us),
        p99: m((r) => r.open_1000.p99_us),
        p999: m((r) => r.open_1000.p999_us),
      },
      max_rps: m((r) => r.max.rps),
      cpu_us_per_request_at_500: m((r) => r.open_500.cpu_us_per_request),
      cpu_us_per_request_at_1000: m((r) => r.open_1000.cpu_us_per_request),
      rss_mb_after: m((r) => r.rss_mb_after),
      stream: {
        chunks: CHUNKS,
        added_ttfb_us:
          system.name === 'direct'
            ? null
            : { p50: added('stream_200', 'ttfb_p50_us'), p99: added('stream_200', 'ttfb_p99_us') },
        added_total_us:
          system.name === 'direct' ? null : { p50: added('stream_200', 'p50_us'), p99: added('stream_200', 'p99_us') },
        cpu_us_per_stream: m((r) => r.stream_200.cpu_us_per_request),
        // What each relayed chunk costs beyond a buffered request's work (CPU), from the same round's figures.
        cpu_us_per_chunk: m((r) =>
          r.stream_200.cpu_us_per_request !== null && r.open_500.cpu_us_per_request !== null
            ? Math.round(((r.stream_200.cpu_us_per_request - r.open_500.cpu_us_per_request) / CHUNKS) * 10) / 10
            : null,
        ),
      },
      errors: rs.reduce((a, r) => a + r.open_500.errors + r.open_1000.errors + r.max.errors + r.stream_200.errors, 0),
      non2xx: rs.reduce((a, r) => a + r.open_500.non2xx + r.open_1000.non2xx + r.max.non2xx + r.stream_200.non2xx, 0),
      // Every OK the client saw was served by the upstream, once (warm-ups included on both sides).
      upstream_served_equals_ok: rs.every((r) => r.upstream_served === r.ok_total),
      rounds: rs,
    };
  }
  return summary;
}

/** The issue's targets: the gateway against the bare fastify proxy of the same run, and Redis against embedded. */
function targetsOf(summary: Record<string, unknown>, results: Map<string, RoundResult[]>) {
  const directRounds = results.get('direct')!;
  const get = (name: string) =>
    summary[name] as
      | {
          added_us_at_1000: { p50: number; p99: number };
          max_rps: number;
          cpu_us_per_request_at_500: number;
          cpu_us_per_request_at_1000: number;
          rss_mb_after: number;
          latency_us_at_1000: { p99: number };
        }
      | undefined;
  const gw = get('gateway');
  const fastify = get('fastify-proxy');
  const redisGw = get('gateway-redis');
  const journalGw = get('gateway-redis-journal');
  const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
  // Per round, the gateway against the bare fastify proxy of the same round: [lowest, highest] over the rounds.
  const roundRatios = (f: (gwRound: RoundResult, fastifyRound: RoundResult, direct: RoundResult) => number | null) => {
    const g = results.get('gateway');
    const fp = results.get('fastify-proxy');
    if (!g || !fp) return null;
    const v = g
      .map((r, i) => f(r, fp[i]!, directRounds[i]!))
      .filter((x): x is number => x !== null && Number.isFinite(x));
    return v.length ? [ratio(Math.min(...v), 1), ratio(Math.max(...v), 1)] : null;
  };
  return gw && fastify
    ? {
        max_rps_ge_0_8x_fastify: {
          value: ratio(gw.max_rps, fastify.max_rps),
          met: gw.max_rps / fastify.max_rps >= 0.8,
          per_round: roundRatios((g, f) => g.max.rps / f.max.rps),
        },
        added_p99_at_1000_le_2x_fastify: {
          value: ratio(gw.added_us_at_1000.p99, fastify.added_us_at_1000.p99),
          met: gw.added_us_at_1000.p99 <= 2 * fastify.added_us_at_1000.p99,
          per_round: roundRatios(
            (g, f, d) => (g.open_1000.p99_us - d.open_1000.p99_us) / (f.open_1000.p99_us - d.open_1000.p99_us),
          ),
        },
        cpu_per_request_at_500_le_1_2x_fastify: {
          value: ratio(gw.cpu_us_per_request_at_500, fastify.cpu_us_per_request_at_500),
          met: gw.cpu_us_per_request_at_500 <= 1.2 * fastify.cpu_us_per_request_at_500,
          per_round: roundRatios(
            (g, f) => (g.open_500.cpu_us_per_request ?? NaN) / (f.open_500.cpu_us_per_request ?? NaN),
          ),
        },
        rss_after_le_1_2x_fastify: {
          value: ratio(gw.rss_mb_after, fastify.rss_mb_after),
          met: gw.rss_mb_after <= 1.2 * fastify.rss_mb_after,
          per_round: roundRatios((g, f) => (g.rss_mb_after ?? NaN) / (f.rss_mb_after ?? NaN)),
        },
        redis_p99_at_1000_over_embedded_le_500us: redisGw
          ? {
              value: redisGw.latency_us_at_1000.p99 - gw.latency_us_at_1000.p99,
              met: redisGw.latency_us_at_1000.p99 - gw.latency_us_at_1000.p99 <= 500,
            }
          : null,
        redis_cpu_at_1000_le_1_15x_embedded: redisGw
          ? {
              value: ratio(redisGw.cpu_us_per_request_at_1000, gw.cpu_us_per_request_at_1000),
              met: redisGw.cpu_us_per_request_at_1000 <= 1.15 * gw.cpu_us_per_request_at_1000,
            }
          : null,
        // The same two with the spend journal the CLI requires by default for Redis.
        redis_journal_p99_at_1000_over_embedded_us: journalGw
          ? journalGw.latency_us_at_1000.p99 - gw.latency_us_at_1000.p99
          : null,
        redis_journal_cpu_at_1000_over_embedded: journalGw
          ? ratio(journalGw.cpu_us_per_request_at_1000, gw.cpu_us_per_request_at_1000)
          : null,
      }
    : null;
}

await main();
