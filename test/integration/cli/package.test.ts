// The CLI as a user installs it: `npm pack` -> `npm install -g <tarball>` into a throwaway prefix -> the
// `byok-operator` bin (compiled JavaScript in dist/, no TypeScript stripping inside node_modules).
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';

const run = promisify(execFile);
const repoRoot = join(import.meta.dirname, '..', '..', '..');
const work = mkdtempSync(join(tmpdir(), 'byok-pack-'));
const prefix = join(work, 'prefix');
// The bin's `#!/usr/bin/env node` must find the same Node the tests run on.
const env = {
  ...process.env,
  PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
  npm_config_loglevel: 'error',
};
const bin = join(prefix, 'bin', 'byok-operator');

describe('packed CLI', () => {
  let tarball: string;
  beforeAll(async () => {
    const packed = await run('npm', ['pack', '--json', '--pack-destination', work], {
      cwd: repoRoot,
      env,
      encoding: 'utf8',
      maxBuffer: 16 << 20,
    });
    const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as {
      filename: string;
      files: { path: string }[];
    }[];
    tarball = join(work, info!.filename);
    expect(info!.files.map((f) => f.path)).toContain('dist/cli/main.js');
    expect(info!.files.some((f) => f.path.startsWith('src/'))).toBe(false);
    await run('npm', ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball], {
      env,
      encoding: 'utf8',
    });
  }, 240_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  test('byok-operator --help and --version run from the global install', async () => {
    const help = await run(bin, ['--help'], { env, encoding: 'utf8' });
    expect(help.stdout).toMatch(/^usage: byok-operator <command>/);
    const version = await run(bin, ['--version'], { env, encoding: 'utf8' });
    expect(version.stdout.trim()).toBe(
      (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version,
    );
  });

  test('byok-operator validate checks manifests with the shipped schemas', async () => {
    const ok = await run(bin, ['validate', join(repoRoot, 'config', 'samples')], { env, encoding: 'utf8' });
    expect(ok.stdout).toMatch(/[1-9]\d* byok.gateway.dev resources checked, 0 problems/);
    const bad = join(work, 'bad.yaml');
    writeFileSync(
      bad,
      'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: { name: x, namespace: a }\nspec: { provider: not-a-provider, secretRef: { name: s } }\n',
    );
    await expect(run(bin, ['validate', bad], { env, encoding: 'utf8' })).rejects.toMatchObject({ code: 1 });
  });
});
