// A detached watcher that outlives the process that started it: the servers a process starts (etcd, kube-apiserver,
// redis-server, a test's gateway) die with it even when it dies by SIGKILL or runs out of memory, which run no exit
// listener (and a Jest test file's `exit` listeners never run: it gets a copy of `process`). The owner lists what to
// kill as `<dir>/*.pid` files, each holding a pid. A clean stop writes `<dir>/stopped`: the watcher then kills
// nothing (those pids are gone, and one may already be another process's) and only removes the directory if asked.
import { type ChildProcess, spawn } from 'node:child_process';

export interface ReaperOptions {
  /** Seconds between SIGTERM and SIGKILL; 0 sends SIGKILL at once. */
  graceSeconds?: number;
  /** Remove `dir` once done (after a clean stop too). */
  removeDir?: boolean;
}

/** Starts the watcher of `dir` for this process; kill() it to end the watch without reaping. */
export function startReaper(dir: string, opts: ReaperOptions = {}): ChildProcess {
  const grace = Math.max(0, Math.floor(opts.graceSeconds ?? 0));
  const script = `
    owner=$2; grace=$3; remove=$4
    while kill -0 "$owner" 2>/dev/null && [ ! -f "$1/stopped" ]; do sleep 1; done
    if [ ! -f "$1/stopped" ]; then
      pids=$(cat "$1"/*.pid 2>/dev/null)
      if [ -n "$pids" ]; then
        if [ "$grace" -gt 0 ]; then kill $pids 2>/dev/null; sleep "$grace"; fi
        kill -9 $pids 2>/dev/null
      fi
    fi
    if [ "$remove" = 1 ]; then rm -rf "$1"; fi`;
  const args = ['-c', script, 'reaper', dir, String(process.pid), String(grace), opts.removeDir ? '1' : '0'];
  const reaper = spawn('bash', args, { detached: true, stdio: 'ignore' });
  reaper.unref();
  return reaper;
}
