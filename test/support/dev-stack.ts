// `npm run dev` as a test starts it: the real CLI in its own process, its connection file in a directory of its own
// (BYOK_DEV_DIR), ready once the file exists and the banner has printed. Used by the dev and docs-snippet suites.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { DevConnection } from '../../src/cli/dev.ts';
import { reapWithWorker } from './reaper.ts';
import { until } from './until.ts';

export const repoRoot = join(import.meta.dirname, '..', '..');

export interface DevStack {
  child: ChildProcess;
  devDir: string;
  connection: DevConnection;
  /** Everything the process printed so far. */
  output(): string;
}

// A whole control plane, operator, API servers and gateway start here: on a shared 2-core machine under load that
// has taken over a minute, so the wait is long and a timeout says how far the stack got.
export async function startDevStack(prefix: string, timeoutMs = 150_000): Promise<DevStack> {
  const devDir = mkdtempSync(join(tmpdir(), prefix));
  const child = spawn(process.execPath, [join(repoRoot, 'src/cli/main.ts'), 'dev'], {
    cwd: repoRoot,
    env: { ...process.env, BYOK_DEV_DIR: devDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  reapWithWorker(child);
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const file = join(devDir, 'connection.json');
  const connection = await until(
    'the dev stack',
    () =>
      existsSync(file) && output.includes('Ctrl-C')
        ? (JSON.parse(readFileSync(file, 'utf8')) as DevConnection)
        : undefined,
    timeoutMs,
    100,
  ).catch((err: unknown) => {
    child.kill('SIGTERM');
    throw new Error(`${(err as Error).message}; its output ended with:\n${output.slice(-2000)}`);
  });
  return { child, devDir, connection, output: () => output };
}

/**
 * The environment of a reader's shell beside the dev stack, as the docs tell them to set it up: the stack's kubectl and
 * helm, this node and the repository's bins on PATH, a HOME of its own, and none of the caller's KUBECONFIG.
 */
export function readerEnv(stack: Pick<DevStack, 'devDir' | 'connection'>, home: string): NodeJS.ProcessEnv {
  const { KUBECONFIG: _ignored, ...rest } = process.env;
  return {
    ...rest,
    HOME: home,
    BYOK_DEV_DIR: stack.devDir,
    PATH: [
      stack.connection.binDir,
      dirname(process.execPath),
      join(repoRoot, 'node_modules', '.bin'),
      process.env.PATH ?? '',
    ].join(':'),
  };
}

/** Ctrl-C, as a reader stops it; SIGKILL if it has not exited after 15 s. */
export async function stopDevStack(child: ChildProcess | undefined): Promise<void> {
  // Undefined when the stack never started (its start failed and was reported).
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGINT');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000).unref())]);
  if (child.exitCode === null) child.kill('SIGKILL');
}
