// startOwnPorts against real processes and real clashes: a port chosen before the child binds it can be taken in
// between (another worker's server), and then the child exits on a bind failure while the other server answers on
// the port. Each test takes the port first with a server of its own, so the clash happens every time.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from '@jest/globals';
import { freePort, startOwnPorts } from '../../../src/controlplane/ports.ts';

/** A Node HTTP server child on `port` that answers with its pid (how `ready` recognises it). */
const serverChild = (port: number): ChildProcess =>
  spawn(
    process.execPath,
    ['-e', `require('node:http').createServer((q, s) => s.end(String(process.pid))).listen(${port}, '127.0.0.1')`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
const answersAs = async (port: number, child: ChildProcess) =>
  (await (await fetch(`http://127.0.0.1:${port}/`)).text()) === String(child.pid);

const children: ChildProcess[] = [];
/** Starts serverChild on `port`, counting starts in `count.starts`. */
const startCounted =
  (count: { starts: number }) =>
  (port: number): ChildProcess => {
    count.starts++;
    const c = serverChild(port);
    children.push(c);
    return c;
  };
const holders: Server[] = [];
/** Takes a port with a server that answers too (as another worker's would). */
async function holder(): Promise<{ server: Server; port: number }> {
  const server = createServer((_q, s) => s.end('someone else'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  holders.push(server);
  return { server, port: (server.address() as AddressInfo).port };
}
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  await Promise.all(holders.splice(0).map((s) => new Promise((r) => s.close(r))));
});

describe('startOwnPorts', () => {
  test('a port taken between choosing and binding: the child is started again on a new port; the holder is never taken for it', async () => {
    const taken = await holder();
    const offered: number[] = [];
    const { ports, child } = await startOwnPorts('server', {
      ports: async () => {
        const p = offered.length === 0 ? taken.port : await freePort();
        offered.push(p);
        return p;
      },
      start: startCounted({ starts: 0 }),
      ready: answersAs,
      deadline: Date.now() + 30_000,
    });
    expect(offered[0]).toBe(taken.port);
    expect(offered).toHaveLength(2);
    expect(ports).toBe(offered[1]);
    expect(await answersAs(ports, child)).toBe(true);
    // The holder still serves its port.
    expect(await (await fetch(`http://127.0.0.1:${taken.port}/`)).text()).toBe('someone else');
  });

  test('a restart keeps its port: it waits for the holder to let go (beforeRetry), then binds that port', async () => {
    const taken = await holder();
    const count = { starts: 0 };
    const { ports } = await startOwnPorts('server', {
      ports: async () => taken.port,
      start: startCounted(count),
      ready: answersAs,
      beforeRetry: () => taken.server.close(),
      deadline: Date.now() + 30_000,
    });
    expect(ports).toBe(taken.port);
    expect(count.starts).toBe(2);
  });

  test('bounded: a port that stays taken fails after `attempts` starts, with the clash in the message', async () => {
    const taken = await holder();
    const count = { starts: 0 };
    const failed = await startOwnPorts('server', {
      ports: async () => taken.port,
      start: startCounted(count),
      ready: answersAs,
      attempts: 3,
      deadline: Date.now() + 30_000,
    }).catch((err: unknown) => err as Error);
    expect(failed).toBeInstanceOf(Error);
    expect((failed as Error).message).toMatch(/^server exited \(1\): its port was taken, 3 times\n[\s\S]*EADDRINUSE/);
    expect(count.starts).toBe(3);
  });

  test('an exit that is not a clash is not retried', async () => {
    let starts = 0;
    const failed = await startOwnPorts('server', {
      ports: freePort,
      start: () => {
        starts++;
        const c = spawn(process.execPath, ['-e', 'console.error("bad flag"); process.exit(3)'], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        children.push(c);
        return c;
      },
      ready: async () => false,
      deadline: Date.now() + 30_000,
    }).catch((err: unknown) => err as Error);
    expect((failed as Error).message).toBe('server exited (3)\nbad flag\n');
    expect(starts).toBe(1);
  });
});
