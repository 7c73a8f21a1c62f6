// hack/export/fetch-third-party.sh, run as `npm test` runs it, on an empty cache each time: a code host (a loopback
// server laid out as raw.githubusercontent.com, serving the pinned files or a changed one), a local copy
// (BYOK_THIRD_PARTY_DIR, whole or changed), neither, and a cache edited by hand. Every file that lands in the cache
// has its pinned digest; anything else is refused with a message that names the file, and the run stops once.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { thirdPartyDir } from '../../support/third-party.ts';

const repo = join(import.meta.dirname, '..', '..', '..');
const script = join(repo, 'hack', 'export', 'fetch-third-party.sh');
const lock = readFileSync(join(repo, 'hack', 'export', 'third-party.lock'), 'utf8')
  .split('\n')
  .filter((l) => l && !l.startsWith('#'))
  .map((l) => {
    const [file, sha256, repository, commit, path] = l.split(' ') as [string, string, string, string, string];
    return { file, sha256, url: `/${repository}/${commit}/${path}` };
  });

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
const temps: string[] = [];
/** A temp folder, removed after the file. */
const temp = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
};
function fetchThirdParty(env: Record<string, string>): Promise<Run> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('BYOK_THIRD_PARTY_')),
  ) as Record<string, string>;
  return new Promise((resolve) => {
    execFile(
      script,
      { env: { ...clean, BYOK_CACHE_DIR: temp('byok-third-party-cache-'), ...env } },
      (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

describe('hack/export/fetch-third-party.sh', () => {
  // The pinned files, as the suite's own cache holds them (filled from a local copy or the code host).
  let pinned: string;
  let codeHost: Server;
  let baseUrl: string;
  const changed = new Set<string>();
  beforeAll(async () => {
    pinned = thirdPartyDir();
    codeHost = createServer((req, res) => {
      const entry = lock.find((e) => e.url === req.url);
      if (!entry) return void res.writeHead(404).end('404: Not Found');
      const body = readFileSync(join(pinned, entry.file));
      res.writeHead(200).end(changed.has(entry.file) ? Buffer.concat([body, Buffer.from('\n# changed\n')]) : body);
    });
    await new Promise<void>((r) => codeHost.listen(0, '127.0.0.1', r));
    baseUrl = `http://127.0.0.1:${(codeHost.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => codeHost.close(() => r()));
    for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  });

  const sha256Of = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

  test('from the code host at the pinned commits: every file lands in the cache with its pinned digest', async () => {
    const run = await fetchThirdParty({ BYOK_THIRD_PARTY_URL: baseUrl });
    expect(run.code).toBe(0);
    const out = run.stdout.trim().split('\n').at(-1)!;
    for (const e of lock) expect(sha256Of(join(out, e.file))).toBe(e.sha256);
    expect(existsSync(join(out, '.complete'))).toBe(true);
  });

  test('a changed file from the code host is refused, named by its URL, and nothing is cached', async () => {
    changed.add('agentgateway/standalone-config.schema.json');
    try {
      const cache = temp('byok-third-party-cache-');
      const run = await fetchThirdParty({ BYOK_THIRD_PARTY_URL: baseUrl, BYOK_CACHE_DIR: cache });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`refused ${baseUrl}/agentgateway/agentgateway/`);
      expect(run.stderr).toContain('/schema/config.json');
      expect(readdirSync(join(cache, 'export-crds'))).toEqual([]);
    } finally {
      changed.clear();
    }
  });

  test('a local copy comes first; one changed file in it is refused, named', async () => {
    const copy = temp('byok-third-party-copy-');
    cpSync(pinned, copy, { recursive: true });
    // The code host answers nothing: the files can only have come from the copy.
    const fromCopy = await fetchThirdParty({ BYOK_THIRD_PARTY_DIR: copy, BYOK_THIRD_PARTY_URL: `${baseUrl}/nowhere` });
    expect(fromCopy.code).toBe(0);
    writeFileSync(
      join(copy, 'envoy-ai-gateway', 'aigateway.envoyproxy.io_aigatewayroutes.yaml'),
      '# not the pinned file\n',
    );
    const refused = await fetchThirdParty({ BYOK_THIRD_PARTY_DIR: copy, BYOK_THIRD_PARTY_URL: baseUrl });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`refused ${copy}/envoy-ai-gateway/aigateway.envoyproxy.io_aigatewayroutes.yaml`);
  });

  test('neither a code host nor a local copy: one message naming every missing file and how to get them', async () => {
    const run = await fetchThirdParty({ BYOK_THIRD_PARTY_URL: `${baseUrl}/nowhere` });
    expect(run.code).toBe(1);
    expect(run.stderr.match(/\[third-party\]/g)).toHaveLength(1);
    for (const e of lock) expect(run.stderr).toContain(e.file);
    expect(run.stderr).toContain('BYOK_THIRD_PARTY_DIR');
    expect(run.stderr).toContain('raw.githubusercontent.com');
    expect(run.stderr).not.toContain('ENOENT');
  });

  test('a cache edited by hand is not trusted: the next run gets the file again', async () => {
    const cache = temp('byok-third-party-cache-');
    const first = await fetchThirdParty({ BYOK_THIRD_PARTY_URL: baseUrl, BYOK_CACHE_DIR: cache });
    const out = first.stdout.trim().split('\n').at(-1)!;
    const schema = join(out, 'agentgateway', 'standalone-config.schema.json');
    writeFileSync(schema, '{}');
    const second = await fetchThirdParty({ BYOK_THIRD_PARTY_URL: baseUrl, BYOK_CACHE_DIR: cache });
    expect(second.code).toBe(0);
    expect(sha256Of(schema)).toBe(lock.find((e) => e.file === 'agentgateway/standalone-config.schema.json')!.sha256);
  });
});
