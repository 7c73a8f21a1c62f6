// Benchmark of the gateway's added cost on loopback. A child process serves a fixed chat completion (the upstream);
// another runs the gateway on a routing config compiled and sealed here (one account, one BYOK credential, so every
// request decrypts its credential, plans, authenticates upstream and records provider_responses and its log line).
// In the same run the parent loads the upstream directly and through the gateway:
//   - at a fixed 1,000 req/s with its own open-loop generator (µs timestamps; autocannon reports whole ms), giving
//     the added latency p50/p99;
//   - at maximum rate with autocannon, giving the throughput ratio.
// A bare fastify proxy (same HTTP client, no logic) runs in the same phases, so the cost of a proxy hop on this
// machine is reported separately from what the gateway's own work adds.
// Prints one JSON document. Targets: added p50 ≤ 200 µs and p99 ≤ 2 ms at 1k req/s; throughput ≥ 0.5× direct.
//
//   node bench/gateway.ts [--duration 5] [--connections 32]
import { type ChildProcess, fork } from 'node:child_process';
import { rmSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { startGateway } from '../src/gateway/index.ts';
import { BENCH_API_KEY, writeGatewayFixture } from './lib/gateway-fixture.ts';
import { bareFastifyProxy, COMPLETION } from './lib/peer-servers.ts';

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as (opts: Record<string, unknown>) => Promise<AutocannonResult>;

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const API_KEY = BENCH_API_KEY;
const REQUEST = JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Say hello.' }] });

// ---- children ----

async function serveUpstream(): Promise<void> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(COMPLETION) });
      res.end(COMPLETION);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () =>
    process.send?.({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
  );
}

async function serveGateway(upstreamUrl: string): Promise<void> {
  const { root, configDir, bundleDir, keyDir, catalogFile } = writeGatewayFixture(upstreamUrl);
  const gw = await startGateway({
    configDir,
    bundleDir,
    keyDir,
    catalogFile,
    host: '127.0.0.1',
    port: 0,
    // The per-request structured log line stays in the measurement: one synchronous write, as to stdout in a pod.
    logger: pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true })),
  });
  process.send?.({ url: gw.url });
  process.on('message', (m) => {
    if (m === 'metrics')
      void gw.metrics.registry
        .getSingleMetricAsString('byok_gateway_overhead_seconds')
        .then((t) => process.send?.({ metrics: t }));
    if (m === 'stop')
      void gw.close().then(() => {
        rmSync(root, { recursive: true, force: true });
        process.exit(0);
      });
  });
}

/** The floor: a bare fastify route that forwards to the upstream with the same HTTP client setup and no logic. */
async function serveBareProxy(upstreamUrl: string): Promise<void> {
  const app = bareFastifyProxy(upstreamUrl, '/v1/chat/completions');
  await app.listen({ host: '127.0.0.1', port: 0 });
  process.send?.({ url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` });
  process.on('message', (m) => {
    if (m === 'stop') void app.close().then(() => process.exit(0));
  });
}

// ---- parent ----

function child(args: string[]): Promise<{ proc: ChildProcess; url: string }> {
  const proc = fork(fileURLToPath(import.meta.url), args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    proc.once('message', (m) => resolve({ proc, url: (m as { url: string }).url }));
    proc.once('exit', (code) => reject(new Error(`child ${args[0]} exited with ${code}`)));
  });
}

/** Open-loop load at a fixed rate; latencies in µs. */
async function fixedRate(
  url: string,
  rate: number,
  seconds: number,
  headers: Record<string, string>,
): Promise<{ p50_us: number; p99_us: number; sent: number; failed: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const target = new URL(url);
  const latencies: number[] = [];
  let failed = 0;
  let inflight = 0;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      inflight++;
      const r = request(
        target,
        {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(REQUEST), ...headers },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            inflight--;
            if (res.statusCode === 200) latencies.push((performance.now() - t0) * 1000);
            else failed++;
            resolve();
          });
        },
      );
      r.on('error', () => {
        inflight--;
        failed++;
        resolve();
      });
      r.end(REQUEST);
    });
  const total = rate * seconds;
  const start = performance.now();
  const pending: Promise<void>[] = [];
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate));
    while (sent < due) {
      pending.push(one());
      sent++;
    }
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(pending);
  agent.destroy();
  void inflight;
  latencies.sort((a, b) => a - b);
  const q = (p: number) =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN);
  return { p50_us: q(0.5), p99_us: q(0.99), sent, failed };
}

/** Closed loop on one connection: latency without queueing, for a loaded machine where 1k req/s saturates. */
async function sequential(
  url: string,
  count: number,
  headers: Record<string, string>,
): Promise<{ p50_us: number; p99_us: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const target = new URL(url);
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    latencies.push(
      await new Promise<number>((resolve, reject) => {
        const t0 = performance.now();
        const r = request(
          target,
          {
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(REQUEST), ...headers },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve((performance.now() - t0) * 1000));
          },
        );
        r.on('error', reject);
        r.end(REQUEST);
      }),
    );
  }
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    p50_us: Math.round(latencies[Math.floor(count / 2)]!),
    p99_us: Math.round(latencies[Math.floor(count * 0.99)]!),
  };
}

async function maxRate(url: string, seconds: number, connections: number, headers: Record<string, string>) {
  const r = await autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: REQUEST,
    connections,
    duration: seconds,
  });
  return {
    rps: Math.round(r.requests.average),
    p50_ms: r.latency.p50,
    p99_ms: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
}

async function main(): Promise<void> {
  const duration = arg('duration', 5);
  const connections = arg('connections', 32);
  const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
  const upstream = await child(['--upstream']);
  const gateway = await child(['--gateway', upstream.url]);
  const bare = await child(['--bare-proxy', upstream.url]);
  try {
    const direct = `${upstream.url}/v1/chat/completions`;
    const through = `${gateway.url}/api/v1/chat/completions`;
    const proxied = `${bare.url}/v1/chat/completions`;
    const auth = { authorization: `Bearer ${API_KEY}` };
    log('warm-up');
    await fixedRate(direct, 500, 1, {});
    await fixedRate(through, 500, 1, auth);
    await fixedRate(proxied, 500, 1, {});
    log(`1,000 req/s for ${duration} s: direct, through a bare proxy, through the gateway`);
    const fixedDirect = await fixedRate(direct, 1000, duration, {});
    const fixedBare = await fixedRate(proxied, 1000, duration, {});
    const fixedGateway = await fixedRate(through, 1000, duration, auth);
    log('sequential, one connection: direct, bare proxy, gateway');
    const seqDirect = await sequential(direct, 2000, {});
    const seqBare = await sequential(proxied, 2000, {});
    const seqGateway = await sequential(through, 2000, auth);
    log(`max rate for ${duration} s with ${connections} connections: direct, then through the gateway`);
    const maxDirect = await maxRate(direct, duration, connections, {});
    const maxGateway = await maxRate(through, duration, connections, auth);
    const maxBare = await maxRate(proxied, duration, connections, {});
    gateway.proc.send('metrics');
    const metricsText = await new Promise<string>((r) =>
      gateway.proc.once('message', (m) => r((m as { metrics: string }).metrics)),
    );
    const sum = Number(/byok_gateway_overhead_seconds_sum\{[^}]*\} ([0-9.e+-]+)/.exec(metricsText)?.[1]);
    const count = Number(/byok_gateway_overhead_seconds_count\{[^}]*\} ([0-9.e+-]+)/.exec(metricsText)?.[1]);
    const added = {
      p50_us: fixedGateway.p50_us - fixedDirect.p50_us,
      p99_us: fixedGateway.p99_us - fixedDirect.p99_us,
    };
    const ratio = Math.round((maxGateway.rps / maxDirect.rps) * 100) / 100;
    const result = {
      machine: { cpus: os.cpus().length, load1: Math.round(os.loadavg()[0]! * 100) / 100 },
      fixed_1000_rps: {
        direct: fixedDirect,
        bare_proxy: fixedBare,
        gateway: fixedGateway,
        added_latency_us: added,
        // What a proxy hop alone costs on this machine, and what the gateway's logic adds on top of it.
        bare_proxy_added_latency_us: {
          p50_us: fixedBare.p50_us - fixedDirect.p50_us,
          p99_us: fixedBare.p99_us - fixedDirect.p99_us,
        },
        gateway_over_bare_proxy_us: {
          p50_us: fixedGateway.p50_us - fixedBare.p50_us,
          p99_us: fixedGateway.p99_us - fixedBare.p99_us,
        },
      },
      sequential_one_connection: {
        direct: seqDirect,
        bare_proxy: seqBare,
        gateway: seqGateway,
        added_latency_us: {
          p50_us: seqGateway.p50_us - seqDirect.p50_us,
          p99_us: seqGateway.p99_us - seqDirect.p99_us,
        },
        gateway_over_bare_proxy_us: {
          p50_us: seqGateway.p50_us - seqBare.p50_us,
          p99_us: seqGateway.p99_us - seqBare.p99_us,
        },
      },
      max_rate: {
        connections,
        direct: maxDirect,
        bare_proxy: maxBare,
        gateway: maxGateway,
        throughput_ratio: ratio,
        bare_proxy_throughput_ratio: Math.round((maxBare.rps / maxDirect.rps) * 100) / 100,
        gateway_to_bare_proxy_ratio: Math.round((maxGateway.rps / maxBare.rps) * 100) / 100,
      },
      gateway_overhead_mean_us: count > 0 ? Math.round((sum / count) * 1e6) : null,
      targets: {
        added_p50_le_200us: added.p50_us <= 200,
        added_p99_le_2ms: added.p99_us <= 2000,
        throughput_ratio_ge_0_5: ratio >= 0.5,
      },
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } finally {
    gateway.proc.send('stop');
    bare.proc.send('stop');
    upstream.proc.kill();
  }
}

if (process.argv[2] === '--upstream') await serveUpstream();
else if (process.argv[2] === '--gateway') await serveGateway(process.argv[3]!);
else if (process.argv[2] === '--bare-proxy') await serveBareProxy(process.argv[3]!);
else await main();
