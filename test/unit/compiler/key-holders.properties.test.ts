// Cross-account identities (issue 41 §5, the key-hash part). What it attacks: the one decision of which account a
// gateway-key hash selects. Many accounts whose namespaces are prefixes and near-spellings of each other ("a",
// "a-b", "ab", "b-a"...), whose keys share names, share hashes from a pool of four, spell a hash in upper or mixed
// case (as if a door had let it through), tie on creationTimestamp, are disabled or expired, and name hashes in
// credential filters; read in two random orders and once reversed. Through the election (keysNotHolding), the
// compiler, the shards and the SDK's load from files: no hash resolves to an account that does not hold it as its
// own (its oldest key naming it), every key that does not hold its hash says Conflicting (naming no other account),
// a filter resolves only a hash its account holds, and nothing depends on the read order. Then the same accounts
// compiled each alone, as shards racing would: a hash two accounts carry resolves to neither (contested, 403).
// Against the code before the election (seed 41, first-namespace-wins in the SDK and no election in the compiler),
// it failed at once; see the report of the keyhash branch for the shrunk case.
import { afterAll, describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { electKeyHolder, keysNotHolding } from '../../../src/compiler/elect.ts';
import { shardAccounts } from '../../../src/compiler/shard.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import { INDEX_KEY } from '../../../src/contract/routing.ts';
import { normalizeKeyHash } from '../../../src/domain/api-keys.ts';
import type { CompiledAccount } from '../../../src/domain/model.ts';
import { evaluateApiKey, hashHeldBy } from '../../../src/operator/reconcile/gateway-api-key.ts';
import type { GatewayAPIKey } from '../../../src/schema/generated/types.ts';
import { validateManifest } from '../../../src/schema/validators.ts';
import { loadRoutingConfig, planFor, type RoutingConfig } from '../../../src/sdk/index.ts';
import { createCatalog } from '../../../src/domain/catalog.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { credential, hashOf, NOW, snapshot, workspace } from './fixtures.ts';

const SEED = 41;
const RUNS = 2000;
const POOL = ['k0', 'k1', 'k2', 'k3'].map(hashOf);
const OTHER_ACCOUNT = "this hash is already held by another account's key (the oldest key holds a hash): this key is not compiled and the gateway never routes it to this account";

const root = mkdtempSync(join(tmpdir(), 'byok-key-holders-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface KeyGen { name: string; pool: number; spelling: 'lower' | 'upper' | 'mixed'; createdSec: number; uid: number; disabled: boolean; expired: boolean; filtered: boolean }
interface AccountGen { namespace: string; keys: KeyGen[] }

// Namespaces that are prefixes, suffixes and near-spellings of each other, so an order by name or prefix shows.
const namespace = fc.constantFrom('a', 'ab', 'a-b', 'b', 'b-a', 'ba', 'team', 'team-a', 'team-a-b', 'teama', 'z', 'a0', '0a');
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
const accounts = fc.uniqueArray(fc.record({ namespace, keys: fc.uniqueArray(key, { minLength: 1, maxLength: 4, selector: (k) => k.name }) }), { minLength: 1, maxLength: 6, selector: (a) => a.namespace });
const order = fc.array(fc.nat(), { minLength: 40, maxLength: 40 });

const spell = (hash: string, s: KeyGen['spelling']) => (s === 'lower' ? hash : s === 'upper' ? hash.toUpperCase() : [...hash].map((c, i) => (i % 2 ? c.toUpperCase() : c)).join(''));

function keyObject(ns: string, k: KeyGen): GatewayAPIKey {
  return {
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: { name: k.name, namespace: ns, uid: `uid-${k.uid}`, creationTimestamp: new Date(Date.UTC(2025, 5, 1, 0, 0, k.createdSec)).toISOString() as unknown as Date },
    spec: { hash: spell(POOL[k.pool]!, k.spelling), ...(k.disabled ? { disabled: true } : {}), ...(k.expired ? { expiresAt: '2025-01-01T00:00:00Z' } : {}) },
  };
}

/** `items` in the order the random ranks give (stable), as an informer or a folder might hand them over. */
const shuffled = <T>(items: readonly T[], ranks: readonly number[]): T[] => items.map((x, i) => [x, ranks[i % ranks.length]! + i / 1000] as const).sort((p, q) => p[1] - q[1]).map(([x]) => x);

interface Outcome { config: RoutingConfig; compiled: Map<string, CompiledAccount>; conflicting: Map<string, Set<string>> }

function load(compiled: CompiledAccount[], dir: string): RoutingConfig {
  const set = shardAccounts(compiled, { targetBytes: 4 * 1024 });
  for (const s of set.shards) writeFileSync(join(dir, s.key), s.data);
  writeFileSync(join(dir, INDEX_KEY), canonicalJson(set.index));
  return loadRoutingConfig(dir);
}

/** The operator's pipeline without I/O: elect over every account's keys, compile each account, shard, load. */
function run(gen: readonly AccountGen[], ranks: readonly number[], dir: string, elect = true): Outcome {
  const byNs = new Map(shuffled(gen, ranks).map((a) => [a.namespace, shuffled(a.keys, [...ranks].reverse()).map((k) => keyObject(a.namespace, k))]));
  const all = [...byNs.values()].flat();
  const holdersOf = (h: string) => all.filter((k) => normalizeKeyHash(k.spec.hash) === h);
  const compiled = new Map<string, CompiledAccount>();
  const conflicting = new Map<string, Set<string>>();
  for (const [ns, keys] of byNs) {
    const notHolding = elect ? keysNotHolding(keys, holdersOf) : new Set<string>();
    conflicting.set(ns, notHolding);
    const filters = gen.find((a) => a.namespace === ns)!.keys.filter((k) => k.filtered).map((k) => POOL[k.pool]!);
    const credentials = filters.length > 0 ? [credential(ns, 'filtered', { allowedApiKeyHashes: filters })] : [];
    compiled.set(ns, compileAccount(snapshot(ns, { workspaces: [workspace(ns, 'main', { default: true })], apiKeys: keys, conflictingApiKeys: notHolding, credentials })));
  }
  return { config: load([...compiled.values()], dir), compiled, conflicting };
}

/** hash -> the namespace it resolves to, 'contested', or absent. */
function resolution(config: RoutingConfig): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of POOL) {
    const found = config.apiKey(h);
    if (found) out[h] = found.account.namespace;
    else if (config.apiKeyContested(h)) out[h] = 'contested';
  }
  return out;
}

const catalog = createCatalog([]);

describe('a gateway-key hash selects exactly the account that holds it', () => {
  test(`through election, compile and load, in any read order (${RUNS} cases)`, () => {
    const dirs = [join(root, 'one'), join(root, 'two'), join(root, 'three')];
    for (const d of dirs) mkdirSync(d);
    fc.assert(
      fc.property(accounts, order, order, (gen, r1, r2) => {
        const first = run(gen, r1, dirs[0]!);
        const all = [...first.compiled.keys()].flatMap((ns) => gen.find((a) => a.namespace === ns)!.keys.map((k) => keyObject(ns, k)));
        const holders = (h: string) => all.filter((k) => normalizeKeyHash(k.spec.hash) === h);
        for (const h of POOL) {
          const winner = electKeyHolder(holders(h)).winner;
          const found = first.config.apiKey(h);
          // Never contested: the election compiles a hash into one account at most.
          expect(first.config.apiKeyContested(h)).toBe(false);
          if (found) {
            // It resolves only to the account of the hash's holder, and only through that very key.
            expect(found.account.namespace).toBe(winner?.metadata.namespace);
            expect(found.key.hash).toBe(h);
            const plan = planFor(first.config, { model: 'openai/gpt-4o', apiKeyHash: h, userId: null, baseAddress: 'global', isVideoGeneration: false }, catalog, NOW);
            expect(plan.ok && plan.account.namespace).toBe(winner?.metadata.namespace);
          } else if (winner && !winner.spec.disabled && !winner.spec.expiresAt) {
            throw new Error(`the holder of ${h} is live but its hash resolves to nothing`);
          }
        }
        for (const k of all) {
          const ns = k.metadata.namespace!;
          const holder = electKeyHolder(holders(normalizeKeyHash(k.spec.hash))).winner!;
          const held = hashHeldBy(k, holder);
          // A key that does not hold its hash is left out of its account and says so; another account goes unnamed.
          expect(first.conflicting.get(ns)!.has(k.metadata.name!)).toBe(held !== undefined);
          if (held) {
            const { ready } = evaluateApiKey({ namespace: ns, spec: k.spec, now: NOW.getTime(), workspaceExists: true, hasDefaultWorkspace: true, missingGuardrails: [], hashHeldBy: held });
            expect(ready.reason).toBe('Conflicting');
            if (!held.sameAccount) expect(ready.message).toBe(OTHER_ACCOUNT);
            else expect(holder.metadata.namespace).toBe(ns);
          }
          // An upper- or mixed-case respelling is refused at the door (the CRD schema), as it is normalized inside.
          if (k.spec.hash !== normalizeKeyHash(k.spec.hash)) expect(validateManifest(k)?.problems.length).toBeGreaterThan(0);
        }
        // A credential filter resolves only hashes its own account holds.
        for (const [, account] of first.compiled) {
          const own = new Set(account.apiKeys.map((k) => k.hash));
          for (const c of account.credentials) for (const h of c.allowedApiKeyHashes ?? []) expect(own.has(h)).toBe(true);
        }
        // Nothing depends on the order accounts and keys were read.
        const second = run(gen, r2, dirs[1]!);
        const reversed = run(gen, [...r1].map((x) => -x), dirs[2]!);
        for (const other of [second, reversed]) {
          expect(resolution(other.config)).toEqual(resolution(first.config));
          expect(other.config.version).toBe(first.config.version);
          for (const [ns, c] of first.compiled) expect(other.compiled.get(ns)).toEqual(c);
        }
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  test(`a config that carries a hash in two accounts (shards racing) resolves it to neither (${RUNS} cases)`, () => {
    const dir = join(root, 'raced');
    mkdirSync(dir);
    fc.assert(
      fc.property(accounts, order, (gen, ranks) => {
        const { config, compiled } = run(gen, ranks, dir, false);
        for (const h of POOL) {
          const carriers = [...compiled.values()].filter((a) => a.apiKeys.some((k) => normalizeKeyHash(k.hash) === h)).map((a) => a.namespace);
          const found = config.apiKey(h);
          if (carriers.length > 1) {
            expect(found).toBeUndefined();
            expect(config.apiKeyContested(h)).toBe(true);
            expect(planFor(config, { model: 'openai/gpt-4o', apiKeyHash: h, userId: null, baseAddress: 'global', isVideoGeneration: false }, catalog, NOW)).toEqual({ ok: false, reason: 'api-key-contested' });
          } else {
            expect(config.apiKeyContested(h)).toBe(false);
            expect(found?.account.namespace).toBe(carriers[0]);
          }
        }
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

