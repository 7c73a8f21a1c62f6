// ByokGatewayReloadsFailing paged on the normal race of a projected routing config being swapped (a new
// index with a shard of the previous swap: kubelet refreshes each ConfigMap of the volume from its own cache). The
// gateway counts that as byok_gateway_reloads_total{result="pending"} and logs it at info; a corrupt config stays
// result="error" with the warning the runbook names.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { CATALOG_PATH } from '../../../src/cli/catalog.ts';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { type ShardSet, shardAccounts } from '../../../src/compiler/shard.ts';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import { INDEX_KEY } from '../../../src/contract/routing.ts';
import { type RunningGateway, startGateway } from '../../../src/gateway/server.ts';
import { sizedSnapshot } from '../../support/fixtures/compiler.ts';
import { until } from '../../support/until.ts';

const root = mkdtempSync(join(tmpdir(), 'byok-reload-metrics-'));
const configDir = join(root, 'routing');
const logs: { level: number; msg: string; code?: string }[] = [];
let gw: RunningGateway;

function files(set: ShardSet): Record<string, Buffer | string> {
  const out: Record<string, Buffer | string> = { [INDEX_KEY]: canonicalJson(set.index) };
  for (const s of set.shards) out[s.key] = s.data;
  return out;
}
const compiled = (disabled: boolean) =>
  shardAccounts(
    Array.from({ length: 6 }, (_, a) => {
      const snap = sizedSnapshot(`acct-${a}`, 20, (i) => `sk-acct-${a}-${i}`);
      for (const c of snap.credentials) c.resource.spec.disabled = disabled && a === 0;
      return compileAccount(snap);
    }),
    { targetBytes: 4 * 1024 },
  );
const reloads = async () => {
  const text = await (await fetch(`${gw.opsUrl}/metrics`)).text();
  const count = (result: string) =>
    Number(new RegExp(`byok_gateway_reloads_total\\{what="routing",result="${result}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
  return { ok: count('ok'), pending: count('pending'), error: count('error') };
};
beforeAll(async () => {
  kubeletWrite(configDir, files(compiled(false)));
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
    configDir,
    bundleDir: join(root, 'bundles'),
    keyDir: join(root, 'key'),
    catalogFile: CATALOG_PATH,
    host: '127.0.0.1',
    port: 0,
    pollMs: 20,
    logger: pino({ level: 'info' }, sink),
  });
});
afterAll(async () => {
  await gw?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('gateway reload results', () => {
  test('a half-projected swap counts as pending (info), then loads; nothing counted as error', async () => {
    const before = await reloads();
    const next = compiled(true);
    const raced = files(next);
    raced[next.shards[0]!.key] = Buffer.from('a shard of the previous swap');
    kubeletWrite(configDir, raced);
    await until('pending', async () => (await reloads()).pending > before.pending);
    kubeletWrite(configDir, files(next));
    await until('loaded', async () => (await reloads()).ok > before.ok);
    expect((await reloads()).error).toBe(before.error);
    expect(logs.find((l) => l.msg.startsWith('routing config not fully projected yet'))).toMatchObject({
      level: 30,
      code: 'checksum',
    });
    expect(logs.filter((l) => l.level >= 40 && l.msg.startsWith('routing config'))).toEqual([]);
  });

  test('a corrupt routing config is an error, with the warning the runbook quotes', async () => {
    const before = await reloads();
    kubeletWrite(configDir, { ...files(compiled(false)), [INDEX_KEY]: '{"format":' });
    await until('error', async () => (await reloads()).error > before.error);
    expect(logs.find((l) => l.msg === 'routing config rejected; keeping the last good one')).toMatchObject({
      level: 40,
      code: 'corrupt',
    });
  });
});
