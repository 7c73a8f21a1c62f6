// A real redis-server for one test file: loopback, a free port, its own temp dir, no persistence; killed on stop,
// on process exit, and by a detached reaper if the test process dies without stopping it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../src/controlplane/control-plane.ts';

export interface RedisServer {
  url: string;
  port: number;
  /** Kills the server (simulates an outage); start() brings it back on the same port, empty. */
  kill(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

function reaper(workDir: string): ChildProcess {
  const script = `
    while kill -0 ${process.pid} 2>/dev/null && [ ! -f "$1/stopped" ]; do sleep 1; done
    pid=$(cat "$1/redis.pid" 2>/dev/null); [ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$1"`;
  const r = spawn('bash', ['-c', script, 'reaper', workDir], { detached: true, stdio: 'ignore' });
  r.unref();
  return r;
}

async function waitReady(url: string, deadline: number): Promise<void> {
  for (;;) {
    const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, connectTimeout: 500 });
    probe.on('error', () => {});
    try {
      await probe.connect();
      if ((await probe.ping()) === 'PONG') return;
    } catch {
      // not up yet
    } finally {
      probe.disconnect();
    }
    if (Date.now() > deadline) throw new Error(`redis-server at ${url} did not become ready`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startRedis(): Promise<RedisServer> {
  const workDir = mkdtempSync(join(tmpdir(), 'byok-redis-'));
  reaper(workDir);
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const onExit = () => child?.kill('SIGKILL');
  process.on('exit', onExit);

  const start = async () => {
    const proc = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', workDir, '--daemonize', 'no', '--loglevel', 'warning'],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    proc.once('error', (err) => process.stderr.write(`[redis] ${err.message} (is the Debian package redis-server installed?)\n`));
    child = proc;
    writeFileSync(join(workDir, 'redis.pid'), String(proc.pid));
    await waitReady(url, Date.now() + 10_000);
  };
  const kill = async () => {
    const proc = child;
    if (proc === undefined || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
    child = undefined;
  };
  await start();
  return {
    url,
    port,
    kill,
    start,
    async stop() {
      await kill();
      process.off('exit', onExit);
      writeFileSync(join(workDir, 'stopped'), '');
    },
  };
}
