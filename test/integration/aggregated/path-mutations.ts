// Spellings of a request path that a router, a proxy or an authorizer may each read differently: every
// segment may be percent-encoded in any case, double-encoded, overlong-UTF-8 encoded, joined to its neighbour with an
// escaped slash, doubled, dotted, given `;` parameters, a trailing slash or mixed case. The path differential test
// sends each to the aggregated port and through the kube-apiserver and compares the verdicts.
import fc from 'fast-check';

/** One way to respell a path given as segments; each returns the raw path (starting with '/'). */
export type Mutation =
  | { kind: 'plain' }
  | { kind: 'escape'; segment: number; positions: number[]; upper: boolean }
  | { kind: 'doubleEscape'; segment: number; position: number }
  | { kind: 'overlong'; segment: number; position: number; bytes: 2 | 3 }
  | { kind: 'escapedSlash'; segment: number; upper: boolean }
  | { kind: 'emptySegment'; segment: number }
  | { kind: 'dotSegment'; segment: number; dots: '.' | '..' | '%2e' | '%2E%2E' | '.%2e' }
  | { kind: 'matrix'; segment: number; param: string }
  | { kind: 'trailing'; slashes: 1 | 2 }
  | { kind: 'case'; segment: number; mask: number }
  | { kind: 'fullwidth'; segment: number; position: number }
  | { kind: 'backslash'; segment: number };

const hex = (n: number, upper: boolean) => {
  const h = n.toString(16).padStart(2, '0');
  return `%${upper ? h.toUpperCase() : h}`;
};
const encodeChar = (c: string, upper: boolean) => [...Buffer.from(c, 'utf8')].map((b) => hex(b, upper)).join('');
/** The overlong (invalid) UTF-8 forms of an ASCII character: what naive decoders turn back into it. */
const overlong = (c: string, bytes: 2 | 3) => {
  const n = c.charCodeAt(0);
  return bytes === 2
    ? `${hex(0xc0 | (n >> 6), true)}${hex(0x80 | (n & 0x3f), true)}`
    : `%E0${hex(0x80 | (n >> 6), true)}${hex(0x80 | (n & 0x3f), true)}`;
};

const at = <T>(xs: readonly T[], i: number) => i % Math.max(xs.length, 1);

/** Applies a mutation to a path's segments (already safe for a URL) and returns the raw path. */
export function respell(segments: readonly string[], m: Mutation): string {
  const s = [...segments];
  const i = 'segment' in m ? at(s, m.segment) : 0;
  const seg = s[i] ?? '';
  switch (m.kind) {
    case 'plain':
      break;
    case 'escape':
      s[i] = [...seg]
        .map((c, j) => (m.positions.some((p) => p % seg.length === j) ? encodeChar(c, m.upper) : c))
        .join('');
      break;
    case 'doubleEscape': {
      const j = m.position % Math.max(seg.length, 1);
      s[i] = `${seg.slice(0, j)}${encodeChar(seg[j] ?? 'a', false).replace('%', '%25')}${seg.slice(j + 1)}`;
      break;
    }
    case 'overlong': {
      const j = m.position % Math.max(seg.length, 1);
      s[i] = `${seg.slice(0, j)}${overlong(seg[j] ?? '.', m.bytes)}${seg.slice(j + 1)}`;
      break;
    }
    case 'escapedSlash':
      // Two segments become one that decodes to both: `namespaces%2Fns`.
      if (i + 1 < s.length) s.splice(i, 2, `${seg}${m.upper ? '%2F' : '%2f'}${s[i + 1]}`);
      break;
    case 'emptySegment':
      s.splice(i, 0, '');
      break;
    case 'dotSegment':
      s.splice(i, 0, ...(m.dots === '..' || m.dots === '%2E%2E' || m.dots === '.%2e' ? ['x', m.dots] : [m.dots]));
      break;
    case 'matrix':
      s[i] = `${seg};${m.param}`;
      break;
    case 'trailing':
      return `/${s.join('/')}${'/'.repeat(m.slashes)}`;
    case 'case':
      s[i] = [...seg].map((c, j) => ((m.mask >> (j % 30)) & 1 ? c.toUpperCase() : c)).join('');
      break;
    case 'fullwidth': {
      const j = m.position % Math.max(seg.length, 1);
      const c = seg[j] ?? 'a';
      const code = c.charCodeAt(0);
      // U+FF01..U+FF5E mirror ASCII 0x21..0x7E: a lookalike a normalizing decoder might fold.
      const wide = code >= 0x21 && code <= 0x7e ? String.fromCharCode(code - 0x21 + 0xff01) : c;
      s[i] = `${seg.slice(0, j)}${encodeChar(wide, true)}${seg.slice(j + 1)}`;
      break;
    }
    case 'backslash':
      if (i + 1 < s.length) s.splice(i, 2, `${seg}%5C${s[i + 1]}`);
      break;
  }
  return `/${s.join('/')}`;
}

export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 1, arbitrary: fc.constant<Mutation>({ kind: 'plain' }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('escape' as const),
      segment: fc.nat(9),
      positions: fc.array(fc.nat(40), { minLength: 1, maxLength: 4 }),
      upper: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('doubleEscape' as const), segment: fc.nat(9), position: fc.nat(40) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('overlong' as const),
      segment: fc.nat(9),
      position: fc.nat(40),
      bytes: fc.constantFrom(2 as const, 3 as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('escapedSlash' as const), segment: fc.nat(9), upper: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('emptySegment' as const), segment: fc.nat(9) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('dotSegment' as const),
      segment: fc.nat(9),
      dots: fc.constantFrom('.' as const, '..' as const, '%2e' as const, '%2E%2E' as const, '.%2e' as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('matrix' as const),
      segment: fc.nat(9),
      param: fc.constantFrom('x=1', '', 'watch=true', 'jsessionid=0'),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('trailing' as const), slashes: fc.constantFrom(1 as const, 2 as const) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('case' as const),
      segment: fc.nat(9),
      mask: fc.integer({ min: 1, max: 0x3fffffff }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('fullwidth' as const), segment: fc.nat(9), position: fc.nat(40) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('backslash' as const), segment: fc.nat(9) }) },
);

/** Up to three mutations applied in turn (each to the previous result's segments). */
export const mutationsArb = fc.array(mutationArb, { minLength: 1, maxLength: 3 });

export function respellAll(segments: readonly string[], ms: readonly Mutation[]): string {
  let path = `/${segments.join('/')}`;
  for (const m of ms) path = respell(path.slice(1).split('/'), m);
  return path;
}

/** Query strings the verb depends on (watch) or that a parser may read twice. */
export const queryArb = fc.constantFrom(
  '',
  '?watch=true',
  '?watch=1',
  '?watch=True',
  '?watch=true&watch=false',
  '?watch=%74rue',
  '?limit=1',
  '?dryRun=All',
  '?labelSelector=x%3D1',
);
