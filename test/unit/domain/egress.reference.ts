// A reference for the egress policy, written independently of src/domain/egress.ts: addresses are
// numbers, the forbidden ranges are a table of [first, last] BigInt pairs compared with <=, and every IPv4-embedding
// IPv6 form has its own rule spelled out below. The generators build addresses as numbers and render them in the
// textual forms the URL parser and net.connect accept, so a property can compare the policy's verdict on the text
// with this reference's verdict on the number.
import fc from 'fast-check';

const M32 = 0xffff_ffffn;

/** [first, last] of a CIDR given as a number and a prefix length, by arithmetic (no shifts, unlike the policy). */
function span(base: bigint, prefix: number, width: number): readonly [bigint, bigint] {
  const size = 2n ** BigInt(width - prefix);
  return [base, base + size - 1n];
}
const v4 = (a: number, b: number, c: number, d: number) =>
  BigInt(a) * 16_777_216n + BigInt(b) * 65_536n + BigInt(c) * 256n + BigInt(d);
const v6 = (...groups: number[]) =>
  groups.reduce((acc, g) => acc * 65_536n + BigInt(g), 0n) * 65_536n ** BigInt(8 - groups.length);

/** IPv4 ranges the policy refuses (IANA special-purpose registry, minus the globally reachable ones). */
export const REF_V4: readonly (readonly [bigint, bigint, string])[] = [
  [...span(v4(0, 0, 0, 0), 8, 32), 'unspecified'],
  [...span(v4(10, 0, 0, 0), 8, 32), 'private'],
  [...span(v4(100, 64, 0, 0), 10, 32), 'carrier-grade NAT'],
  [...span(v4(127, 0, 0, 0), 8, 32), 'loopback'],
  [...span(v4(169, 254, 0, 0), 16, 32), 'link-local'],
  [...span(v4(172, 16, 0, 0), 12, 32), 'private'],
  [...span(v4(192, 0, 0, 0), 24, 32), 'IETF protocol assignment'],
  [...span(v4(192, 0, 2, 0), 24, 32), 'documentation'],
  [...span(v4(192, 168, 0, 0), 16, 32), 'private'],
  [...span(v4(198, 18, 0, 0), 15, 32), 'benchmarking'],
  [...span(v4(198, 51, 100, 0), 24, 32), 'documentation'],
  [...span(v4(203, 0, 113, 0), 24, 32), 'documentation'],
  [...span(v4(224, 0, 0, 0), 4, 32), 'multicast'],
  [...span(v4(240, 0, 0, 0), 4, 32), 'reserved'],
];

export function refV4Forbidden(n: bigint): boolean {
  return REF_V4.some(([lo, hi]) => lo <= n && n <= hi);
}

const within = (n: bigint, base: bigint, prefix: number) => {
  const [lo, hi] = span(base, prefix, 128);
  return lo <= n && n <= hi;
};
/** The 32 bits of `n` that start `from` bits below the top of 128. */
const v4At = (n: bigint, from: number) => (n / 2n ** BigInt(128 - from - 32)) % 2n ** 32n;

/** IPv6 ranges refused outright (after the embedding rules, inside global unicast 2000::/3). */
export const REF_V6: readonly (readonly [bigint, number, string])[] = [
  [v6(0x2001, 0x0db8), 32, 'documentation'],
  [v6(0x3fff), 20, 'documentation'],
  [v6(0x2001, 0x0002, 0), 48, 'benchmarking'],
];

/** The reference verdict for an IPv6 address: embedded IPv4 first, then global unicast only, minus REF_V6. */
export function refV6Forbidden(n: bigint): boolean {
  if (within(n, 0n, 96)) return refV4Forbidden(n % 2n ** 32n); // ::a.b.c.d, IPv4-compatible (:: and ::1 included)
  if (within(n, v6(0, 0, 0, 0, 0, 0xffff), 96)) return refV4Forbidden(n % 2n ** 32n); // ::ffff:a.b.c.d, IPv4-mapped
  if (within(n, v6(0, 0, 0, 0, 0xffff, 0), 96)) return refV4Forbidden(n % 2n ** 32n); // ::ffff:0:a.b.c.d, IPv4-translated
  if (within(n, v6(0x64, 0xff9b), 96)) return refV4Forbidden(n % 2n ** 32n); // 64:ff9b::a.b.c.d, NAT64 well-known
  if (within(n, v6(0x64, 0xff9b, 1), 48)) return true; // NAT64 local use: its IPv4 can sit at any RFC 6052 offset
  if (within(n, v6(0x2002), 16)) return refV4Forbidden(v4At(n, 16)); // 6to4: 2002:AABB:CCDD::
  if (within(n, v6(0x2001, 0), 32)) return refV4Forbidden(v4At(n, 32)) || refV4Forbidden(M32 - (n % 2n ** 32n)); // Teredo server, NOT client
  if (!within(n, v6(0x2000), 3)) return true; // not global unicast: ::/8 rest, 100::/64, fc00::/7, fe80::/10, fec0::/10, ff00::/8, …
  return REF_V6.some(([base, prefix]) => within(n, base, prefix));
}

export type Address = { v6: false; n: bigint } | { v6: true; n: bigint };
export const refForbidden = (a: Address) => (a.v6 ? refV6Forbidden(a.n) : refV4Forbidden(a.n));

/** Is `a` inside the CIDR `r` (same family only: an IPv4 range does not cover IPv6 forms that embed it). */
export function refCovers(r: { v6: boolean; n: bigint; prefix: number }, a: Address): boolean {
  if (r.v6 !== a.v6) return false;
  const [lo, hi] = span(r.n, r.prefix, r.v6 ? 128 : 32);
  return lo <= a.n && a.n <= hi;
}

// ---------------------------------------------------------------------------------------------------------------
// Address generators: uniform, plus a bias toward every range's inside and its edges.

const bits = (width: number) => fc.bigInt({ min: 0n, max: 2n ** BigInt(width) - 1n });
const inside = (base: bigint, prefix: number, width: number) => bits(width - prefix).map((host) => base + host);

const V4_SPOTS: readonly [bigint, number][] = [
  ...REF_V4.map(([lo, hi]): [bigint, number] => [lo, 32 - (hi - lo + 1n).toString(2).length + 1]),
  [v4(169, 254, 169, 254), 32],
  [v4(127, 0, 0, 1), 32],
  [v4(8, 8, 8, 8), 24],
  [v4(11, 0, 0, 0), 8],
  [v4(172, 32, 0, 0), 11],
  [v4(100, 0, 0, 0), 10],
  [v4(100, 128, 0, 0), 9],
  [v4(192, 88, 99, 0), 24],
  [v4(52, 0, 0, 0), 8],
  [v4(20, 0, 0, 0), 8],
];
const V4_EDGES = REF_V4.flatMap(([lo, hi]) => [lo - 1n, lo, hi, hi + 1n]).filter((n) => n >= 0n && n <= M32);

export const ipv4Number: fc.Arbitrary<bigint> = fc.oneof(
  { arbitrary: bits(32), weight: 3 },
  { arbitrary: fc.constantFrom(...V4_SPOTS).chain(([base, prefix]) => inside(base, prefix, 32)), weight: 5 },
  { arbitrary: fc.constantFrom(...V4_EDGES), weight: 2 },
);

const V6_SPOTS: readonly [bigint, number][] = [
  [0n, 128],
  [1n, 128],
  [v6(0xfe80), 10],
  [v6(0xfc00), 7],
  [v6(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254), 128],
  [v6(0xff00), 8],
  [v6(0xfec0), 10],
  [v6(0x0100), 64],
  [v6(0x2001, 0x0db8), 32],
  [v6(0x3fff), 20],
  [v6(0x2001, 0x0002, 0), 48],
  [v6(0x0064, 0xff9b, 1), 48],
  [v6(0x2001, 0x4860), 32],
  [v6(0x2600), 12],
  [v6(0x2a00), 12],
  [v6(0x2000), 3],
  [v6(0x4000), 3],
  [0n, 8],
  [v6(0x0100), 8],
  [v6(0x2001), 23],
  [v6(0x2002), 16],
  [v6(0x2001, 0), 32],
  [v6(0x0064, 0xff9b), 96],
];

/** An IPv4 address put inside an IPv6 one, in every embedding the policy knows. */
const embedded: fc.Arbitrary<bigint> = fc.oneof(
  ipv4Number, // ::a.b.c.d (IPv4-compatible)
  ipv4Number.map((a) => v6(0, 0, 0, 0, 0, 0xffff) + a), // IPv4-mapped
  ipv4Number.map((a) => v6(0, 0, 0, 0, 0xffff, 0) + a), // IPv4-translated
  ipv4Number.map((a) => v6(0x64, 0xff9b) + a), // NAT64 well-known prefix
  // NAT64 local-use (RFC 8215) with the IPv4 at an RFC 6052 offset for prefix lengths 48, 56, 64 and 96.
  fc
    .tuple(ipv4Number, fc.constantFrom(48, 56, 64, 96), bits(16))
    .map(([a, len, suffix]) => v6(0x64, 0xff9b, 1) + rfc6052(a, len) + (len === 96 ? 0n : suffix)),
  fc.tuple(ipv4Number, bits(80)).map(([a, rest]) => v6(0x2002) + a * 2n ** 80n + rest), // 6to4
  // Teredo: 2001:0:<server v4>:<flags>:<port>:<NOT client v4>
  fc
    .tuple(ipv4Number, ipv4Number, bits(32))
    .map(([server, client, flagsPort]) => v6(0x2001, 0) + server * 2n ** 64n + flagsPort * 2n ** 32n + (M32 - client)),
);

/** RFC 6052 §2.2: the IPv4 address inside a prefix of `len` bits, skipping the u-octet (bits 64..71). */
function rfc6052(a: bigint, len: number): bigint {
  if (len === 96) return a;
  const before = 64 - len; // bits of the IPv4 address before the u-octet
  const high = before > 0 ? a / 2n ** BigInt(32 - before) : 0n;
  const low = before > 0 ? a % 2n ** BigInt(32 - before) : a;
  return high * 2n ** 64n + low * 2n ** BigInt(56 - (32 - before));
}

export const ipv6Number: fc.Arbitrary<bigint> = fc.oneof(
  { arbitrary: bits(128), weight: 2 },
  { arbitrary: inside(v6(0x2000), 3, 128), weight: 3 }, // global unicast
  { arbitrary: fc.constantFrom(...V6_SPOTS).chain(([base, prefix]) => inside(base, prefix, 128)), weight: 4 },
  { arbitrary: embedded, weight: 5 },
);

export const address: fc.Arbitrary<Address> = fc.oneof(
  ipv4Number.map((n): Address => ({ v6: false, n })),
  ipv6Number.map((n): Address => ({ v6: true, n })),
);

// ---------------------------------------------------------------------------------------------------------------
// Renderers: the number as text, in the spellings the WHATWG URL parser and net.connect accept.

const hexGroups = (n: bigint) => Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn));
export const dotted = (n: bigint) => [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join('.');

export interface V6Style {
  pads: number[]; // leading zeros per group (0..3)
  upper: boolean[]; // per group
  run: number | null; // which run of zero groups `::` replaces (index into the runs found), or none
  v4Tail: boolean; // the last 32 bits as a dotted IPv4 address
}
export const v6Style: fc.Arbitrary<V6Style> = fc.record({
  pads: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 8, maxLength: 8 }),
  upper: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
  run: fc.option(fc.nat(), { nil: null }),
  v4Tail: fc.boolean(),
});

/** IPv6 text without brackets: full or compressed at any run of zero groups, any case, leading zeros, a dotted tail. */
export function renderV6(n: bigint, s: V6Style): string {
  const hexCount = s.v4Tail ? 6 : 8;
  const groups = hexGroups(n)
    .slice(0, hexCount)
    .map((g, i) => {
      const h = g.toString(16);
      const padded = h.padStart(Math.min(4, h.length + (s.pads[i] ?? 0)), '0');
      return s.upper[i] ? padded.toUpperCase() : padded;
    });
  const tail = s.v4Tail ? dotted(n & M32) : null;
  // Every run [start, end) of zero groups of length >= 1 (not only the longest: the parsers accept any).
  const runs: [number, number][] = [];
  for (let start = 0; start < hexCount; start++) {
    for (let end = start + 1; end <= hexCount && hexGroups(n)[end - 1] === 0; end++) runs.push([start, end]);
  }
  const pick = s.run === null || runs.length === 0 ? null : runs[s.run % runs.length]!;
  if (pick === null) return [...groups, ...(tail === null ? [] : [tail])].join(':');
  const head = groups.slice(0, pick[0]).join(':');
  const rest = [...groups.slice(pick[1]), ...(tail === null ? [] : [tail])].join(':');
  return `${head}::${rest}`;
}

type Radix = 'dec' | 'oct' | 'hex' | 'HEX';
export interface V4Style {
  parts: 1 | 2 | 3 | 4; // 127.1 is two parts: 8 bits, then 24
  radix: Radix[];
  zeros: number[]; // extra leading zeros for octal and hex parts
  trailingDots: number; // 0..3 ('127.0.0.1.' is still an IPv4 address; '127.0.0.1..' is a name that strips to one)
  dot: string[]; // '.' or a full stop UTS 46 maps to it
  fullwidth: boolean[]; // per character (U+FF10.. digits and letters)
  percent: boolean[]; // per character (%31 for 1)
}
export const v4Style: fc.Arbitrary<V4Style> = fc.record({
  parts: fc.constantFrom(1 as const, 2 as const, 3 as const, 4 as const, 4 as const, 4 as const),
  radix: fc.array(fc.constantFrom<Radix>('dec', 'dec', 'oct', 'hex', 'HEX'), { minLength: 4, maxLength: 4 }),
  zeros: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 4, maxLength: 4 }),
  trailingDots: fc.constantFrom(0, 0, 1, 2, 3),
  dot: fc.array(fc.constantFrom('.', '.', '.', '\u3002', '\uff0e', '\uff61', '%2e', '%2E'), {
    minLength: 6,
    maxLength: 6,
  }),
  fullwidth: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }).map((a) => a.map((b, i) => b && i % 5 === 0)),
  percent: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }).map((a) => a.map((b, i) => b && i % 4 === 1)),
});

function part(value: bigint, radix: Radix, zeros: number): string {
  if (radix === 'dec') return value.toString(10);
  if (radix === 'oct') return `0${'0'.repeat(zeros)}${value.toString(8)}`;
  const h = `${'0'.repeat(zeros)}${value.toString(16)}`;
  return radix === 'HEX' ? `0X${h.toUpperCase()}` : `0x${h}`;
}

/** An IPv4 address as a URL host in one of the WHATWG spellings: 127.1, 0x7f.1, 2130706433, 0177.0.0.1, １２７。0.0.1. */
export function renderV4(n: bigint, s: V4Style): string {
  const values: bigint[] = [];
  let rest = n;
  for (let i = 0; i < s.parts - 1; i++) {
    const shift = BigInt(8 * (3 - i));
    values.push(rest >> shift);
    rest &= (1n << shift) - 1n;
  }
  values.push(rest);
  const parts = values.map((v, i) => part(v, s.radix[i]!, s.zeros[i]!));
  const text =
    parts.reduce((acc, p, i) => (i === 0 ? p : `${acc}${s.dot[i]!}${p}`), '') +
    Array.from({ length: s.trailingDots }, (_, i) => s.dot[4 + (i % 2)]!).join('');
  return dress(text, s.fullwidth, s.percent);
}

/** Fullwidth forms and percent-encoding of single ASCII characters (the URL parser undoes both). */
export function dress(text: string, fullwidth: readonly boolean[], percent: readonly boolean[]): string {
  let out = '';
  let i = 0;
  for (let k = 0; k < text.length; k++) {
    const c = text[k]!;
    // Never split an escape that is already there (%2e).
    if (c === '%') {
      out += text.slice(k, k + 3);
      k += 2;
      i++;
      continue;
    }
    if (/[0-9a-z]/i.test(c) && fullwidth[i % fullwidth.length]) out += String.fromCodePoint(c.codePointAt(0)! + 0xfee0);
    else if (/[0-9a-z.]/i.test(c) && percent[i % percent.length]) out += `%${c.charCodeAt(0).toString(16)}`;
    else out += c;
    i++;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Names: the policy's forbidden names, public names, and spellings the URL parser folds together.

/** The reference verdict for a host name (lower case, trailing dots gone). */
export function refNameForbidden(name: string): boolean {
  const n = name.replace(/\.+$/, '');
  return (
    n === 'localhost' ||
    n.endsWith('.localhost') ||
    n.endsWith('.internal') ||
    n.endsWith('.local') ||
    n.endsWith('.svc') ||
    !n.includes('.')
  );
}

const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,6}[a-z0-9]$/);
export const hostName: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    'localhost',
    'api.localhost',
    'metadata.google.internal',
    'metadata',
    'kubernetes',
    'kubernetes.default.svc',
    'api.default.svc.cluster.local',
    'printer.local',
    'example.com',
    'oauth2.googleapis.com',
    'example.openai.azure.com',
    'localhost.example.com',
    'internal.example',
    'svc.example.org',
  ),
  fc
    .tuple(
      fc.array(label, { minLength: 0, maxLength: 3 }),
      fc.constantFrom('', '.localhost', '.internal', '.local', '.svc', '.cluster.local', '.com', '.example', '.io'),
    )
    .map(([labels, suffix]) => `${labels.join('.')}${suffix}`.replace(/^\./, ''))
    .filter((n) => n !== ''),
);

export interface NameStyle {
  upper: boolean[];
  trailingDots: number;
  softHyphen: number | null; // U+00AD inside a label: mapped to nothing by UTS 46
  fullwidth: boolean[];
  percent: boolean[];
}
export const nameStyle: fc.Arbitrary<NameStyle> = fc.record({
  upper: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
  trailingDots: fc.constantFrom(0, 0, 1, 2, 3),
  softHyphen: fc.option(fc.nat(), { nil: null }),
  fullwidth: fc.array(fc.boolean(), { minLength: 16, maxLength: 16 }).map((a) => a.map((b, i) => b && i % 4 === 0)),
  percent: fc.array(fc.boolean(), { minLength: 16, maxLength: 16 }).map((a) => a.map((b, i) => b && i % 5 === 2)),
});

export function renderName(name: string, s: NameStyle): string {
  let text = [...name].map((c, i) => (s.upper[i % s.upper.length] ? c.toUpperCase() : c)).join('');
  if (s.softHyphen !== null) {
    const at = s.softHyphen % text.length;
    if (text[at] !== '.' && text[at - 1] !== '.' && at > 0) text = `${text.slice(0, at)}\u00ad${text.slice(at)}`;
  }
  return dress(text, s.fullwidth, s.percent) + '.'.repeat(s.trailingDots);
}

// ---------------------------------------------------------------------------------------------------------------
// Allow-list entries: a CIDR built from a number and a prefix, written correctly or in one of the malformed ways.

export type PrefixSpelling =
  | 'plain'
  | 'none'
  | 'empty'
  | 'leading-zero'
  | 'plus'
  | 'minus'
  | 'decimal-point'
  | 'hex'
  | 'exponent'
  | 'space-before'
  | 'space-after'
  | 'too-long'
  | 'double';
export type AddressSpelling =
  | 'canonical'
  | 'bracketed'
  | 'styled-v6'
  | 'missing'
  | 'v4-leading-zero'
  | 'v4-short'
  | 'v4-integer'
  | 'v4-hex'
  | 'zone'
  | 'host-bits';
export interface AllowCase {
  entry: string;
  /** What the entry means when it is well formed, or null when the parser must refuse it. */
  expected: { v6: boolean; n: bigint; prefix: number } | null;
}

export const allowCase: fc.Arbitrary<AllowCase> = fc
  .record({
    a: address,
    p: fc.integer({ min: 0, max: 128 }),
    style: v6Style,
    // About half well formed, half malformed in one or both halves.
    prefixSpelling: fc.oneof(
      { arbitrary: fc.constantFrom<PrefixSpelling>('plain', 'plain', 'none'), weight: 3 },
      {
        arbitrary: fc.constantFrom<PrefixSpelling>(
          'empty',
          'leading-zero',
          'plus',
          'minus',
          'decimal-point',
          'hex',
          'exponent',
          'space-before',
          'space-after',
          'too-long',
          'double',
        ),
        weight: 1,
      },
    ),
    addressSpelling: fc.oneof(
      { arbitrary: fc.constantFrom<AddressSpelling>('canonical', 'bracketed', 'styled-v6', 'styled-v6'), weight: 3 },
      {
        arbitrary: fc.constantFrom<AddressSpelling>(
          'missing',
          'v4-leading-zero',
          'v4-short',
          'v4-integer',
          'v4-hex',
          'zone',
          'host-bits',
        ),
        weight: 1,
      },
    ),
    over: fc.integer({ min: 1, max: 300 }),
  })
  .map(({ a, p, style, prefixSpelling, addressSpelling, over }): AllowCase => {
    const width = a.v6 ? 128 : 32;
    const prefix = prefixSpelling === 'none' ? width : p % (width + 1);
    const hostMask = (1n << BigInt(width - prefix)) - 1n;
    // The network address as written: canonical, unless the case is about host bits set beyond the prefix.
    const n = addressSpelling === 'host-bits' && hostMask !== 0n ? (a.n & ~hostMask) | 1n : a.n & ~hostMask;
    const canonical = a.v6
      ? renderV6(n, { pads: Array<number>(8).fill(0), upper: Array<boolean>(8).fill(false), run: 0, v4Tail: false })
      : dotted(n);
    const addresses: Record<AddressSpelling, [string, boolean]> = {
      canonical: [canonical, true],
      bracketed: [a.v6 ? `[${canonical}]` : canonical, true],
      'styled-v6': [a.v6 ? renderV6(n, style) : canonical, true],
      'host-bits': [canonical, hostMask === 0n],
      missing: ['', false],
      'v4-leading-zero': [a.v6 ? `${canonical}%` : canonical.replace(/^(\d+)/, '0$1'), false],
      'v4-short': [a.v6 ? `${canonical}:::` : `${n >> 24n}.${n & 0xff_ffffn}`, false],
      'v4-integer': [a.v6 ? `${canonical}:0:0:0:0:0:0:0:0` : String(n), false],
      'v4-hex': [`0x${n.toString(16)}`, false],
      zone: [`${canonical}%eth0`, false],
    };
    const [addr, addrOk] = addresses[addressSpelling];
    const prefixes: Record<PrefixSpelling, [string, boolean]> = {
      plain: [`${addr}/${prefix}`, true],
      // A bare address is a /32 or /128 (a missing one is still a slash: an empty entry is skipped, not refused).
      none: [addr === '' ? `/${prefix}` : addr, true],
      empty: [`${addr}/`, false],
      'leading-zero': [`${addr}/0${prefix}`, false],
      plus: [`${addr}/+${prefix}`, false],
      minus: [`${addr}/-${prefix}`, false],
      'decimal-point': [`${addr}/${prefix}.0`, false],
      hex: [`${addr}/0x${prefix.toString(16)}`, false],
      exponent: [prefix % 10 === 0 && prefix > 0 ? `${addr}/${prefix / 10}e1` : `${addr}/${prefix}e0`, false],
      'space-before': [`${addr}/ ${prefix}`, false],
      'space-after': [`${addr} /${prefix}`, false],
      'too-long': [`${addr}/${width + over}`, false],
      double: [`${addr}/${prefix}/${prefix}`, false],
    };
    const [entry, prefixOk] = prefixes[prefixSpelling];
    return { entry, expected: addrOk && prefixOk ? { v6: a.v6, n, prefix } : null };
  });
