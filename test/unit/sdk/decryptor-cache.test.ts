// The decryptor's generation check interval: envelopes of a cached generation are reused, a re-sealed payload in a new
// generation is seen once the interval passes, and a missing envelope or a stale one forces a fresh look at once.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { sealAccount, shardBundles } from '../../../src/bundle/bundle.ts';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { shardAccounts } from '../../../src/compiler/shard.ts';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import type { Keyring } from '../../../src/contract/envelope.ts';
import { INDEX_KEY } from '../../../src/contract/routing.ts';
import { createCredentialDecryptor, loadRoutingConfig } from '../../../src/sdk/index.ts';
import { sizedSnapshot } from '../../support/fixtures/compiler.ts';

const root = mkdtempSync(join(tmpdir(), 'byok-sdk-cache-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('createCredentialDecryptor with generationCheckMs', () => {
  it('reuses the cached generation within the interval and looks again when an envelope is missing or stale', () => {
    const account = compileAccount(sizedSnapshot('acct', 3, (i) => `sk-v1-${i}`));
    const set = shardAccounts([account]);
    const configDir = join(root, 'config');
    const bundleDir = join(root, 'bundles');
    const keyDir = join(root, 'keys');
    kubeletWrite(configDir, {
      [INDEX_KEY]: canonicalJson(set.index),
      ...Object.fromEntries(set.shards.map((s) => [s.key, s.data])),
    });
    const ring: Keyring = { active: 'k1', keys: new Map([['k1', randomBytes(32)]]) };
    kubeletWrite(keyDir, { active: ring.active, ...Object.fromEntries(ring.keys) });
    const writeBundles = (prefix: string, count: number) => {
      const sealed = sealAccount(
        ring,
        account.namespace,
        account.credentials.slice(0, count).map((c, i) => ({ id: c.id, payload: `${prefix}-${i}` })),
      );
      const files: Record<string, string> = {};
      for (const o of shardBundles([sealed]).objects) Object.assign(files, o.entries());
      kubeletWrite(bundleDir, files);
    };
    const config = loadRoutingConfig(configDir);
    const [c0, , c2] = account.credentials;
    writeBundles('sk-v1', 2);
    let now = 1_000;
    const realNow = Date.now;
    Date.now = () => now;
    try {
      const d = createCredentialDecryptor({ bundleDir, keyDir, generationCheckMs: 100 });
      expect(d.decrypt(config, c0!.id)).toBe('sk-v1-0');
      writeBundles('sk-v2', 3);
      // Within the interval the cached generation answers, except for an envelope it lacks: that forces a fresh look.
      expect(d.decrypt(config, c0!.id)).toBe('sk-v1-0');
      expect(d.decrypt(config, c2!.id)).toBe('sk-v2-2');
      now += 150;
      expect(d.decrypt(config, c0!.id)).toBe('sk-v2-0');
    } finally {
      Date.now = realNow;
    }
  });
});
