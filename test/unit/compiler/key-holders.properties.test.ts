// Cross-account identities, the key-hash part. What it attacks: the one decision of which account a
// gateway-key hash selects. Many accounts whose namespaces are prefixes and near-spellings of each other ("a",
// "a-b", "ab", "b-a"...), whose keys share names, share hashes from a pool of four, spell a hash in upper or mixed
// case (as if a door had let it through), tie on creationTimestamp, are disabled or expired, and name hashes in
// credential filters; read in two random orders and once reversed. Through the election (keysNotHolding), the
// compiler, the shards and the SDK's load from files: no hash resolves to an account that does not hold it as its
// own (its oldest key naming it), every key that does not hold its hash says Conflicting (naming no other account),
// a filter resolves only a hash its account holds, and nothing depends on the read order. Then the same accounts
// compiled each alone, as shards racing would: a hash two accounts carry resolves to neither (contested, 403).
// Against the code before the election (seed 41: no election in the compiler, first namespace wins in the SDK) both
// failed on their first case. Shrunk: accounts "a" and "b" with one key each naming one hash, a's the older and
// expired: the hash resolved to "b" (a copy of an expired key's hash takes it over); and "a0" and "a" carrying
// one hash: it resolved to "a", the namespace that sorts first.

import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { electKeyHolder, keysNotHolding, previousHashesNotHeld } from '../../../src/compiler/elect.ts';
import { type ShardSet, shardAccounts } from '../../../src/compiler/shard.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import { INDEX_KEY } from '../../../src/contract/routing.ts';
import { hashesNamed, normalizeKeyHash } from '../../../src/domain/api-keys.ts';
import { createCatalog } from '../../../src/domain/catalog.ts';
import type { CompiledAccount } from '../../../src/domain/compiled.ts';
import { evaluateApiKey, hashHeldBy } from '../../../src/operator/reconcile/gateway-api-key.ts';
import type { GatewayAPIKey } from '../../../src/schema/generated/types.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { validateManifest } from '../../../src/schema/validators.ts';
import { loadRoutingConfig, planFor, type RoutingConfig } from '../../../src/sdk/index.ts';
import { credential, hashOf, NOW, snapshot, workspace } from '../../support/fixtures/compiler.ts';
import { expectEqual, expectIs, propertyRuns } from '../../support/properties.ts';

const SEED = 41;
// Each case writes a config to disk and loads it as a pod does: 1,000 per property keep the file near 8 s of CPU.
const RUNS = 1000;
const POOL = ['k0', 'k1', 'k2', 'k3'].map(hashOf);
const OTHER_ACCOUNT =
  "this hash is already held by another account's key (the key that named a hash first holds it): this key is not compiled and the gateway never routes it to this account";

// Each case writes a routing config and loads it back. On tmpfs when the machine has one: rewriting a file in place
// on ext4 waits for the disk, which made those writes most of this file's time.
const root = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'byok-key-holders-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface KeyGen {
  name: string;
  pool: number;
  spelling: 'lower' | 'upper' | 'mixed';
  createdSec: number;
  uid: number;
  disabled: boolean;
  expired: boolean;
  filtered: boolean;
}
interface AccountGen {
  namespace: string;
  keys: KeyGen[];
}

// Namespaces that are prefixes, suffixes and near-spellings of each other, so an order by name or prefix shows.
const namespace = fc.constantFrom(
  'a',
  'ab',
  'a-b',
  'b',
  'b-a',
  'ba',
  'team',
  'team-a',
  'team-a-b',
  'teama',
  'z',
  'a0',
  '0a',
);
const key = fc.record({
  name: fc.constantFrom('k', 'key', 'key-a', 'a', 'main'),
  pool: fc.integer({ min: 0, max: POOL.length - 1 }),
  spelling: fc.constantFrom('lower', 'lower', 'lower', 'upper', 'mixed'),
  createdSec: fc.integer({ min: 0, max: 3 }),
  uid: fc.integer({ min: 0, max: 5 }),
  disabled: fc.boolean(),
  expired: fc.constantFrom(false, false, false, true),
  filtered: fc.boolean(),
});
const accounts = fc.uniqueArray(
  fc.record({ namespace, keys: fc.uniqueArray(key, { minLength: 1, maxLength: 4, selector: (k) => k.name }) }),
  { minLength: 1, maxLength: 6, selector: (a) => a.namespace },
);
const order = fc.array(fc.nat(), { minLength: 40, maxLength: 40 });

const spell = (hash: string, s: KeyGen['spelling']) =>
  s === 'lower'
    ? hash
    : s === 'upper'
      ? hash.toUpperCase()
      : [...hash].map((c, i) => (i % 2 ? c.toUpperCase() : c)).join('');

function keyObject(ns: string, k: KeyGen): GatewayAPIKey {
  return {
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: {
      name: k.name,
      namespace: ns,
      uid: `uid-${k.uid}`,
      creationTimestamp: new Date(Date.UTC(2025, 5, 1, 0, 0, k.createdSec)).toISOString() as unknown as Date,
    },
    spec: {
      hash: spell(POOL[k.pool]!, k.spelling),
      ...(k.disabled ? { disabled: true } : {}),
      ...(k.expired ? { expiresAt: '2025-01-01T00:00:00Z' } : {}),
    },
  };
}

/** `items` in the order the random ranks give (stable), as an informer or a folder might hand them over. */
const shuffled = <T>(items: readonly T[], ranks: readonly number[]): T[] =>
  items
    .map((x, i) => [x, ranks[i % ranks.length]! + i / 1000] as const)
    .sort((p, q) => p[1] - q[1])
    .map(([x]) => x);

interface Outcome {
  set: ShardSet;
  compiled: Map<string, CompiledAccount>;
  conflicting: Map<string, Set<string>>;
}

/** What a gateway pod loads from `set` (a small bucket size, so accounts land in different shards). */
function load(set: ShardSet, dir: string): RoutingConfig {
  for (const s of set.shards) writeFileSync(join(dir, s.key), s.data);
  writeFileSync(join(dir, INDEX_KEY), canonicalJson(set.index));
  return loadRoutingConfig(dir);
}

/** The operator's pipeline without I/O: elect over every account's keys, compile each account, shard. */
function run(gen: readonly AccountGen[], ranks: readonly number[], elect = true): Outcome {
  const byNs = new Map(
    shuffled(gen, ranks).map((a) => [
      a.namespace,
      shuffled(a.keys, [...ranks].reverse()).map((k) => keyObject(a.namespace, k)),
    ]),
  );
  const all = [...byNs.values()].flat();
  const holdersOf = (h: string) => all.filter((k) => normalizeKeyHash(k.spec.hash) === h);
  const compiled = new Map<string, CompiledAccount>();
  const conflicting = new Map<string, Set<string>>();
  for (const [ns, keys] of byNs) {
    const notHolding = elect ? keysNotHolding(keys, holdersOf) : new Set<string>();
    conflicting.set(ns, notHolding);
    const filters = gen
      .find((a) => a.namespace === ns)!
      .keys.filter((k) => k.filtered)
      .map((k) => POOL[k.pool]!);
    const credentials = filters.length > 0 ? [credential(ns, 'filtered', { allowedApiKeyHashes: filters })] : [];
    compiled.set(
      ns,
      compileAccount(
        snapshot(ns, {
          workspaces: [workspace(ns, 'main', { default: true })],
          apiKeys: keys,
          conflictingApiKeys: notHolding,
          credentials,
        }),
      ),
    );
  }
  return { set: shardAccounts([...compiled.values()], { targetBytes: 4 * 1024 }), compiled, conflicting };
}

const catalog = createCatalog([]);
// The schema's verdict per spelling (twelve of them): its CEL rules are too slow to run for every key of every case.
const doorVerdicts = new Map<string, boolean>();
const refusedAtTheDoor = (k: GatewayAPIKey): boolean => {
  let refused = doorVerdicts.get(k.spec.hash);
  if (refused === undefined) doorVerdicts.set(k.spec.hash, (refused = (validateManifest(k)?.problems.length ?? 0) > 0));
  return refused;
};

describe('a gateway-key hash selects exactly the account that holds it', () => {
  test(`through election, compile and load, in any read order (${RUNS} cases)`, () => {
    const dir = join(root, 'elected');
    mkdirSync(dir);
    fc.assert(
      fc.property(accounts, order, order, (gen, r1, r2) => {
        const first = run(gen, r1);
        const config = load(first.set, dir);
        const all = [...first.compiled.keys()].flatMap((ns) =>
          gen.find((a) => a.namespace === ns)!.keys.map((k) => keyObject(ns, k)),
        );
        const holders = (h: string) => all.filter((k) => normalizeKeyHash(k.spec.hash) === h);
        for (const h of POOL) {
          const winner = electKeyHolder(h, holders(h)).winner;
          const found = config.apiKey(h);
          // Never contested: the election compiles a hash into one account at most.
          expectIs(config.apiKeyContested(h), false);
          if (found) {
            // It resolves only to the account of the hash's holder, and only through that very key.
            expectIs(found.account.namespace, winner?.metadata.namespace);
            expectIs(found.key.hash, h);
            const plan = planFor(
              config,
              { model: 'openai/gpt-4o', apiKeyHash: h, userId: null, baseAddress: 'global', isVideoGeneration: false },
              catalog,
              NOW,
            );
            expectIs(plan.ok && plan.account.namespace, winner?.metadata.namespace);
          } else if (winner && !winner.spec.disabled && !winner.spec.expiresAt) {
            throw new Error(`the holder of ${h} is live but its hash resolves to nothing`);
          }
        }
        for (const k of all) {
          const ns = k.metadata.namespace!;
          const holder = electKeyHolder(normalizeKeyHash(k.spec.hash), holders(normalizeKeyHash(k.spec.hash))).winner!;
          const held = hashHeldBy(k, holder);
          // A key that does not hold its hash is left out of its account and says so; another account goes unnamed.
          expectIs(first.conflicting.get(ns)!.has(k.metadata.name!), held !== undefined);
          if (held) {
            const { ready } = evaluateApiKey({
              namespace: ns,
              spec: k.spec,
              now: NOW.getTime(),
              workspaceExists: true,
              accountExists: true,
              hasDefaultWorkspace: true,
              missingGuardrails: [],
              hashHeldBy: held,
            });
            expectIs(ready.reason, 'Conflicting');
            if (!held.sameAccount) expectIs(ready.message, OTHER_ACCOUNT);
            else expectIs(holder.metadata.namespace, ns);
          }
          // An upper- or mixed-case respelling is refused at the door (the CRD schema), as it is normalized inside.
          if (k.spec.hash !== normalizeKeyHash(k.spec.hash)) expectIs(refusedAtTheDoor(k), true);
        }
        // A credential filter resolves only hashes its own account holds.
        for (const [, account] of first.compiled) {
          const own = new Set(account.apiKeys.map((k) => k.hash));
          for (const c of account.credentials) for (const h of c.allowedApiKeyHashes ?? []) expectIs(own.has(h), true);
        }
        // Nothing depends on the order accounts and keys were read: the same accounts, the same shard bytes (the
        // index version is the digest of every shard), so every pod loads the same config.
        for (const other of [
          run(gen, r2),
          run(
            gen,
            [...r1].map((x) => -x),
          ),
        ]) {
          expectIs(other.set.index.version, first.set.index.version);
          for (const [ns, c] of first.compiled) expectEqual(other.compiled.get(ns), c);
          for (const [ns, names] of first.conflicting) expectEqual(other.conflicting.get(ns), names);
        }
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test(`a config that carries a hash in two accounts (shards racing) resolves it to neither (${RUNS} cases)`, () => {
    const dir = join(root, 'raced');
    mkdirSync(dir);
    fc.assert(
      fc.property(accounts, order, (gen, ranks) => {
        const { set, compiled } = run(gen, ranks, false);
        const config = load(set, dir);
        for (const h of POOL) {
          const carriers = [...compiled.values()]
            .filter((a) => a.apiKeys.some((k) => normalizeKeyHash(k.hash) === h))
            .map((a) => a.namespace);
          const found = config.apiKey(h);
          if (carriers.length > 1) {
            expect(found).toBeUndefined();
            expectIs(config.apiKeyContested(h), true);
            expectEqual(
              planFor(
                config,
                {
                  model: 'openai/gpt-4o',
                  apiKeyHash: h,
                  userId: null,
                  baseAddress: 'global',
                  isVideoGeneration: false,
                },
                catalog,
                NOW,
              ),
              { ok: false, reason: 'api-key-contested' },
            );
          } else {
            expectIs(config.apiKeyContested(h), false);
            expectIs(found?.account.namespace, carriers[0]);
          }
        }
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});

describe('a rotated key holds its previous hash by its age', () => {
  const key = (ns: string, name: string, created: string, spec: Record<string, unknown>) =>
    ({
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'GatewayAPIKey',
      metadata: { namespace: ns, name, uid: `${ns}-${name}`, creationTimestamp: created },
      spec,
    }) as unknown as GatewayAPIKey;
  const OLD = 'a'.repeat(64);
  const NEW = 'b'.repeat(64);

  test('a copy of the old hash made after the key is Conflicting; a copy made before holds it and the rotated key does not compile it', () => {
    const rotated = key('team-a', 'app', '2026-01-01T00:00:00Z', {
      hash: NEW,
      previousHash: OLD,
      previousHashExpiresAt: '2026-01-02T00:00:00Z',
    });
    const later = key('team-b', 'copy', '2026-01-01T00:05:00Z', { hash: OLD });
    const earlier = key('team-c', 'first', '2025-12-31T00:00:00Z', { hash: OLD });
    const naming = (all: GatewayAPIKey[]) => (h: string) => all.filter((k) => hashesNamed(k).includes(h));
    expectEqual(keysNotHolding([later], naming([rotated, later])), new Set(['copy']));
    expectEqual(previousHashesNotHeld([rotated], naming([rotated, later])), new Set());
    expectEqual(previousHashesNotHeld([rotated], naming([rotated, earlier])), new Set(['app']));
    expectEqual(keysNotHolding([rotated], naming([rotated, earlier])), new Set());
  });
});
