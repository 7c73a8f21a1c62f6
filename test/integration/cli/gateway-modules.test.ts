// The gateway process loads only what it uses: started as users start it (the CLI's `gateway`
// command), its module graph has no Kubernetes client, no Google auth library and, on the embedded ledger, no Redis
// client. Every package it resolves is recorded by a resolve hook preloaded with --import.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from '@jest/globals';

const root = join(import.meta.dirname, '..', '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'byok-gw-modules-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('the gateway command loads no Kubernetes client, no Google auth library and (embedded ledger) no Redis client', async () => {
  writeFileSync(join(dir, 'catalog.json'), JSON.stringify({ format: 'byok-gateway-catalog/v1', models: [] }));
  const trace = join(dir, 'modules.txt');
  writeFileSync(trace, '');
  const child = spawn(
    process.execPath,
    [
      '--import',
      join(root, 'test', 'support', 'module-trace.mjs'),
      join(root, 'src', 'cli', 'main.ts'),
      'gateway',
      '--config-dir',
      join(dir, 'routing'),
      '--bundle-dir',
      join(dir, 'bundles'),
      '--key-dir',
      join(dir, 'key'),
      '--catalog',
      join(dir, 'catalog.json'),
      '--port',
      '0',
      '--ops-port',
      '0',
    ],
    { env: { ...process.env, MODULE_TRACE_FILE: trace }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${output}`)), 30_000);
      const poll = setInterval(() => {
        if (!output.includes('gateway listening')) return;
        clearInterval(poll);
        clearTimeout(timer);
        resolve();
      }, 50);
    });
  } finally {
    child.kill('SIGTERM');
  }
  const loaded = readFileSync(trace, 'utf8').split('\n').filter(Boolean);
  // The hook works: what the gateway does use is there.
  expect(loaded).toEqual(expect.arrayContaining(['fastify', 'pino', 'prom-client']));
  for (const heavy of [
    '@kubernetes/client-node',
    'google-auth-library',
    'gaxios',
    'ioredis',
    '@peculiar/x509',
    '@marcbachmann/cel-js',
  ])
    expect([heavy, loaded.includes(heavy)]).toEqual([heavy, false]);
});
