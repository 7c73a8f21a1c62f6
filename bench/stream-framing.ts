// Benchmark of the gateway's CPU per streamed byte in every SSE framing. A child process plays the
// upstream and streams a 4 MiB answer in the framing the request names (in its `user` field, which the gateway
// forwards): LF, CRLF, CR, one giant 4 MiB event, or events whose JSON spans two `data:` lines; it writes 16 KiB at
// a time, waiting a turn of its event loop between writes, so the gateway reads the stream in pieces as it would
// from a network. Another child runs the gateway on a compiled account (bench/lib/gateway-fixture.ts). The parent
// requests each stream `--rounds` times, reads it to its end, and reports the gateway process's CPU time for it
// (utime + stime from /proc, median of the rounds) and how long the stream took; meanwhile it sends small
// non-stream requests one after another and reports their latency (what other requests wait while the one event
// loop reads the stream).
// Prints one JSON document. `--gateway-root <dir>` runs the gateway from another checkout's sources (for old vs new:
// `git archive <rev> src package.json | tar -x -C <dir>` and a node_modules symlink in <dir>).
//
//   node bench/stream-framing.ts [--rounds 3] [--gateway-root /tmp/byok-old]
import { type ChildProcess, fork } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processCpuSeconds } from '../test/support/proc-cpu.ts';
import { BENCH_API_KEY, BENCH_MODEL, writeGatewayFixture } from './lib/gateway-fixture.ts';
import { median } from './lib/stats.ts';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const FRAMINGS = ['lf', 'crlf', 'cr', 'giant-event', 'multiline-data'] as const;
type Framing = (typeof FRAMINGS)[number];
const SIZE = 4 * 1024 * 1024;
const WRITE = 16 * 1024;
const USAGE = { prompt_tokens: 12, completion_tokens: 900_000, total_tokens: 900_012 };

/** The 4 MiB answer in one framing, ending with a usage event and [DONE]. */
function streamBody(framing: Framing): string {
  const content = 'It was a bright cold day in April, and the clocks were striking thirteen. '.repeat(2);
  const chunk = JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion.chunk',
    model: 'gpt-4o',
    choices: [{ index: 0, delta: { content } }],
  });
  const usage = JSON.stringify({ id: 'chatcmpl-bench', choices: [], usage: USAGE });
  const t = framing === 'crlf' ? '\r\n' : framing === 'cr' ? '\r' : '\n';
  if (framing === 'giant-event') {
    const giant = JSON.stringify({
      id: 'chatcmpl-bench',
      choices: [{ index: 0, delta: { content: 'x'.repeat(SIZE) } }],
    });
    return `data: ${giant}\n\ndata: ${usage}\n\ndata: [DONE]\n\n`;
  }
  // Two data lines per event: the JSON cut after its first member (SSE joins the lines with LF).
  const event =
    framing === 'multiline-data' ? `data: ${chunk.replace(',', ',\ndata: ')}\n\n` : `data: ${chunk}${t}${t}`;
  return `${event.repeat(Math.ceil(SIZE / event.length))}data: ${usage}${t}${t}data: [DONE]${t}${t}`;
}

// ---- children ----

function serveUpstream(): void {
  const bodies = new Map(FRAMINGS.map((f) => [f, Buffer.from(streamBody(f))]));
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const asked = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { user?: Framing; stream?: boolean };
      if (asked.stream !== true) {
        const completion = JSON.stringify({
          id: 'chatcmpl-bench',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'Hello!' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 5, completion_tokens: 2 },
        });
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(completion);
      }
      const body = bodies.get(asked.user ?? 'lf')!;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      void (async () => {
        for (let i = 0; i < body.length; i += WRITE) {
          if (!res.write(body.subarray(i, i + WRITE))) await new Promise((r) => res.once('drain', r));
          await new Promise((r) => setImmediate(r));
        }
        res.end();
      })();
    });
  });
  server.listen(0, '127.0.0.1', () =>
    process.send?.({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
  );
}

async function serveGateway(upstreamUrl: string, root: string): Promise<void> {
  const { startGateway } = (await import(
    join(root, 'src/gateway/index.ts')
  )) as typeof import('../src/gateway/index.ts');
  const fixture = writeGatewayFixture(upstreamUrl);
  const gw = await startGateway({
    configDir: fixture.configDir,
    bundleDir: fixture.bundleDir,
    keyDir: fixture.keyDir,
    catalogFile: fixture.catalogFile,
    host: '127.0.0.1',
    port: 0,
  });
  process.send?.({ url: gw.url });
  process.on('message', (m) => {
    if (m === 'stop')
      void gw.close().then(() => {
        rmSync(fixture.root, { recursive: true, force: true });
        process.exit(0);
      });
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

/** CPU time of a process so far, in ms (utime + stime). */
const cpuMs = (pid: number) => processCpuSeconds(pid).self * 1000;

/** One streamed request read to its end: the bytes and whether the closing comment came. */
function stream(gatewayUrl: string, framing: Framing): Promise<{ bytes: number; closed: boolean }> {
  const body = JSON.stringify({
    model: BENCH_MODEL,
    stream: true,
    user: framing,
    messages: [{ role: 'user', content: 'Tell me a long story.' }],
  });
  return new Promise((resolve, reject) => {
    const r = request(
      `${gatewayUrl}/api/v1/chat/completions`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${BENCH_API_KEY}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let bytes = 0;
        let tail = '';
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          tail = (tail + c.toString('latin1')).slice(-4096);
        });
        res.on('end', () => resolve({ bytes, closed: tail.includes(': provider_responses') }));
        res.on('error', reject);
      },
    );
    r.on('error', reject);
    r.end(body);
  });
}

/** Small non-stream requests one after another until `done`: their latencies in ms. */
async function alongside(gatewayUrl: string, done: Promise<unknown>): Promise<number[]> {
  const body = JSON.stringify({ model: BENCH_MODEL, messages: [{ role: 'user', content: 'Say hello.' }] });
  let over = false;
  void done.then(() => (over = true));
  const latencies: number[] = [];
  while (!over) {
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      const r = request(
        `${gatewayUrl}/api/v1/chat/completions`,
        {
          method: 'POST',
          headers: {
            authorization: `Bearer ${BENCH_API_KEY}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve());
        },
      );
      r.on('error', reject);
      r.end(body);
    });
    latencies.push(performance.now() - t0);
  }
  return latencies;
}

async function main(): Promise<void> {
  const rounds = Number(arg('rounds') ?? 3);
  const root = arg('gateway-root') ?? join(import.meta.dirname, '..');
  const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
  const upstream = await child(['--upstream']);
  const gateway = await child(['--gateway', upstream.url, root]);
  const results: Record<
    string,
    {
      cpu_ms: number;
      cpu_ms_rounds: number[];
      wall_ms: number;
      bytes: number;
      closed: boolean;
      alongside: { requests: number; p50_ms: number; max_ms: number };
    }
  > = {};
  try {
    // One warm-up stream: the first request compiles the gateway's hot paths.
    await stream(gateway.url, 'lf');
    for (const framing of FRAMINGS) {
      const cpu: number[] = [];
      const wall: number[] = [];
      const others: number[] = [];
      let last = { bytes: 0, closed: false };
      // CPU alone first (nothing else runs in the gateway), then again with other requests alongside, for their latency.
      for (let i = 0; i < rounds; i++) {
        const c0 = cpuMs(gateway.proc.pid!);
        const t0 = performance.now();
        last = await stream(gateway.url, framing);
        wall.push(performance.now() - t0);
        cpu.push(cpuMs(gateway.proc.pid!) - c0);
      }
      for (let i = 0; i < rounds; i++) {
        const streamed = stream(gateway.url, framing);
        others.push(...(await alongside(gateway.url, streamed)));
      }
      const alongsideStats = {
        requests: others.length,
        p50_ms: Math.round(median(others) * 10) / 10,
        max_ms: Math.round(Math.max(...others)),
      };
      results[framing] = {
        cpu_ms: median(cpu),
        cpu_ms_rounds: cpu,
        wall_ms: Math.round(median(wall)),
        bytes: last.bytes,
        closed: last.closed,
        alongside: alongsideStats,
      };
      log(`${framing}: ${median(cpu)} ms CPU`);
    }
  } finally {
    gateway.proc.send('stop');
    upstream.proc.kill();
  }
  process.stdout.write(
    `${JSON.stringify({ bench: 'stream-framing', gateway_root: root, stream_bytes: SIZE, upstream_write_bytes: WRITE, rounds, results }, null, 2)}\n`,
  );
}

if (process.argv[2] === '--upstream') serveUpstream();
else if (process.argv[2] === '--gateway') void serveGateway(process.argv[3]!, process.argv[4]!);
else await main();
