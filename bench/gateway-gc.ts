// What the gateway allocates and what its garbage costs, per chat completion request. A child serves a
// fixed completion (the upstream); the gateway runs in a child of its own on a routing config compiled and sealed
// here (one account, one BYOK credential: every request decrypts, plans, authenticates upstream, meters and logs),
// with the image's heap flags, and oha drives it open-loop (500 req/s, 64 connections) for a fixed number of
// requests after a warm-up. The bare fastify proxy of bench/peers.ts is measured the same way in the same run.
// bench/lib/gc-probe.ts brackets the measured window with V8's --trace-gc-nvp, so per request:
//   - allocated_bytes: everything allocated (V8's `allocated`, summed over the window's GCs);
//   - survived_bytes: bytes a scavenge copied within the young generation (`new_space_survived`);
//   - promoted_bytes: bytes a scavenge moved to the old generation (`promoted`), which a mark-compact then collects;
//   - gc_ms_per_1000: main-thread GC pauses (scavenges, mark-compacts) and background GC thread time, per 1,000;
//   - cpu_us: the process's CPU per request (informational: the machine may be shared).
// Allocation and survival per request are deterministic, so they are the figures to compare between commits.
// Prints one JSON object.
//
// --stream asks for streamed answers (the upstream then sends server-sent events).
//
// --ledger embedded|redis runs the gateway with a spend ledger as the CLI wires it (default: none, as the figures in
// docs/gateway.md were measured; redis starts a redis-server on loopback).
//   node bench/gateway-gc.ts [--requests 3000] [--rate 500] [--connections 64] [--stream] [--no-fastify] [--ledger embedded|redis]
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { openSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { openGatewaySpendGate } from '../src/cli/gateway-ledger.ts';
import { freePort } from '../src/controlplane/ports.ts';
import { directAccessLog, startGateway } from '../src/gateway/index.ts';
import { openLedger } from '../src/ledger/open.ts';
import { createLogger } from '../src/operator/logger.ts';
import { type RedisServer, startRedis } from '../test/support/redis.ts';
import { ohaPath } from './lib/cache-root.ts';
import { BENCH_API_KEY, BENCH_MODEL, type GatewayFixture, writeGatewayFixture } from './lib/gateway-fixture.ts';
import { peerArgv } from './lib/peer-servers.ts';

/** The image's heap flags (Dockerfile): the young generation's size decides how long garbage has to die young. */
const HEAP_FLAGS = ['--max-semi-space-size=16', '--max-old-space-size=128'];
const OHA = process.env.OHA ?? ohaPath();
const self = fileURLToPath(import.meta.url);
const probe = fileURLToPath(new URL('./lib/gc-probe.ts', import.meta.url));

interface GcLine {
  kind: string;
  pause: number;
  allocated: number;
  survived: number;
  promoted: number;
  background: number;
}

/** One --trace-gc-nvp line: `gc=s` is a scavenge, `gc=ms`/`gc=mc` a mark-compact; background.* are helper threads. */
function parseNvp(line: string): GcLine | null {
  if (!line.includes(' gc=')) return null;
  const f = new Map<string, string>();
  for (const m of line.matchAll(/([a-z_.]+)=([^\s]+)/g)) f.set(m[1]!, m[2]!);
  let background = 0;
  for (const [k, v] of f) if (k.startsWith('background.')) background += Number(v) || 0;
  return {
    kind: f.get('gc') ?? '?',
    pause: Number(f.get('pause') ?? 0),
    allocated: Number(f.get('allocated') ?? 0),
    survived: Number(f.get('new_space_survived') ?? 0),
    promoted: Number(f.get('promoted') ?? 0),
    background,
  };
}

function waitForPort(port: number, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve()));
      s.once(
        'error',
        () => (
          s.destroy(), Date.now() > until ? reject(new Error(`port ${port} never opened`)) : setTimeout(attempt, 100)
        ),
      );
    };
    attempt();
  });
}

function request(child: ChildProcess, msg: string): Promise<unknown> {
  return new Promise((resolve) => {
    child.once('message', resolve);
    child.send(msg);
  });
}

interface Load {
  requests: number;
  rate: number;
  connections: number;
  stream: boolean;
}

/** Drives `port` with oha; resolves with the count of 2xx answers. */
function drive(port: number, load: Load): Promise<number> {
  const body = JSON.stringify({
    model: BENCH_MODEL,
    messages: [{ role: 'user', content: 'Say hello.' }],
    ...(load.stream ? { stream: true } : {}),
  });
  const args = [
    '--no-tui',
    '--output-format',
    'json',
    '-n',
    String(load.requests),
    '-q',
    String(load.rate),
    '--latency-correction',
    '-c',
    String(load.connections),
  ];
  args.push(
    '-m',
    'POST',
    '-T',
    'application/json',
    '-H',
    `authorization: Bearer ${BENCH_API_KEY}`,
    '-d',
    body,
    `http://127.0.0.1:${port}/api/v1/chat/completions`,
  );
  return new Promise((resolve, reject) => {
    const o = spawn(OHA, args, {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, TOKIO_WORKER_THREADS: '1' },
    });
    let out = '';
    o.stdout.on('data', (c: Buffer) => (out += c.toString()));
    o.once('error', reject);
    o.once('exit', () => {
      try {
        const codes =
          (JSON.parse(out) as { statusCodeDistribution?: Record<string, number> }).statusCodeDistribution ?? {};
        resolve(Object.entries(codes).reduce((n, [code, count]) => (code.startsWith('2') ? n + count : n), 0));
      } catch (err) {
        reject(new Error(`oha output unreadable: ${String(err)}`));
      }
    });
  });
}

const round = (v: number, digits = 0) => Math.round(v * 10 ** digits) / 10 ** digits;

/** Warms the process up, then measures one window of `load.requests` requests. */
async function measure(name: string, child: ChildProcess, port: number, load: Load) {
  let stdout = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  await waitForPort(port);
  await drive(port, { ...load, requests: Math.min(2000, load.requests) });
  await request(child, 'gc-start');
  const ok = await drive(port, load);
  const { cpuUs } = (await request(child, 'gc-stop')) as { cpuUs: number };
  const exited = new Promise((r) => child.once('exit', r));
  child.send('gc-exit');
  await exited;
  const lines = stdout
    .split('\n')
    .map(parseNvp)
    .filter((l): l is GcLine => l !== null);
  if (lines.length === 0) throw new Error(`${name}: no GC trace`);
  // The last line is the probe's own scavenge closing the window: its bytes count, its pause does not.
  const forced = lines[lines.length - 1]!;
  const sum = (f: (l: GcLine) => number, of = lines) => of.reduce((n, l) => n + f(l), 0);
  const scavenges = lines.filter((l) => l.kind === 's');
  const natural = lines.slice(0, -1);
  const perReq = (v: number) => round(v / ok);
  const per1000 = (v: number) => round((v / ok) * 1000, 1);
  return {
    requests: ok,
    failed: load.requests - ok,
    per_request: {
      allocated_bytes: perReq(sum((l) => l.allocated)),
      survived_bytes: perReq(sum((l) => l.survived, scavenges)),
      promoted_bytes: perReq(sum((l) => l.promoted, scavenges)),
      cpu_us: round(cpuUs / ok),
    },
    gc_ms_per_1000: {
      minor_pause: per1000(sum((l) => (l.kind === 's' ? l.pause : 0), natural)),
      major_pause: per1000(sum((l) => (l.kind !== 's' ? l.pause : 0), natural)),
      background: per1000(sum((l) => l.background, natural)),
    },
    // The longest pause shows when a shared machine stalled one GC (then the pause sums above are not comparable).
    gcs: {
      scavenges: scavenges.length - (forced.kind === 's' ? 1 : 0),
      mark_compacts: natural.filter((l) => l.kind !== 's').length,
      longest_pause_ms: natural.reduce((m, l) => Math.max(m, l.pause), 0),
    },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '3000' },
      rate: { type: 'string', default: '500' },
      connections: { type: 'string', default: '64' },
      stream: { type: 'boolean', default: false },
      'no-fastify': { type: 'boolean', default: false },
      ledger: { type: 'string', default: 'none' },
    },
  });
  if (!['none', 'embedded', 'redis'].includes(values.ledger))
    throw new Error(`--ledger ${values.ledger}: use none, embedded or redis`);
  const load: Load = {
    requests: Number(values.requests),
    rate: Number(values.rate),
    connections: Number(values.connections),
    stream: values.stream,
  };
  const upstreamPort = await freePort();
  const upstream = spawn(process.execPath, peerArgv('upstream', String(upstreamPort)), {
    stdio: 'ignore',
  });
  const children: ChildProcess[] = [upstream];
  let fixture: GatewayFixture | undefined;
  let redis: RedisServer | undefined;
  try {
    await waitForPort(upstreamPort);
    const upstreamUrl = `http://127.0.0.1:${upstreamPort}`;
    fixture = writeGatewayFixture(upstreamUrl);
    let ledgerArg = values.ledger;
    if (values.ledger === 'redis') {
      redis = await startRedis();
      // What the operator's spend pass does for every account: validate it for the running Redis process.
      const { ledger, keys } = await openLedger({ redisUrl: redis.url });
      await ledger.restore(keys.validated(fixture.accountId), []);
      await ledger.close();
      ledgerArg = redis.url;
    }
    const execArgv = [...HEAP_FLAGS, '--expose-gc', '--import', probe];
    const gwPort = await freePort();
    const gw = fork(self, ['--gateway', JSON.stringify(fixture), String(gwPort), ledgerArg], {
      execArgv,
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    children.push(gw);
    const gateway = await measure('gateway', gw, gwPort, load);
    let fastify: Awaited<ReturnType<typeof measure>> | null = null;
    if (!values['no-fastify']) {
      const fPort = await freePort();
      const [peerModule, ...peerArgs] = peerArgv('fastify', upstreamUrl, String(fPort));
      const f = fork(peerModule!, peerArgs, {
        execArgv,
        stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      });
      children.push(f);
      fastify = await measure('fastify', f, fPort, load);
    }
    const result = {
      bench: 'gateway-gc',
      node: process.version,
      heap_flags: HEAP_FLAGS.join(' '),
      ledger: values.ledger,
      load: { ...load, tool: 'oha --latency-correction' },
      gateway,
      fastify,
      gateway_minus_fastify: fastify
        ? {
            allocated_bytes: gateway.per_request.allocated_bytes - fastify.per_request.allocated_bytes,
            survived_bytes: gateway.per_request.survived_bytes - fastify.per_request.survived_bytes,
            promoted_bytes: gateway.per_request.promoted_bytes - fastify.per_request.promoted_bytes,
          }
        : null,
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill();
    await redis?.stop();
    if (fixture) rmSync(fixture.root, { recursive: true, force: true });
  }
}

/** The measured gateway: logs at info, synchronously, to /dev/null (the line is built and written as in production). */
async function serveGateway(fixture: GatewayFixture, port: number, ledger: string): Promise<void> {
  const logger = createLogger({
    level: 'info',
    redact: false,
    destination: pino.destination({ dest: openSync('/dev/null', 'w'), sync: true }),
  });
  const spendGate =
    ledger === 'none'
      ? undefined
      : await openGatewaySpendGate({
          ...(ledger === 'embedded' ? {} : { redisUrl: ledger }),
          registry: new Registry(),
          logger,
        });
  await startGateway({
    configDir: fixture.configDir,
    bundleDir: fixture.bundleDir,
    keyDir: fixture.keyDir,
    catalogFile: fixture.catalogFile,
    host: '127.0.0.1',
    port,
    logger,
    accessLog: directAccessLog(logger),
    ...(spendGate ? { spendGate } : {}),
  });
}

if (process.argv[2] === '--gateway')
  await serveGateway(
    JSON.parse(process.argv[3]!) as GatewayFixture,
    Number(process.argv[4]),
    process.argv[5] ?? 'none',
  );
else await main();
