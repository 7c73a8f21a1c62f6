// one numeric verdict per address. Addresses are generated as numbers, rendered in every spelling the
// URL parser and net.connect accept (IPv4 dotted, integer, octal, hex, short, fullwidth, percent-encoded, with
// trailing dots; IPv6 full, compressed at any run, any case, leading zeros, dotted tail, every IPv4 embedding, zone
// ids), and the policy's verdict on the text must be the reference's verdict on the number (egress.reference.ts),
// at validation and at connect time. The allow-list grammar is held to what was written: refused, or exactly it.
// First run, against the code before this generator (seed 32, 5000 cases each): 1640 URL hosts, 981 connect-time addresses, 1265
// names and 1094 allow-list entries disagreed; shrunk to [2001:0:0:0:0:0:ffff:ffff] (Teredo, client 0.0.0.0),
// localhost.. and 0.0.0.0/ (read as /0). The embedded-IPv4 forms, the trailing dots and the prefix grammar were
// bypasses of the old table itself; the rest were classes added to the table in the same change.

import type { LookupAddress } from 'node:dns';
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import {
  type EgressAllowList,
  parseEgressAllowList,
  resolvedAddressProblem,
  urlEgressProblem,
} from '../../../src/domain/index.ts';
import { egressLookup, literalHostProblem } from '../../../src/gateway/egress.ts';
import { expectEqual, propertyRuns } from '../../support/properties.ts';
import {
  type Address,
  address,
  allowCase,
  dotted,
  hostName,
  nameStyle,
  refCovers,
  refForbidden,
  refNameForbidden,
  renderName,
  renderV4,
  renderV6,
  v4Style,
  v6Style,
} from './egress.reference.ts';

const SEED = 32; // fixed, so a failure here is a failure everywhere
const RUNS = 5000;
const M32 = 0xffff_ffffn;

type AllowRange = { v6: boolean; n: bigint; prefix: number };
/** An allow-list range: none, one around the address itself, one around its embedded IPv4, or any. */
const allowFor = (a: Address): fc.Arbitrary<AllowRange | null> =>
  fc.oneof(
    fc.constant(null),
    fc.constant(null),
    fc.integer({ min: 0, max: a.v6 ? 128 : 32 }).map((p) => mask({ v6: a.v6, n: a.n, prefix: p })),
    fc.integer({ min: 0, max: 32 }).map((p) => mask({ v6: false, n: a.n & M32, prefix: p })),
    fc
      .tuple(address, fc.integer({ min: 0, max: 128 }))
      .map(([b, p]) => mask({ v6: b.v6, n: b.n, prefix: p % (b.v6 ? 129 : 33) })),
  );
function mask(r: AllowRange): AllowRange {
  const width = r.v6 ? 128 : 32;
  return { ...r, n: (r.n >> BigInt(width - r.prefix)) << BigInt(width - r.prefix) };
}
const allowList = (r: AllowRange | null): EgressAllowList => ({
  ranges: r === null ? [] : [{ bits: r.n, prefix: r.prefix, v6: r.v6 }],
  hosts: new Set<string>(),
});

const spelled = fc
  .record({ a: address, v4: v4Style, v6: v6Style, zone: fc.constantFrom(false, false, false, true) })
  .chain((c) => allowFor(c.a).map((allow) => ({ ...c, allow })));

describe('egress policy (properties): one verdict per address, whatever its spelling', () => {
  test('a URL host in any spelling is refused iff its number is forbidden and not allow-listed', () => {
    fc.assert(
      fc.property(spelled, ({ a, v4, v6, zone, allow }) => {
        const host = a.v6 ? `[${renderV6(a.n, v6)}${zone ? '%25eth0' : ''}]` : renderV4(a.n, v4);
        const expected = refForbidden(a) && !(allow !== null && refCovers(allow, a));
        // A zone id makes the URL unparseable: nothing can connect to it, and the policy must not call it fine.
        expectEqual(
          { host, refused: urlEgressProblem(`https://${host}/x`, allowList(allow)) !== null },
          {
            host,
            refused: expected || (a.v6 && zone),
          },
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('at connect time an address in any spelling net.connect or DNS hands over gets the same verdict', () => {
    fc.assert(
      fc.property(spelled, ({ a, v6, zone, allow }) => {
        const text = a.v6 ? `${renderV6(a.n, v6)}${zone ? '%eth0' : ''}` : dotted(a.n);
        const list = allowList(allow);
        const expected = refForbidden(a) && !(allow !== null && refCovers(allow, a));
        // A name that resolves to it (DNS rebinding), and the literal itself (net.connect skips the lookup).
        expectEqual(
          { text, refused: resolvedAddressProblem('tenant.example', text, list) !== null },
          {
            text,
            refused: expected,
          },
        );
        expectEqual({ text, refused: literalHostProblem(text, list) !== null }, { text, refused: expected });
        if (a.v6)
          expectEqual(
            { text, refused: literalHostProblem(`[${text}]`, list) !== null },
            {
              text,
              refused: expected,
            },
          );
        // The agent's lookup, asking a resolver that answers with this address beside a public one.
        const answers: LookupAddress[] = [
          { address: '8.8.8.8', family: 4 },
          { address: text, family: a.v6 ? 6 : 4 },
        ];
        let refused: boolean | undefined;
        egressLookup(list, (_host, _opts, cb) => cb(null, answers))('tenant.example', { all: true }, (err) => {
          refused = (err as { code?: string } | null)?.code === 'EGRESS_DENIED';
        });
        expectEqual({ text, refused }, { text, refused: expected });
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('a host name keeps its verdict through case, trailing dots, percent-encoding and UTS 46 mappings', () => {
    fc.assert(
      fc.property(hostName, nameStyle, (name, style) => {
        const host = renderName(name, style);
        expectEqual(
          { host, refused: urlEgressProblem(`https://${host}/x`) !== null },
          {
            host,
            refused: refNameForbidden(name),
          },
        );
        // An allow-listed name is allowed in every spelling, at validation and when its lookup is checked.
        const allow = parseEgressAllowList([name]);
        expectEqual(
          { host, refused: urlEgressProblem(`https://${host}/x`, allow) !== null },
          {
            host,
            refused: false,
          },
        );
        expect(
          resolvedAddressProblem(`${name.toUpperCase()}${'.'.repeat(style.trailingDots)}`, '127.0.0.1', allow),
        ).toBeNull();
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});

describe('egress allow-list grammar (properties)', () => {
  test('an entry is refused or means exactly the range written, never a wider one', () => {
    fc.assert(
      fc.property(allowCase, ({ entry, expected }) => {
        let parsed: EgressAllowList | Error;
        try {
          parsed = parseEgressAllowList([entry]);
        } catch (err) {
          parsed = err as Error;
        }
        if (expected === null) {
          expectEqual({ entry, refused: parsed instanceof Error }, { entry, refused: true });
          return;
        }
        expect(parsed).not.toBeInstanceOf(Error);
        const { ranges, hosts } = parsed as EgressAllowList;
        expectEqual(
          {
            entry,
            hosts: [...hosts],
            ranges: ranges.map((r) => ({
              v6: r.v6,
              n: mask({ v6: r.v6, n: r.bits, prefix: r.prefix }).n,
              prefix: r.prefix,
            })),
          },
          {
            entry,
            hosts: [],
            ranges: [expected],
          },
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});
