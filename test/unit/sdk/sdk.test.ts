import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { sealAccount, shardBundles } from '../../../src/bundle/bundle.ts';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { type ShardSet, shardAccounts } from '../../../src/compiler/shard.ts';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import type { Keyring } from '../../../src/contract/envelope.ts';
import { INDEX_KEY } from '../../../src/contract/routing.ts';
import { createCatalog } from '../../../src/domain/catalog.ts';
import type { CompiledAccount } from '../../../src/domain/compiled.ts';
import {
  BundleError,
  CredentialPayloadError,
  loadRoutingConfig,
  planFor,
  type RoutingConfig,
  RoutingConfigError,
  watchRoutingConfig,
} from '../../../src/sdk/index.ts';
import { apiKey, hashOf, sizedSnapshot, snapshot, workspace } from '../../support/fixtures/compiler.ts';
import { moduleReferences } from '../../support/module-imports.ts';
import { until } from '../../support/until.ts';

const root = mkdtempSync(join(tmpdir(), 'byok-sdk-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function configFiles(set: ShardSet): Record<string, Buffer | string> {
  const files: Record<string, Buffer | string> = { [INDEX_KEY]: canonicalJson(set.index) };
  for (const s of set.shards) files[s.key] = s.data;
  return files;
}

const payloadOf = (ns: string, i: number) => `sk-${ns}-payload-${i}`;
const snaps = (version: number) =>
  Array.from({ length: 12 }, (_, a) => {
    const snap = sizedSnapshot(`acct-${a}`, 40, (i) => payloadOf(`acct-${a}`, i));
    for (const c of snap.credentials) c.resource.spec.disabled = version % 2 === 1 && a === 0;
    return snap;
  });

function compiled(version: number): { accounts: CompiledAccount[]; set: ShardSet } {
  const accounts = snaps(version).map(compileAccount);
  return { accounts, set: shardAccounts(accounts, { targetBytes: 8 * 1024 }) };
}

describe('loadRoutingConfig', () => {
  it('loads a plain directory and verifies checksums', () => {
    const dir = join(root, 'plain');
    const { accounts, set } = compiled(0);
    kubeletWrite(dir, configFiles(set));
    const cfg = loadRoutingConfig(dir);
    expect(cfg.version).toBe(set.index.version);
    expect(cfg.accounts.size).toBe(accounts.length);
    expect(cfg.accounts.get('acct-3')).toEqual(accounts[3]);
    const cred = accounts[3]!.credentials[0]!;
    expect(cfg.credential(cred.id)?.account.namespace).toBe('acct-3');
    expect(cfg.apiKey(hashOf('acct-3/key-a'))?.account.namespace).toBe('acct-3');
  });

  it('reports checksum mismatches, missing files and corrupt indexes', () => {
    const { set } = compiled(0);
    const code = (files: Record<string, Buffer | string>) => {
      const dir = mkdtempSync(join(root, 'bad-'));
      kubeletWrite(dir, files);
      try {
        loadRoutingConfig(dir);
      } catch (err) {
        return err instanceof RoutingConfigError ? err.code : 'other';
      }
      return 'ok';
    };
    const good = configFiles(set);
    const first = set.shards[0]!;
    const flipped = Buffer.from(first.data);
    flipped[flipped.length - 1]! ^= 0xff;
    expect(code(good)).toBe('ok');
    expect(code({ ...good, [first.key]: flipped })).toBe('checksum');
    const { [first.key]: _dropped, ...missing } = good;
    expect(code(missing)).toBe('incomplete');
    expect(code({ ...good, [INDEX_KEY]: '{"format":' })).toBe('corrupt');
    const tampered = JSON.parse(good[INDEX_KEY] as string);
    tampered.buckets += 1;
    expect(code({ ...good, [INDEX_KEY]: JSON.stringify(tampered) })).toBe('checksum');
    expect(code({})).toBe('missing');
  });
});

describe('a hash the config carries in two accounts', () => {
  it('resolves to neither, whichever namespace sorts first, and a case respelling is the same hash', () => {
    const catalog = createCatalog([]);
    const request = (h: string) => ({
      model: 'openai/gpt-1',
      apiKeyHash: h,
      userId: null,
      baseAddress: 'global' as const,
      isVideoGeneration: false,
    });
    const shared = hashOf('copied');
    for (const [first, second] of [
      ['aaa-attacker', 'mmm-victim'],
      ['zzz-attacker', 'mmm-victim'],
    ] as const) {
      const dir = join(root, `contested-${first}`);
      const victim = compileAccount(
        snapshot(second, {
          workspaces: [workspace(second, 'main', { default: true })],
          apiKeys: [apiKey(second, 'k', { hash: shared }), apiKey(second, 'own')],
        }),
      );
      // What a stale or racing shard could still carry: the copy, its hash respelled in upper case.
      const attacker = compileAccount(
        snapshot(first, {
          workspaces: [workspace(first, 'main', { default: true })],
          apiKeys: [apiKey(first, 'k', { hash: shared.toUpperCase() }), apiKey(first, 'own')],
        }),
      );
      kubeletWrite(dir, configFiles(shardAccounts([attacker, victim], { targetBytes: 8 * 1024 })));
      const cfg = loadRoutingConfig(dir);
      expect(cfg.apiKey(shared)).toBeUndefined();
      expect(cfg.apiKeyContested(shared)).toBe(true);
      expect(planFor(cfg, request(shared), catalog)).toEqual({ ok: false, reason: 'api-key-contested' });
      // The other keys of both accounts are untouched.
      for (const ns of [first, second]) expect(cfg.apiKey(hashOf(`${ns}/own`))?.account.namespace).toBe(ns);
      expect(cfg.apiKeyContested(hashOf(`${second}/own`))).toBe(false);
    }
  });
});

describe('watchRoutingConfig (kubelet atomic swap)', () => {
  const configDir = join(root, 'config');
  const bundleDir = join(root, 'bundle');
  const keyDir = join(root, 'keys');
  const keyring: Keyring = { active: 'k1', keys: new Map([['k1', randomBytes(32)]]) };

  function writeBundles(ring: Keyring, accounts: CompiledAccount[]) {
    const sealed = accounts.map((a) =>
      sealAccount(
        ring,
        a.namespace,
        a.credentials.map((c) => ({ id: c.id, payload: payloadOf(a.namespace, Number(c.name.slice(5))) })),
      ),
    );
    const files: Record<string, string> = {};
    for (const o of shardBundles(sealed).objects) Object.assign(files, o.entries());
    kubeletWrite(bundleDir, files);
  }
  const writeKeys = (ring: Keyring) => kubeletWrite(keyDir, { active: ring.active, ...Object.fromEntries(ring.keys) });

  it('loads, reloads on swap, keeps the last good config, decrypts on use and plans', async () => {
    const v0 = compiled(0);
    kubeletWrite(configDir, configFiles(v0.set));
    writeKeys(keyring);
    writeBundles(keyring, v0.accounts);

    const reloads: RoutingConfig[] = [];
    const errors: Error[] = [];
    const w = watchRoutingConfig({
      configDir,
      bundleDir,
      keyDir,
      pollMs: 25,
      onReload: (c) => reloads.push(c),
      onError: (e) => errors.push(e),
    });
    try {
      expect(w.current()?.version).toBe(v0.set.index.version);
      const cred = v0.accounts[2]!.credentials[5]!;
      expect(w.decryptCredential(cred.id)).toBe(payloadOf('acct-2', Number(cred.name.slice(5))));
      expect(() => w.decryptCredential('00000000-0000-5000-8000-000000000000')).toThrow(BundleError);
      // The parsed payload: decrypted and parsed once per mounted envelope, the same object on every call.
      const parsed = w.credentialPayload(cred.id);
      expect(JSON.stringify(parsed)).toContain(payloadOf('acct-2', Number(cred.name.slice(5))));
      expect(w.credentialPayload(cred.id)).toBe(parsed);
      // Not a payload of the provider asked for: a typed error that names the credential, never the payload.
      const wrong = (() => {
        try {
          w.credentialPayload(cred.id, { provider: 'google-vertex' });
        } catch (err) {
          return err as Error;
        }
        throw new Error('parsed');
      })();
      expect(wrong).toBeInstanceOf(CredentialPayloadError);
      expect(wrong.message).not.toContain('payload-');
      expect(() => w.credentialPayload('00000000-0000-5000-8000-000000000000')).toThrow(BundleError);

      // The planner gets the account found by the API key hash.
      const catalog = createCatalog([
        {
          model: 'openai/gpt-1',
          endpoints: [
            {
              id: 'openai',
              provider: 'openai',
              region: null,
              zdr: false,
              dataCollection: false,
              pricing: { kind: 'per-request', usdPerRequest: 0.01 },
            },
          ],
        },
      ]);
      const outcome = w.planFor(
        {
          model: 'openai/gpt-1',
          apiKeyHash: hashOf('acct-2/key-b'),
          userId: null,
          baseAddress: 'global',
          isVideoGeneration: false,
        },
        catalog,
      );
      expect(outcome.ok).toBe(true);
      if (outcome.ok) {
        expect(outcome.account.namespace).toBe('acct-2');
        expect(outcome.plan.attempts.some((a) => a.kind === 'credential')).toBe(true);
      }
      expect(
        w.planFor(
          {
            model: 'openai/gpt-1',
            apiKeyHash: hashOf('nobody'),
            userId: null,
            baseAddress: 'global',
            isVideoGeneration: false,
          },
          catalog,
        ),
      ).toEqual({ ok: false, reason: 'unknown-api-key' });

      // A new generation is picked up.
      const v1 = compiled(1);
      expect(v1.set.index.version).not.toBe(v0.set.index.version);
      kubeletWrite(configDir, configFiles(v1.set));
      await until(
        'w.current()?.version === v1.set.index.version',
        () => w.current()?.version === v1.set.index.version,
        3000,
        10,
      );
      expect(reloads.at(-1)?.version).toBe(v1.set.index.version);
      expect(
        w
          .current()!
          .accounts.get('acct-0')!
          .credentials.every((c) => c.disabled),
      ).toBe(true);

      // A corrupt generation (checksum mismatch) is reported and the last good config stays.
      const v2 = compiled(2);
      const corrupt = configFiles(v2.set);
      const victim = v2.set.shards[1]!;
      corrupt[victim.key] = Buffer.concat([victim.data, Buffer.from('x')]);
      kubeletWrite(configDir, corrupt);
      await until('one error reported', () => errors.length === 1, 3000, 10);
      expect((errors[0] as RoutingConfigError).code).toBe('checksum');
      expect(w.current()?.version).toBe(v1.set.index.version);

      // An incomplete generation too.
      const incomplete = configFiles(v2.set);
      delete incomplete[victim.key];
      kubeletWrite(configDir, incomplete);
      await until('two errors reported', () => errors.length === 2, 3000, 10);
      expect((errors[1] as RoutingConfigError).code).toBe('incomplete');
      expect(w.current()?.version).toBe(v1.set.index.version);

      // Then a good one replaces it.
      kubeletWrite(configDir, configFiles(v2.set));
      await until(
        'w.current()?.version === v2.set.index.version',
        () => w.current()?.version === v2.set.index.version,
        3000,
        10,
      );

      // Key rotation: bundles sealed under a new key open once the key volume has it; old key kept.
      const rotated: Keyring = { active: 'k2', keys: new Map([...keyring.keys, ['k2', randomBytes(32)]]) };
      writeKeys(rotated);
      writeBundles(rotated, v2.accounts);
      expect(w.decryptCredential(cred.id)).toBe(payloadOf('acct-2', Number(cred.name.slice(5))));
      expect(JSON.parse(readFileSync(join(bundleDir, cred.id), 'utf8')).kid).toBe('k2');
    } finally {
      w.close();
    }
  });
});

describe('watchRoutingConfig: a half-projected config is pending, not rejected', () => {
  // kubelet refreshes each ConfigMap of the projected volume from its own cache, so a swap can show a new index with
  // an old or missing shard for a sync period: byok_gateway_reloads_total{result="pending"}, not an alert.
  it('reports a checksum/incomplete generation as pending, then rejected once it is still refused after pendingPolls', async () => {
    const dir = join(root, 'pending');
    const keys = join(root, 'pending-keys');
    kubeletWrite(keys, { active: 'k1', k1: randomBytes(32) });
    const v0 = compiled(0);
    kubeletWrite(dir, configFiles(v0.set));
    const seen: [string, string][] = [];
    const w = watchRoutingConfig({
      configDir: dir,
      bundleDir: join(root, 'pending-bundles'),
      keyDir: keys,
      pollMs: 10,
      pendingPolls: 20,
      onError: (e, failure) => seen.push([(e as RoutingConfigError).code, failure]),
    });
    try {
      // The race: the new index is projected with a shard of the previous swap.
      const v1 = compiled(1);
      const raced = configFiles(v1.set);
      const stale = v0.set.shards.find((s) => s.key === v1.set.shards[0]!.key);
      raced[v1.set.shards[0]!.key] =
        stale && !stale.data.equals(v1.set.shards[0]!.data) ? stale.data : Buffer.from('old');
      kubeletWrite(dir, raced);
      await until('a first update', () => seen.length >= 1, 3000, 10);
      expect(seen[0]).toEqual(['checksum', 'pending']);
      // kubelet's next sync completes it: loaded, nothing rejected.
      kubeletWrite(dir, configFiles(v1.set));
      await until(
        'w.current()?.version === v1.set.index.version',
        () => w.current()?.version === v1.set.index.version,
        3000,
        10,
      );
      expect(seen.map(([, f]) => f)).toEqual(['pending']);

      // The same fault that never heals: pending first, then rejected once (not once per poll).
      const v2 = compiled(2);
      const broken = configFiles(v2.set);
      delete broken[v2.set.shards[1]!.key];
      kubeletWrite(dir, broken);
      await until('three updates', () => seen.length >= 3, 5000, 10);
      expect(seen.slice(1)).toEqual([
        ['incomplete', 'pending'],
        ['incomplete', 'rejected'],
      ]);
      await new Promise((r) => setTimeout(r, 100));
      expect(seen).toHaveLength(3);
      expect(w.current()?.version).toBe(v1.set.index.version);

      // A corrupt index is never a projection race: rejected at once.
      kubeletWrite(dir, { ...configFiles(v2.set), [INDEX_KEY]: '{"format":' });
      await until('four updates', () => seen.length >= 4, 3000, 10);
      expect(seen[3]).toEqual(['corrupt', 'rejected']);
    } finally {
      w.close();
    }
  });
});

const HEAVY = ['@kubernetes/', 'fastify', '@fastify/', 'prom-client', 'pino', 'yaml'];

describe('SDK dependency rule', () => {
  it('imports only the domain core, node built-ins and the node-only wire formats of src/contract/', () => {
    const allowed = (p: string) =>
      p.startsWith('src/domain/') || p.startsWith('src/sdk/') || p.startsWith('src/contract/');
    const seen = new Set<string>();
    const visit = (file: string) => {
      const rel = relative(process.cwd(), file);
      if (seen.has(rel)) return;
      seen.add(rel);
      expect({ file: rel, allowed: allowed(rel) }).toEqual({ file: rel, allowed: true });
      // Read with the architecture test's parser: either quote style, side-effect and dynamic imports all count.
      for (const { spec } of moduleReferences(readFileSync(file, 'utf8'), file)) {
        if (spec.startsWith('.')) visit(resolve(dirname(file), spec));
        // The SDK's own files use built-ins only; whatever the domain core uses, nothing heavy may appear.
        else if (!rel.startsWith('src/domain/'))
          expect({ file: rel, spec, ok: spec.startsWith('node:') }).toEqual({ file: rel, spec, ok: true });
        else
          expect({ file: rel, spec, ok: !HEAVY.some((h) => spec.startsWith(h)) }).toEqual({
            file: rel,
            spec,
            ok: true,
          });
      }
    };
    visit(resolve('src/sdk/index.ts'));
    expect(seen.size).toBeGreaterThan(5);
  });
});
