// Who holds a gateway-key hash when keys change over time. What it attacks: the claim each key has on a hash, as
// tenants create keys, rotate old keys onto hashes other keys already name, edit and relabel them, and the operator
// records claims late or not at all. Objects pass through the informer's cache transform (the
// operator keeps only the newest write time of managedFields) and are read in two random orders and once reversed.
// Against the election by creationTimestamp (before status.hashClaims) both properties failed at once, shrunk to: key
// A created with h0, key B created with h3, A rotated onto h3 and took it from B. With the cache dropping every
// managedFields time, the first failed, shrunk to: A created with h0 and rotated onto h1, B created with h1 while the
// operator had not yet recorded A's claim, and B took h1 from A.

import { describe, test } from '@jest/globals';
import type { V1ManagedFieldsEntry } from '@kubernetes/client-node';
import fc from 'fast-check';
import { electKeyHolder, keysNotHolding, nextHashClaims } from '../../../src/compiler/elect.ts';
import { hashesNamed } from '../../../src/domain/api-keys.ts';
import { compactForCache, keepingLastWriteTime } from '../../../src/kube/informer.ts';
import type { GatewayAPIKey } from '../../../src/schema/generated/types.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { hashOf } from '../../support/fixtures/compiler.ts';
import { expectEqual, expectIs, propertyRuns } from '../../support/properties.ts';

const SEED = 43;
const RUNS = 2000;
const POOL = ['h0', 'h1', 'h2', 'h3'].map(hashOf);
const T0 = Date.UTC(2026, 0, 1);
// Events are two seconds apart: claims are bounded to the second (creationTimestamp and managedFields carry whole
// seconds), so a claim made two seconds after another always ranks after it.
const STEP_MS = 2000;

type Event =
  | { op: 'create'; key: number; ns: number; hash: number; previous: number | null }
  | { op: 'rotate'; key: number; hash: number }
  | { op: 'edit'; key: number }
  | { op: 'relabel'; key: number }
  | { op: 'record'; key: number };

const event: fc.Arbitrary<Event> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('create' as const),
      key: fc.nat(5),
      ns: fc.nat(2),
      hash: fc.nat(3),
      previous: fc.option(fc.nat(3)),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('rotate' as const), key: fc.nat(5), hash: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('edit' as const), key: fc.nat(5) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('relabel' as const), key: fc.nat(5) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('record' as const), key: fc.nat(5) }) },
);
const history = fc.array(event, { minLength: 1, maxLength: 24 });
const fraction = fc.array(fc.integer({ min: 0, max: 999 }), { minLength: 24, maxLength: 24 });
const order = fc.array(fc.nat(), { minLength: 12, maxLength: 12 });

/** One key as the apiserver stores it, and what the model knows of it: since when it names each hash, truly. */
interface StoredKey {
  object: GatewayAPIKey;
  /** True start of naming each hash; `exact` while no write followed it before the operator recorded the claim. */
  starts: Map<string, { at: number; exact: boolean }>;
}

const iso = (ms: number) => new Date(ms).toISOString();
/** The apiserver writes whole seconds in creationTimestamp and managedFields. */
const seconds = (ms: number) => `${iso(Math.floor(ms / 1000) * 1000).slice(0, 19)}Z`;

/** A write as the apiserver stamps it: the writing manager's managedFields entry gets the time, in seconds. */
function write(k: StoredKey, at: number, manager: string, subresource?: 'status'): void {
  const fields = (k.object.metadata.managedFields ?? []).filter(
    (e) => !(e.manager === manager && e.subresource === subresource),
  );
  const entry: V1ManagedFieldsEntry = {
    manager,
    operation: 'Update',
    time: seconds(at) as unknown as Date,
    ...(subresource ? { subresource } : {}),
  };
  k.object.metadata.managedFields = [...fields, entry];
}

/** Plays `events` against an apiserver-like store (CEL rules included); returns the keys that exist at the end. */
function play(events: readonly Event[], fractions: readonly number[], recordEveryWrite: boolean): StoredKey[] {
  const keys = new Map<number, StoredKey>();
  events.forEach((e, i) => {
    const at = T0 + (i + 1) * STEP_MS + fractions[i % fractions.length]!;
    const k = keys.get(e.key);
    if (e.op === 'create') {
      if (k) return;
      const hash = POOL[e.hash]!;
      const previous = e.previous !== null && e.previous !== e.hash ? POOL[e.previous]! : undefined;
      const object: GatewayAPIKey = {
        apiVersion: API_VERSION,
        kind: 'GatewayAPIKey',
        metadata: {
          namespace: `team-${e.ns}`,
          name: `key-${e.key}`,
          uid: `uid-${(e.key * 7919) % 13}`,
          generation: 1,
          creationTimestamp: seconds(at) as unknown as Date,
        },
        spec: previous ? { hash, previousHash: previous, previousHashExpiresAt: iso(at + 3_600_000) } : { hash },
      };
      const created: StoredKey = { object, starts: new Map() };
      for (const h of hashesNamed(object)) created.starts.set(h, { at, exact: true });
      write(created, at, `tenant-${e.ns}`);
      keys.set(e.key, created);
    } else if (!k) {
      return;
    } else if (e.op === 'record') {
      recordClaims(k, at);
    } else {
      const spec = k.object.spec;
      if (e.op === 'rotate') {
        const hash = POOL[e.hash]!;
        if (hash === spec.hash) return;
        // The CEL rules: hash changes only by moving the old one to previousHash.
        k.object.spec = { ...spec, hash, previousHash: spec.hash, previousHashExpiresAt: iso(at + 3_600_000) };
        const kept = k.starts.get(spec.hash)!;
        // A key rotating back onto its previous hash has named it all along.
        k.starts = new Map([
          [spec.hash, kept],
          [hash, k.starts.get(hash) ?? { at, exact: true }],
        ]);
        k.object.metadata.generation! += 1;
      } else if (e.op === 'edit') {
        k.object.spec = { ...spec, disabled: !spec.disabled };
        k.object.metadata.generation! += 1;
      } else {
        k.object.metadata.labels = { touched: String(at) };
      }
      write(k, at, `tenant-${k.object.metadata.namespace}`);
      // On a rotated key, a claim the operator had not recorded before this write is no longer exact: only the
      // write's time bounds it. A key never rotated keeps its hash from creation.
      if (k.object.spec.previousHash)
        for (const [h, s] of k.starts)
          if (s.at < at && !(k.object.status?.hashClaims ?? []).some((c) => c.hash === h)) s.exact = false;
    }
    if (recordEveryWrite && e.op !== 'record') {
      const written = keys.get(e.key);
      if (written) recordClaims(written, at + 1);
    }
  });
  return [...keys.values()];
}

/** The operator's status write: claims computed from its cached copy, so through the cache transform. */
function recordClaims(k: StoredKey, at: number): void {
  const cached = cache(k.object);
  k.object.status = { ...k.object.status, hashClaims: nextHashClaims(cached, at) };
  write(k, at, 'byok-operator', 'status');
}

const transform = keepingLastWriteTime<GatewayAPIKey>(compactForCache);
const cache = (o: GatewayAPIKey): GatewayAPIKey => transform(structuredClone(o));

const shuffled = <T>(items: readonly T[], ranks: readonly number[]): T[] =>
  items
    .map((x, i) => [x, ranks[i % ranks.length]! + i / 1000] as const)
    .sort((p, q) => p[1] - q[1])
    .map(([x]) => x);

function winners(keys: readonly GatewayAPIKey[], ranks: readonly number[]): Map<string, string> {
  const out = new Map<string, string>();
  const read = shuffled(keys, ranks);
  for (const h of POOL) {
    const { winner } = electKeyHolder(
      h,
      read.filter((k) => hashesNamed(k).includes(h)),
    );
    if (winner) out.set(h, `${winner.metadata.namespace}/${winner.metadata.name}`);
  }
  return out;
}

const id = (k: StoredKey) => `${k.object.metadata.namespace}/${k.object.metadata.name}`;

describe('a hash is held by the key that named it first, whatever the tenants write', () => {
  test(`a key never takes a hash from one that named it earlier and kept its claim (${RUNS} cases)`, () => {
    fc.assert(
      fc.property(history, fraction, order, order, (events, fractions, r1, r2) => {
        const stored = play(events, fractions, false);
        const cached = stored.map((k) => cache(k.object));
        const won = winners(cached, r1);
        // Every read order elects the same holders.
        expectEqual(winners(cached, r2), won);
        expectEqual(
          winners(
            cached,
            [...r1].map((x) => -x),
          ),
          won,
        );
        for (const h of POOL) {
          const namers = stored.filter((k) => k.starts.has(h));
          const holder = won.get(h);
          expectIs(holder === undefined, namers.length === 0);
          const held = namers.find((k) => id(k) === holder);
          for (const earlier of namers) {
            const s = earlier.starts.get(h)!;
            // A key that named h before the holder did, and whose claim no later write blurred, is the holder.
            if (s.exact && held && s.at < held.starts.get(h)!.at) expectIs(id(held), id(earlier));
          }
        }
        // The per-namespace view the reconcilers and the compiler read agrees with the election.
        for (const ns of new Set(cached.map((k) => k.metadata.namespace!))) {
          const own = cached.filter((k) => k.metadata.namespace === ns);
          const notHolding = keysNotHolding(own, (h) => cached.filter((k) => hashesNamed(k).includes(h)));
          for (const k of own)
            expectIs(notHolding.has(k.metadata.name!), won.get(k.spec.hash) !== `${ns}/${k.metadata.name}`);
        }
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test(`with the operator keeping up, the first to name a hash holds it, and recording never moves it (${RUNS} cases)`, () => {
    fc.assert(
      fc.property(history, fraction, order, (events, fractions, ranks) => {
        const stored = play(events, fractions, true);
        const cached = stored.map((k) => cache(k.object));
        const won = winners(cached, ranks);
        for (const h of POOL) {
          const namers = stored.filter((k) => k.starts.has(h));
          if (namers.length === 0) continue;
          const first = namers.reduce((a, b) => (b.starts.get(h)!.at < a.starts.get(h)!.at ? b : a));
          expectIs(won.get(h), id(first));
        }
        // Recording again (a resync) changes no claim and no holder.
        for (const k of stored) recordClaims(k, T0 + 1_000 * STEP_MS);
        expectEqual(
          winners(
            stored.map((k) => cache(k.object)),
            ranks,
          ),
          won,
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});
