// Processes a test starts die with its Jest worker, even when the worker dies mid-file (out of memory, SIGKILL).
// An `exit` listener cannot do this: Jest gives each test file a copy of `process`, and that copy's `exit` listeners
// are never called. One detached watcher per worker kills whatever is still registered once the worker is gone.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Kills `child` when this worker process is gone; forgets it once it exits. */
export function reapWithWorker(child: ChildProcess): void {
  if (child.pid === undefined) return;
  // One directory per worker (module state would be per test file); a file per live child, named by its pid.
  const dir = join(tmpdir(), `byok-reap-${process.pid}`);
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true });
    const script = `
      while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done
      for f in "$1"/*; do [ -e "$f" ] && kill -9 "$(basename "$f")" 2>/dev/null; done
      rm -rf "$1"`;
    spawn('bash', ['-c', script, 'reaper', dir], { detached: true, stdio: 'ignore' }).unref();
  }
  const entry = join(dir, String(child.pid));
  writeFileSync(entry, '');
  child.once('exit', () => rmSync(entry, { force: true }));
}
