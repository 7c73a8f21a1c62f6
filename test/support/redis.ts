// A real redis-server for one test file: loopback, a port it holds (startOwnPorts: another worker's server on a
// taken port is never taken for it), its own temp dir, no persistence; killed on stop, and by a detached reaper
// if the test process dies without stopping it.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isRedisProcess } from '../../src/cli/dev-redis.ts';
import { freePort, startOwnPorts } from '../../src/controlplane/ports.ts';
import { startReaper } from '../../src/controlplane/reaper.ts';

export interface RedisServer {
  url: string;
  port: number;
  /** Kills the server (simulates an outage); start() brings it back on the same port, empty. */
  kill(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedis(): Promise<RedisServer> {
  const workDir = mkdtempSync(join(tmpdir(), 'byok-redis-'));
  startReaper(workDir, { removeDir: true });
  let port = 0;
  let child: ChildProcess | undefined;

  /** The first start takes a port of its own; start() after kill() comes back on that port (clients keep the URL). */
  const start = async () => {
    const started = await startOwnPorts('redis-server', {
      ports: async () => port || (await freePort()),
      start: (p) => {
        const proc = spawn(
          'redis-server',
          [
            '--port',
            String(p),
            '--bind',
            '127.0.0.1',
            '--save',
            '',
            '--appendonly',
            'no',
            '--dir',
            workDir,
            '--daemonize',
            'no',
            '--loglevel',
            'warning',
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        );
        proc.once('error', (err) =>
          process.stderr.write(`[redis] ${err.message} (is the Debian package redis-server installed?)\n`),
        );
        child = proc;
        writeFileSync(join(workDir, 'redis.pid'), String(proc.pid));
        return proc;
      },
      ready: (p, proc) => isRedisProcess(p, proc.pid),
      deadline: Date.now() + 10_000,
      pollMs: 50,
    });
    port = started.ports;
  };
  const kill = async () => {
    const proc = child;
    if (proc === undefined || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
    // Its pid is free for another process now: the reaper must not find it if this worker dies before start().
    rmSync(join(workDir, 'redis.pid'), { force: true });
    child = undefined;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    start,
    async stop() {
      await kill();
      writeFileSync(join(workDir, 'stopped'), '');
    },
  };
}
