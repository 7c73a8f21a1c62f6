import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import {
  type BundlePart,
  bundlesFromLayout,
  layoutBundles,
  sealAccount,
  shardBundles,
  splitLayoutBucket,
} from '../../../src/bundle/bundle.ts';
import {
  BundleError,
  type Keyring,
  keyringFromEntries,
  openEnvelope,
  parseEnvelope,
  sealPayload,
} from '../../../src/contract/envelope.ts';

const ring = (active: string, ...ids: string[]): Keyring => ({
  active,
  keys: new Map(ids.map((id) => [id, randomBytes(32)])),
});
const ID = '0b8f3c1e-5d2a-5f4e-9c7b-1a2b3c4d5e6f';

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof BundleError ? err.code : 'other';
  }
  return undefined;
}

describe('bundle envelopes', () => {
  it('round-trips and never contains the plaintext', () => {
    const k = ring('k1', 'k1');
    const payload = 'sk-CANARY-0123456789abcdef';
    const env = sealPayload(k, 'acme', ID, payload);
    expect(JSON.stringify(env)).not.toContain('CANARY');
    expect(env).toMatchObject({ v: 1, alg: 'A256GCM', kid: 'k1', ns: 'acme', id: ID });
    expect(openEnvelope(k.keys, parseEnvelope(JSON.stringify(env)), { namespace: 'acme', credentialId: ID })).toBe(
      payload,
    );
  });

  it('is deterministic per (key, namespace, id, payload) and differs otherwise', () => {
    const k = ring('k1', 'k1');
    const a = sealPayload(k, 'acme', ID, 'p1');
    expect(sealPayload(k, 'acme', ID, 'p1')).toEqual(a);
    expect(sealPayload(k, 'acme', ID, 'p2').iv).not.toBe(a.iv);
    expect(sealPayload(k, 'other', ID, 'p1').iv).not.toBe(a.iv);
  });

  it('binds namespace and credential id (AAD) and detects tampering', () => {
    const k = ring('k1', 'k1');
    const env = sealPayload(k, 'acme', ID, 'secret');
    expect(code(() => openEnvelope(k.keys, env, { namespace: 'evil', credentialId: ID }))).toBe('auth-failed');
    // Rewriting the claimed ns/id too still fails: the AAD no longer matches the tag.
    expect(code(() => openEnvelope(k.keys, { ...env, ns: 'evil' }, { namespace: 'evil', credentialId: ID }))).toBe(
      'auth-failed',
    );
    const ct = Buffer.from(env.ct, 'base64');
    ct[0]! ^= 1;
    expect(
      code(() => openEnvelope(k.keys, { ...env, ct: ct.toString('base64') }, { namespace: 'acme', credentialId: ID })),
    ).toBe('auth-failed');
    expect(code(() => parseEnvelope('{"v":2}'))).toBe('bad-envelope');
  });

  it('rotation: the new key seals, old envelopes still open, unknown key ids are reported', () => {
    const old = ring('k1', 'k1');
    const envOld = sealPayload(old, 'acme', ID, 'old');
    const rotated: Keyring = { active: 'k2', keys: new Map([...old.keys, ['k2', randomBytes(32)]]) };
    const envNew = sealPayload(rotated, 'acme', ID, 'new');
    expect(envNew.kid).toBe('k2');
    expect(openEnvelope(rotated.keys, envOld, { namespace: 'acme', credentialId: ID })).toBe('old');
    expect(openEnvelope(rotated.keys, envNew, { namespace: 'acme', credentialId: ID })).toBe('new');
    expect(code(() => openEnvelope(old.keys, envNew, { namespace: 'acme', credentialId: ID }))).toBe('unknown-key');
  });

  it('parses a key Secret: active + 32-byte keys', () => {
    const key = randomBytes(32);
    const r = keyringFromEntries(
      new Map([
        ['active', Buffer.from('k2\n')],
        ['k2', key],
        ['k1', randomBytes(32)],
        ['junk', Buffer.from('short')],
      ]),
    );
    expect(r.active).toBe('k2');
    expect([...r.keys.keys()].sort()).toEqual(['k1', 'k2']);
    expect(
      code(() =>
        keyringFromEntries(
          new Map([
            ['active', Buffer.from('k9')],
            ['k1', key],
          ]),
        ),
      ),
    ).toBe('bad-keyring');
    expect(code(() => keyringFromEntries(new Map([['k1', key]])))).toBe('bad-keyring');
  });
});

describe('sealed accounts', () => {
  it('keep each envelope compactly and give back exactly the JSON of the sealed envelope', () => {
    const k = ring('k-2026.1_x', 'k-2026.1_x');
    // Payloads of many lengths (ciphertext lengths), unicode, and characters JSON escapes in the namespace and id.
    const creds = [
      { id: ID, payload: 'sk-CANARY-abc' },
      { id: 'id-"quoted"\\', payload: 'x'.repeat(1000) },
      { id: 'id-é-☃', payload: '{"type":"service_account","private_key":"-----BEGIN…"}' },
      { id: 'id-empty', payload: '' },
    ];
    const account = sealAccount(k, 'ns-\u2028-"q"', creds);
    for (const entry of account.entries) {
      const input = creds.find((c) => c.id === entry.id)!;
      const expected = JSON.stringify(sealPayload(k, 'ns-\u2028-"q"', input.id, input.payload));
      expect(entry.envelope).toBe(expected);
      expect(entry.length).toBe(expected.length);
      expect(
        openEnvelope(k.keys, parseEnvelope(entry.envelope), { namespace: 'ns-\u2028-"q"', credentialId: input.id }),
      ).toBe(input.payload);
      // What stays in memory is not the envelope text, and never the plaintext.
      expect(Object.values(entry).some((v) => v === expected)).toBe(false);
      expect(JSON.stringify(Object.values(entry))).not.toContain('CANARY');
    }
    expect(account.entries.map((e) => e.id)).toEqual(creds.map((c) => c.id).sort());
    expect(account.bytes).toBe(account.entries.reduce((s, e) => s + e.length + e.id.length, 0));
  });
});

describe('bundle sharding', () => {
  it('places accounts by namespace, splits oversized buckets, stays under the Secret limit', () => {
    const k = ring('k1', 'k1');
    const accounts = Array.from({ length: 40 }, (_, a) =>
      sealAccount(
        k,
        `ns-${a}`,
        Array.from({ length: a === 0 ? 3000 : 20 }, (_, i) => ({
          id: `${String(a).padStart(4, '0')}-${i}`,
          payload: randomBytes(200).toString('hex'),
        })),
      ),
    );
    const { buckets, objects } = shardBundles(accounts);
    expect(buckets).toBeGreaterThan(1);
    for (const o of objects) expect(Math.ceil(o.bytes / 3) * 4).toBeLessThan(768 * 1024);
    expect(objects.filter((o) => o.accounts.includes('ns-0')).length).toBeGreaterThan(1);
    const ids = objects.flatMap((o) => Object.keys(o.entries()));
    expect(ids).toHaveLength(3000 + 39 * 20);
    expect(shardBundles(accounts).objects.map((o) => o.sha256)).toEqual(objects.map((o) => o.sha256));
  });

  it('laid out and split one bucket at a time (as the pipeline does), gives the same objects', () => {
    const k = ring('k1', 'k1');
    const accounts = Array.from({ length: 30 }, (_, a) =>
      sealAccount(
        k,
        `ns-${a}`,
        Array.from({ length: a % 3 === 0 ? 400 : 20 }, (_, i) => ({
          id: `${String(a).padStart(4, '0')}-${i}`,
          payload: `p-${a}-${i}-${'x'.repeat(200)}`,
        })),
      ),
    );
    const opts = { targetBytes: 64 * 1024, maxPartBytes: 96 * 1024 };
    const whole = shardBundles(accounts, opts);
    const cache = new Map<string, BundlePart[]>();
    const layout = layoutBundles(accounts, { ...opts, cache });
    let split = 0;
    for (const member of layout.members) {
      if (member.splitKey === undefined) continue;
      cache.set(member.splitKey, splitLayoutBucket(member, layout));
      split++;
    }
    expect(split).toBeGreaterThan(0);
    const stepwise = bundlesFromLayout(layout, { ...opts, cache });
    expect(stepwise.buckets).toBe(whole.buckets);
    expect(stepwise.objects.map((o) => [o.name, o.sha256, o.bytes, o.accounts, o.entries()])).toEqual(
      whole.objects.map((o) => [o.name, o.sha256, o.bytes, o.accounts, o.entries()]),
    );
    expect(cache.size).toBe(split);
  });

  it('reuses the split of an oversized bucket while its content is unchanged, and drops it when it changes', () => {
    const k = ring('k1', 'k1');
    const seal = (a: number, tag: string) =>
      sealAccount(
        k,
        `ns-${a}`,
        Array.from({ length: a === 0 ? 3000 : 20 }, (_, i) => ({
          id: `${String(a).padStart(4, '0')}-${i}`,
          payload: `${tag}-${a}-${i}-${'p'.repeat(300)}`,
        })),
      );
    const accounts = Array.from({ length: 40 }, (_, a) => seal(a, 'v1'));
    const cache = new Map<string, BundlePart[]>();
    const first = shardBundles(accounts, { cache });
    expect(cache.size).toBeGreaterThan(0);
    const parts = [...cache.values()];
    // Same layout as without a cache, entry for entry.
    const uncached = shardBundles(accounts);
    expect(first.objects.map((o) => [o.name, o.sha256])).toEqual(uncached.objects.map((o) => [o.name, o.sha256]));
    expect(first.objects.map((o) => o.entries())).toEqual(uncached.objects.map((o) => o.entries()));
    // Unchanged content: the very same split is served.
    shardBundles(accounts, { cache });
    expect([...cache.values()]).toEqual(parts);
    expect([...cache.values()].every((p, i) => p === parts[i])).toBe(true);
    // The oversized account changes: its bucket is split again and the old split is evicted.
    accounts[0] = seal(0, 'v2');
    const changed = shardBundles(accounts, { cache });
    expect(cache.size).toBe(parts.length);
    expect([...cache.values()].some((p) => parts.includes(p))).toBe(false);
    expect(changed.objects.map((o) => o.sha256)).toEqual(shardBundles(accounts).objects.map((o) => o.sha256));
    expect(changed.objects.filter((o) => o.accounts.includes('ns-0')).map((o) => o.sha256)).not.toEqual(
      first.objects.filter((o) => o.accounts.includes('ns-0')).map((o) => o.sha256),
    );
  });
});
