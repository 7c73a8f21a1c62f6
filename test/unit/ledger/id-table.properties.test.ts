// The ledger's compact id table against a plain Map<string, number>, under generated sequences of writes and reads
// (fast-check, fixed seed). The ids are chosen to sit on the table's edges: generation ids of a few processes, with
// and without a word after them, and near misses (11 or 13 digits, upper-case digits, a word too long or not all
// letters, a colon in the prefix, ids shorter than the digits). Every read, and the size, must match the model's:
// two ids that differ must never share an entry, and a compact id must never be read as another.

import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { IdTable } from '../../../src/ledger/id-table.ts';
import { expectIs, propertyRuns } from '../../support/properties.ts';

const SEED = 20261129;

const hex = (n: number, digits: number) => n.toString(16).padStart(digits, '0').slice(-digits);
const prefixes = [
  'gen-0b6f3c1e-9a2d-4c7b-8e5f-',
  ':fee',
  'gen-0b6f3c1e-9a2d-4c7b-8e5f-a',
  'gen-71d0aa42-',
  'x:',
  '',
  'f',
];
const words = ['', ':fee', ':abc', ':feex', ':fe', ':abcdefgh', ':abcdefghi', ':fee1', ':FEE', ':', '::fee'];

/** An id near the table's edges: mostly compact ones of few families, so that entries collide if they can. */
const id: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({
        prefix: fc.constantFrom(...prefixes),
        // Small counters, so that generated sequences hit the same ids again.
        n: fc.integer({ min: 0, max: 7 }),
        digits: fc.constantFrom(12, 12, 12, 11, 13),
        upper: fc.boolean(),
        word: fc.constantFrom(...words),
      })
      .map(({ prefix, n, digits, upper, word }) => {
        const d = hex(n * 0x9e3779b1, digits);
        return `${prefix}${upper ? d.toUpperCase() : d}${word}`;
      }),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 16 }) },
  { weight: 1, arbitrary: fc.stringMatching(/^[0-9a-f:]{10,16}$/) },
);

type Op = { kind: 'set'; id: string; value: number } | { kind: 'get'; id: string };
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), id, value: fc.integer({ min: -1, max: 2 ** 40 }) }),
  fc.record({ kind: fc.constant('get' as const), id }),
);

describe('IdTable', () => {
  test('reads back what a Map<string, number> would, for any sequence of ids', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 50, maxLength: 200 }), (ops) => {
        const table = new IdTable();
        const model = new Map<string, number>();
        for (const o of ops) {
          if (o.kind === 'set') {
            table.set(o.id, o.value);
            model.set(o.id, o.value);
          }
          expectIs(table.get(o.id), model.get(o.id));
          expectIs(table.has(o.id), model.has(o.id));
          expectIs(table.size, model.size);
        }
        for (const [k, v] of model) expectIs(table.get(k), v);
      }),
      { seed: SEED, numRuns: propertyRuns(2000) },
    );
  });

  test('runs of a process counter, dense and sparse, read back as a Map<string, number> would', () => {
    // Numbers near one another, so runs of 64 fill past the point where they move into an array, beside numbers
    // that stay sparse; values include NaN (an array's empty mark), -1 (a released id) and values set twice.
    const near = fc.record({
      kind: fc.constant('set' as const),
      n: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 2 ** 48 - 130, max: 2 ** 48 - 1 })),
      word: fc.constantFrom('', '', ':fee'),
      value: fc.oneof(
        { weight: 8, arbitrary: fc.integer({ min: -1, max: 2 ** 40 }) },
        { weight: 1, arbitrary: fc.constant(Number.NaN) },
      ),
    });
    const read = fc.record({
      kind: fc.constant('get' as const),
      n: fc.integer({ min: 0, max: 300 }),
      word: fc.constantFrom('', ':fee'),
    });
    fc.assert(
      fc.property(
        fc.array(fc.oneof({ weight: 4, arbitrary: near }, { weight: 1, arbitrary: read }), {
          minLength: 100,
          maxLength: 600,
        }),
        (ops) => {
          const table = new IdTable();
          const model = new Map<string, number>();
          for (const o of ops) {
            const key = `${prefixes[0]}${hex(o.n, 12)}${o.word}`;
            if (o.kind === 'set') {
              table.set(key, o.value);
              model.set(key, o.value);
            }
            expectIs(table.get(key), model.get(key));
            expectIs(table.size, model.size);
          }
          for (const [k, v] of model) expectIs(table.get(k), v);
        },
      ),
      { seed: SEED, numRuns: propertyRuns(300) },
    );
  });

  test('the ids of a process in turn: every one kept apart, the largest counter included', () => {
    const table = new IdTable();
    const prefix = prefixes[0]!;
    const top = 2 ** 48 - 1;
    const ids = [0, 1, 15, 16, 2 ** 30, 2 ** 31, top - 1, top].map((n) => `${prefix}${hex(n, 12)}`);
    ids.forEach((i, n) => table.set(i, n));
    ids.forEach((i, n) => table.set(`${i}:fee`, 100 + n));
    expect(ids.map((i) => table.get(i))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(ids.map((i) => table.get(`${i}:fee`))).toEqual([100, 101, 102, 103, 104, 105, 106, 107]);
    expect(table.size).toBe(16);
    expect(table.get(`${prefix}${'0'.repeat(11)}2`)).toBeUndefined();
  });
});
