// Ports for servers that run as processes of their own (etcd, kube-apiserver, redis-server): they cannot bind port 0
// and say which port they got, so a port is chosen first and the child binds it later. In between, another process
// (another test worker starting its servers at the same moment) can take it. startOwnPorts closes that gap by
// construction: the child counts as started only once `ready` recognises the child itself on its ports, and a child
// that exits on a bind clash is started again on ports chosen afresh, a bounded number of times.
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

/** What every server here prints when its port was taken (Go's net, redis-server, Node). */
export const BIND_CLASH = /address already in use/i;

/** A port the kernel had free a moment ago, on 127.0.0.1. Free only when chosen: pass it to startOwnPorts. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface OwnPortsOptions<P> {
  /** The ports for one start: chosen afresh (freePort) for a first start, the same ones for a restart. */
  ports: () => Promise<P>;
  /** Starts the child on `ports`; its stdout and stderr must be pipes (the bind failure is read from them). */
  start: (ports: P) => ChildProcess;
  /**
   * Whether the child serves on `ports`. It must recognise this child (its certificate authority, its pid, its name),
   * not only an answer: whoever took a port answers on it too. Throwing counts as not yet.
   */
  ready: (ports: P, child: ChildProcess) => Promise<boolean>;
  /** Epoch ms by which the child must be ready (across every attempt). */
  deadline: number;
  /** Starts at most (default 5). */
  attempts?: number;
  /** Before each start after the first: e.g. clear a data directory the failed start left. */
  beforeRetry?: () => void;
  /** How often ready is asked (default 100 ms). */
  pollMs?: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Starts `what` until it holds its ports (see the file header); an error names the child's last output. */
export async function startOwnPorts<P>(
  what: string,
  opts: OwnPortsOptions<P>,
): Promise<{ ports: P; child: ChildProcess }> {
  const attempts = opts.attempts ?? 5;
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) {
      opts.beforeRetry?.();
      // A restart on the same port waits for a passing holder (another worker's freePort probe) to let go.
      await sleep(100 * attempt);
    }
    const ports = await opts.ports();
    const child = opts.start(ports);
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-16_384);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const closed = new Promise<void>((r) => child.once('close', () => r()));
    const exited = () => child.exitCode !== null || child.signalCode !== null;
    let lastError = '';
    while (!exited()) {
      try {
        if ((await opts.ready(ports, child)) && !exited()) return { ports, child };
      } catch (err) {
        lastError = err instanceof Error ? err.message : String(err);
      }
      if (Date.now() > opts.deadline) {
        child.kill('SIGKILL');
        throw new Error(`${what} did not become ready in time${lastError ? ` (${lastError})` : ''}\n${output}`);
      }
      await sleep(opts.pollMs ?? 100);
    }
    await closed;
    const clash = BIND_CLASH.test(output);
    if (clash && attempt < attempts && Date.now() < opts.deadline) continue;
    throw new Error(
      `${what} exited (${child.exitCode ?? child.signalCode})${clash ? `: its port was taken, ${attempt} times` : ''}\n${output}`,
    );
  }
}
