// Delivery marks of GatewayAPIKeys (src/operator/compile/accounts.ts, apiKeyMarks). The generator attacks the
// version rule with sequences of compile runs over a small pool of key hashes: keys appear, vanish, come back,
// toggle between live (a compiled entry) and not live (disabled, expired, conflicting: no entry), and change one
// field of their entry at a time or back again. The oracle: a key's version moves exactly when its compiled entry
// (or its absence) differs from the run before, and `since` is the run of that last move; a key not named has no mark.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import type { CompiledApiKey } from '../../../../src/domain/compiled.ts';
import { apiKeyMarks, type RoutingMark } from '../../../../src/operator/compile/accounts.ts';
import { expectEqual, expectIs, propertyRuns } from '../../../support/properties.ts';

const SEED = 42_0201;
const RUNS = 3000;
const HASHES = ['a', 'b', 'c', 'd'].map((c) => c.repeat(64));

/** One key in one run: absent, present but not routed, or routed with one of a few entries. */
const keyState = fc.oneof(
  fc.constant<'absent'>('absent'),
  fc.constant<'off'>('off'),
  fc.record({
    workspace: fc.constantFrom('w1', 'w2'),
    guardrail: fc.constantFrom(null, 'g1'),
    expiresAt: fc.constantFrom(null, '2030-01-01T00:00:00Z'),
    owner: fc.constantFrom(undefined, 'u1'),
  }),
);
const run = fc.array(keyState, { minLength: HASHES.length, maxLength: HASHES.length });

const entryOf = (
  hash: string,
  s: { workspace: string; guardrail: string | null; expiresAt: string | null; owner: string | undefined },
): CompiledApiKey => ({
  hash,
  workspaceId: s.workspace,
  guardrailId: s.guardrail,
  expiresAt: s.expiresAt,
  ...(s.owner !== undefined ? { owner: s.owner } : {}),
});

describe('GatewayAPIKey delivery marks', () => {
  test('the version moves exactly when the compiled entry (or its absence) changes; since is the run of that change', () => {
    fc.assert(
      fc.property(fc.array(run, { minLength: 1, maxLength: 12 }), (runs) => {
        let previous: ReadonlyMap<string, RoutingMark> | undefined;
        const lastState = new Map<string, string>();
        const lastMove = new Map<string, number>();
        for (const [i, states] of runs.entries()) {
          const runNo = i + 1;
          const named = HASHES.filter((_, k) => states[k] !== 'absent');
          const compiled = HASHES.flatMap((h, k) => {
            const s = states[k]!;
            return typeof s === 'object' ? [entryOf(h, s)] : [];
          });
          const marks = apiKeyMarks(compiled, named, previous, runNo);
          expectEqual([...marks.keys()].sort(), [...named].sort());
          for (const [k, h] of HASHES.entries()) {
            const s = states[k]!;
            if (s === 'absent') {
              // A key that is gone is forgotten: when it comes back it is new.
              lastState.delete(h);
              continue;
            }
            const state = JSON.stringify(s);
            const before = previous?.get(h);
            const mark = marks.get(h)!;
            if (lastState.get(h) === state) {
              expectIs(mark, before);
            } else {
              lastMove.set(h, runNo);
              if (before) expect(mark.digest).not.toBe(before.digest);
            }
            expectIs(mark.since, lastMove.get(h));
            lastState.set(h, state);
          }
          // Two different hashes never share a version, routed or not.
          expectIs(new Set([...marks.values()].map((m) => m.digest)).size, marks.size);
          previous = marks;
        }
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});
