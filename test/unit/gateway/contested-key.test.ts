// A routing config that carries one gateway-key hash in two accounts (a stale shard while the operator moves the hash
// to its holder, or two operators racing) is never settled by namespace order: the gateway refuses the key on every
// route that takes one, with an answer that says why, and serves the accounts' other keys as before.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { CATALOG_PATH } from '../../../src/cli/catalog.ts';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { shardAccounts } from '../../../src/compiler/shard.ts';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import { INDEX_KEY } from '../../../src/contract/routing.ts';
import { type RunningGateway, startGateway } from '../../../src/gateway/server.ts';
import { apiKey, hashOf, snapshot, workspace } from '../../support/fixtures/compiler.ts';

const root = mkdtempSync(join(tmpdir(), 'byok-contested-key-'));
const COPIED = 'sk-byok-gw-v1-copied-key';
const OWN = 'sk-byok-gw-v1-own-key-of-b';
const CONTESTED = {
  error: {
    code: 403,
    message: 'this gateway API key is claimed by more than one account and is refused until only one holds it',
    metadata: null,
  },
};
const logs: { level: number; msg: string; contestedApiKeys?: number }[] = [];
let gw: RunningGateway;

beforeAll(async () => {
  const acct = (ns: string, keys: ReturnType<typeof apiKey>[]) =>
    compileAccount(snapshot(ns, { workspaces: [workspace(ns, 'main', { default: true })], apiKeys: keys }));
  const set = shardAccounts(
    [
      acct('a-first', [apiKey('a-first', 'copy', { hash: hashOf(COPIED) })]),
      acct('b-holder', [
        apiKey('b-holder', 'k', { hash: hashOf(COPIED) }),
        apiKey('b-holder', 'own', { hash: hashOf(OWN) }),
      ]),
    ],
    { targetBytes: 256 },
  );
  const files: Record<string, Buffer | string> = { [INDEX_KEY]: canonicalJson(set.index) };
  for (const s of set.shards) files[s.key] = s.data;
  kubeletWrite(join(root, 'routing'), files);
  kubeletWrite(join(root, 'key'), { active: 'k1', k1: randomBytes(32) });
  const sink = new Writable({
    write: (chunk: Buffer, _e, done) => (
      logs.push(
        ...chunk
          .toString()
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as (typeof logs)[number]),
      ),
      done()
    ),
  });
  gw = await startGateway({
    configDir: join(root, 'routing'),
    bundleDir: join(root, 'bundles'),
    keyDir: join(root, 'key'),
    catalogFile: CATALOG_PATH,
    host: '127.0.0.1',
    port: 0,
    pollMs: 50,
    logger: pino({ level: 'info' }, sink),
  });
});
afterAll(async () => {
  await gw?.close();
  rmSync(root, { recursive: true, force: true });
});

const call = async (path: string, key: string, body?: object) => {
  const res = await fetch(`${gw.url}${path}`, {
    method: body ? 'POST' : 'GET',
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, json: (await res.json()) as unknown };
};

describe('a key hash two accounts carry', () => {
  test('is refused (403, saying why) on chat completions and the models list, and unknown to generation lookups', async () => {
    expect(
      await call('/api/v1/chat/completions', COPIED, {
        model: 'openai/gpt-4o',
        messages: [{ role: 'user', content: 'hi' }],
      }),
    ).toEqual({ status: 403, json: CONTESTED });
    expect(await call('/v1/models', COPIED)).toEqual({ status: 403, json: CONTESTED });
    expect((await call('/api/v1/generation?id=gen-1', COPIED)).status).toBe(401);
    // The gateway's owner hears of it: a count, naming neither the hash nor the accounts.
    const warned = logs.find(
      (l) => l.level === 40 && l.msg.startsWith('routing config carries gateway-key hashes in more than one account'),
    );
    expect(warned?.contestedApiKeys).toBe(1);
    for (const named of ['a-first', 'b-holder', hashOf(COPIED)]) expect(JSON.stringify(warned)).not.toContain(named);
  });

  test("the accounts' other keys are served as before", async () => {
    const models = await call('/v1/models', OWN);
    expect(models.status).toBe(200);
    expect(models.json).toMatchObject({ object: 'list' });
  });
});
