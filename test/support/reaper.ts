// Processes a test starts die with its Jest worker, even when the worker dies mid-file (out of memory, SIGKILL): one
// watcher per worker (src/controlplane/reaper.ts) kills whatever is still registered once the worker is gone.
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startReaper } from '../../src/controlplane/reaper.ts';

/** Kills `child` when this worker process is gone; forgets it once it exits. */
export function reapWithWorker(child: ChildProcess): void {
  if (child.pid === undefined) return;
  // One directory per worker (module state would be per test file); a pid file per live child.
  const dir = join(tmpdir(), `byok-reap-${process.pid}`);
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true });
    startReaper(dir, { removeDir: true });
  }
  const entry = join(dir, `${child.pid}.pid`);
  writeFileSync(entry, String(child.pid));
  child.once('exit', () => rmSync(entry, { force: true }));
}
