// The dev stack's shared ledger: a redis-server on loopback with AOF (appendfsync everysec), as docs/ledger.md asks
// of any Redis that holds spend, so the ledger, the operator's spend mirror and the SPENT/MTD columns work in dev as
// in a cluster. Absent redis-server (or with --embedded-ledger) the gateway keeps the embedded ledger.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { freePort, startOwnPorts } from '../controlplane/ports.ts';
import { keySpace } from '../ledger/keys.ts';
import { createRedisLedger } from '../ledger/redis.ts';

export interface DevRedis {
  url: string;
  /** Resolves once the operator's spend pass has validated the account for this Redis (its budgets are open). */
  validated(accountId: string, timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

/** Whether the redis-server on `port` is the process `pid`: INFO names its process id (a plain RESP exchange). */
export const isRedisProcess = (port: number, pid: number | undefined) =>
  new Promise<boolean>((resolve) => {
    let answer = '';
    const c = connect(port, '127.0.0.1', () => c.write('*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n'));
    const done = (ok: boolean) => {
      c.destroy();
      resolve(ok);
    };
    c.setTimeout(1000, () => done(false));
    c.on('data', (chunk: Buffer) => {
      answer += chunk.toString();
      if (answer.includes('process_id:')) done(answer.includes(`process_id:${pid}\r\n`));
    });
    c.once('error', () => done(false));
    c.once('end', () => done(false));
  });

/** Starts redis-server with AOF under dir, or returns undefined when it is not installed. */
export async function startDevRedis(dir: string): Promise<DevRedis | undefined> {
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status !== 0) return undefined;
  // Every dev run has a new control plane: the spend of an earlier run (its AOF) must not come back with it.
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const { ports: port, child } = await startOwnPorts('redis-server', {
    ports: freePort,
    start: (p) =>
      spawn(
        'redis-server',
        [
          '--port',
          String(p),
          '--bind',
          '127.0.0.1',
          '--dir',
          dir,
          '--appendonly',
          'yes',
          '--appendfsync',
          'everysec',
          '--save',
          '',
          '--daemonize',
          'no',
          '--loglevel',
          'warning',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      ),
    ready: (p, proc) => isRedisProcess(p, proc.pid),
    beforeRetry: () => {
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
    },
    deadline: Date.now() + 10_000,
    pollMs: 50,
  });
  const url = `redis://127.0.0.1:${port}/0`;
  return {
    url,
    async validated(accountId, timeoutMs) {
      const ledger = await createRedisLedger({ url });
      try {
        const key = keySpace().validated(accountId);
        const deadline = Date.now() + timeoutMs;
        while ((await ledger.client.get(key)) === null) {
          if (Date.now() > deadline)
            throw new Error(
              `the operator did not validate account ${accountId} in the dev ledger within ${timeoutMs} ms`,
            );
          await new Promise((r) => setTimeout(r, 100));
        }
      } finally {
        await ledger.close();
      }
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export const devRedisDir = (devDir: string) => join(devDir, 'redis');
