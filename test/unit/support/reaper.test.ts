// Processes a test starts die with its worker: a stand-in worker registers a child, is killed with SIGKILL (no exit
// hook of any kind runs), and the child goes too. A child that exits by itself is forgotten, so that its pid, once
// reused, is never killed; and after a clean stop the watcher kills nothing it was told of.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { startReaper } from '../../../src/controlplane/reaper.ts';
import { until } from '../../support/until.ts';

const REAPER = join(import.meta.dirname, '..', '..', 'support', 'reaper.ts');

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** A Node process that registers `sleep 300` and a short-lived child with the reaper, prints their pids, and waits. */
function standInWorker() {
  const script = `
    import { spawn } from 'node:child_process';
    const { reapWithWorker } = await import(${JSON.stringify(REAPER)});
    const long = spawn('sleep', ['300'], { stdio: 'ignore' });
    const short = spawn('true', [], { stdio: 'ignore' });
    reapWithWorker(long);
    reapWithWorker(short);
    short.once('exit', () => console.log(JSON.stringify({ long: long.pid, short: short.pid })));
    setInterval(() => {}, 1000);`;
  const worker = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const pids = new Promise<{ long: number; short: number }>((resolve) => {
    let out = '';
    worker.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(JSON.parse(out) as { long: number; short: number });
    });
  });
  return { worker, pids };
}

describe('reapWithWorker', () => {
  test('a child outlives nothing: SIGKILL the worker and the reaper kills what it registered', async () => {
    const { worker, pids } = standInWorker();
    let long: number | undefined;
    try {
      const started = await pids;
      long = started.long;
      const dir = join(tmpdir(), `byok-reap-${worker.pid}`);
      // The short child exited and was forgotten; the long one is registered and running.
      await until('the short child forgotten', () => !existsSync(join(dir, `${started.short}.pid`)), 10_000);
      expect(readdirSync(dir)).toEqual([`${long}.pid`]);
      expect(alive(long)).toBe(true);
      worker.kill('SIGKILL');
      await until('the registered child killed after its worker', () => !alive(started.long), 15_000);
      await until('the reaper cleaned up', () => !existsSync(dir), 5_000);
    } finally {
      // Whatever failed above, nothing this test started outlives it.
      worker.kill('SIGKILL');
      if (long !== undefined && alive(long)) process.kill(long, 'SIGKILL');
    }
  });
});

describe('startReaper', () => {
  test('a clean stop kills nothing: the pids it lists may be gone and taken by others', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'byok-reaper-test-'));
    const bystander = spawn('sleep', ['300'], { stdio: 'ignore' });
    try {
      writeFileSync(join(dir, 'server.pid'), String(bystander.pid));
      startReaper(dir, { removeDir: true });
      writeFileSync(join(dir, 'stopped'), '');
      await until('the watcher removed the directory', () => !existsSync(dir), 10_000);
      expect(alive(bystander.pid!)).toBe(true);
    } finally {
      bystander.kill('SIGKILL');
    }
  });
});
