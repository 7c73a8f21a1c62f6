// `npm run dev` as a test starts it: the real CLI in its own process, its connection file in a directory of its own
// (BYOK_DEV_DIR), ready once the file exists and the banner has printed. Used by the dev and docs-snippet suites.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DevConnection } from '../../src/cli/dev.ts';

export const repoRoot = join(import.meta.dirname, '..', '..');

export interface DevStack {
  child: ChildProcess;
  devDir: string;
  connection: DevConnection;
  /** Everything the process printed so far. */
  output(): string;
}

export async function waitFor<T>(what: string, fn: () => T | undefined | Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startDevStack(prefix: string, timeoutMs = 60_000): Promise<DevStack> {
  const devDir = mkdtempSync(join(tmpdir(), prefix));
  const child = spawn(process.execPath, [join(repoRoot, 'src/cli/main.ts'), 'dev'], {
    cwd: repoRoot,
    env: { ...process.env, BYOK_DEV_DIR: devDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const file = join(devDir, 'connection.json');
  const connection = await waitFor('the dev stack', () => (existsSync(file) && output.includes('Ctrl-C') ? (JSON.parse(readFileSync(file, 'utf8')) as DevConnection) : undefined), timeoutMs);
  return { child, devDir, connection, output: () => output };
}
