// The egress policy for URLs a tenant chooses (an Azure `endpoint_url`, a Vertex `token_uri`): never loopback,
// private, link-local, CGNAT, multicast, unspecified, documentation, reserved or cloud-metadata addresses, never names
// that only make sense inside the cluster, unless an operator allow-lists them. Pure.
//
// The rule: one numeric verdict per address. Every textual form (IPv4 in any spelling the URL parser
// accepts, IPv6 in any spelling, with an embedded dotted IPv4, a zone id or brackets) is parsed to its number first;
// IPv6 forms that carry an IPv4 address (mapped, compatible, translated, NAT64, 6to4, Teredo) are judged by that IPv4
// address; and `forbiddenAddress` is the one judge, at validation (both doors and the operator), for IP literals at
// connect time and for every address a name resolves to. Names lose every trailing dot before they are judged.

/** Ranges and hosts an operator allows in spite of the policy (chart `egress.allow`, `--egress-allow`). */
export interface EgressAllowList {
  readonly ranges: readonly { bits: bigint; prefix: number; v6: boolean }[];
  readonly hosts: ReadonlySet<string>;
}

export const NO_EGRESS_EXCEPTIONS: EgressAllowList = Object.freeze({ ranges: [], hosts: new Set<string>() });

/** An address as its number: 32 bits for IPv4, 128 for IPv6. */
type Parsed = { readonly v6: boolean; readonly bits: bigint };

const M32 = 0xffff_ffffn;

/** Dotted decimal only (what DNS and net.connect hand over); the URL parser has already read 127.1, 0x7f.1 and 0177.0.0.1. */
function parseIPv4(text: string): bigint | null {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) return null;
  return parts.reduce((acc, p) => (acc << 8n) | BigInt(p), 0n);
}

function parseIPv6(text: string): bigint | null {
  let t = text;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two groups; it must follow a colon (not `::a1.2.3.4`).
  const v4 = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(t);
  if (v4) {
    const n = parseIPv4(v4[2]!);
    if (n === null) return null;
    t = `${v4[1]!}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const halves = t.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] === '' ? [] : halves[0]!.split(':');
  const tail = halves.length === 2 ? (halves[1] === '' ? [] : halves[1]!.split(':')) : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? head.length !== 8 : missing < 1) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  if (!groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return null;
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** An IP literal (IPv4 dotted, or IPv6 with or without brackets and zone id), or null for a name. */
export function parseIp(host: string): Parsed | null {
  if (host.startsWith('[') && host.endsWith(']')) {
    const six = parseIPv6(host.slice(1, -1).replace(/%.*$/, ''));
    return six === null ? null : { v6: true, bits: six };
  }
  const four = parseIPv4(host);
  if (four !== null) return { v6: false, bits: four };
  const six = host.includes(':') ? parseIPv6(host.replace(/%.*$/, '')) : null;
  return six === null ? null : { v6: true, bits: six };
}

const V4: readonly [string, number, string][] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignment'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];
// Checked after the IPv4 embeddings; anything else outside global unicast (2000::/3) is refused as reserved.
const V6: readonly [string, number, string][] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local (deprecated private)'],
  ['fc00::', 7, 'private (unique local, cloud metadata)'],
  ['ff00::', 8, 'multicast'],
  ['100::', 64, 'discard-only'],
  // RFC 8215: the IPv4 address sits at an offset set by the local prefix length (/48 to /96): it cannot be read back.
  ['64:ff9b:1::', 48, 'NAT64 local-use'],
  ['2001:db8::', 32, 'documentation'],
  ['3fff::', 20, 'documentation'],
  ['2001:2::', 48, 'benchmarking'],
];
const inRange = (bits: bigint, base: bigint, prefix: number, width: number) =>
  bits >> BigInt(width - prefix) === base >> BigInt(width - prefix);
const V4_RANGES = V4.map(([a, p, why]) => ({ base: parseIPv4(a)!, prefix: p, why }));
const V6_RANGES = V6.map(([a, p, why]) => ({ base: parseIPv6(a)!, prefix: p, why }));

/** The IPv4 addresses an IPv6 address carries, and the form that carries them. */
function embeddedIPv4(bits: bigint): { form: string; v4: bigint[] } | null {
  const high96 = bits >> 32n;
  if (high96 === 0n) return { form: 'IPv4-compatible', v4: [bits & M32] }; // ::a.b.c.d (deprecated, RFC 4291)
  if (high96 === 0xffffn) return { form: 'IPv4-mapped', v4: [bits & M32] }; // ::ffff:a.b.c.d
  if (high96 === 0xffff_0000n) return { form: 'IPv4-translated', v4: [bits & M32] }; // ::ffff:0:a.b.c.d (RFC 6145)
  if (high96 === 0x64_ff9b_0000_0000_0000_0000n) return { form: 'NAT64', v4: [bits & M32] }; // 64:ff9b::/96 (RFC 6052)
  if (bits >> 112n === 0x2002n) return { form: '6to4', v4: [(bits >> 80n) & M32] }; // 2002:AABB:CCDD::/48 (RFC 3056)
  // Teredo (RFC 4380): 2001:0:<server>:<flags>:<port>:<client>, the client's address inverted bit for bit.
  if (bits >> 96n === 0x2001_0000n) return { form: 'Teredo', v4: [(bits >> 64n) & M32, ~bits & M32] };
  return null;
}

/** Why an address is forbidden by the policy, or null. IPv6 forms that carry an IPv4 address are judged by it. */
export function forbiddenAddress(ip: Parsed): string | null {
  if (!ip.v6) return V4_RANGES.find((r) => inRange(ip.bits, r.base, r.prefix, 32))?.why ?? null;
  if (ip.bits === 0n) return 'unspecified';
  if (ip.bits === 1n) return 'loopback';
  const carried = embeddedIPv4(ip.bits);
  if (carried !== null) {
    for (const v4 of carried.v4) {
      const why = forbiddenAddress({ v6: false, bits: v4 });
      if (why !== null) return `${why} (${carried.form})`;
    }
    return null;
  }
  const listed = V6_RANGES.find((r) => inRange(ip.bits, r.base, r.prefix, 128))?.why;
  if (listed !== undefined) return listed;
  return ip.bits >> 125n === 1n ? null : 'reserved IPv6 (outside global unicast 2000::/3)';
}

/** Names that resolve inside the pod or the cluster (or to a metadata server), never a provider's. */
function forbiddenName(host: string): string | null {
  if (host === 'localhost' || host.endsWith('.localhost')) return 'loopback';
  if (host === 'metadata.google.internal' || host.endsWith('.internal')) return 'cloud-internal (metadata)';
  if (host.endsWith('.local') || host.endsWith('.svc') || host.endsWith('.cluster.local')) return 'cluster-internal';
  // A single label resolves through the pod's search domains (`kubernetes`, `metadata`): a cluster service.
  if (!host.includes('.')) return 'cluster-internal (single-label name)';
  return null;
}

// Every trailing dot, not one: `localhost..` is `localhost` to a resolver that strips them.
const normalHost = (host: string) => host.toLowerCase().replace(/\.+$/, '');

/** The URL parser's "ends in a number": such a host is read as an IPv4 address, or refused. */
const endsInNumber = (host: string) => /(^|\.)(\d+|0x[0-9a-f]*)$/i.test(host);

/**
 * A URL's host as the policy judges it. The URL parser reads `127.0.0.1.` as an address but `127.0.0.1..` (and
 * `0x7f.1..`) as a name; once its dots are gone it is read again, so it gets the address's verdict. Null when what
 * is left ends in a number but is no IPv4 address.
 */
function urlHost(hostname: string): string | null {
  const host = normalHost(hostname);
  if (host === hostname || !endsInNumber(host)) return host;
  try {
    return new URL(`https://${host}/`).hostname;
  } catch {
    return null;
  }
}

export function addressAllowed(ip: Parsed, allow: EgressAllowList): boolean {
  return allow.ranges.some((r) => r.v6 === ip.v6 && inRange(ip.bits, r.bits, r.prefix, ip.v6 ? 128 : 32));
}

/**
 * Why the policy refuses to connect to `address` for `host`, or null: the connect-time check, for every address a name
 * resolves to and for an IP literal (then `host` is the literal). An allow-listed host is trusted as it resolves.
 */
export function resolvedAddressProblem(host: string, address: string, allow: EgressAllowList): string | null {
  if (allow.hosts.has(normalHost(host))) return null;
  const ip = parseIp(address);
  if (ip === null) return 'non-IP';
  const why = forbiddenAddress(ip);
  return why !== null && !addressAllowed(ip, allow) ? why : null;
}

/**
 * Why the policy refuses a tenant URL's host as written (an IP literal in any spelling the URL parser accepts, or a
 * cluster-internal name), or null. Names that pass are checked again on every address they resolve to.
 */
export function urlEgressProblem(url: string, allow: EgressAllowList = NO_EGRESS_EXCEPTIONS): string | null {
  let hostname: string;
  try {
    // WHATWG URL parsing already turns 2130706433, 0177.0.0.1, 0x7f.1, %31%32%37.0.0.1 and １２７。0.0.1 into
    // 127.0.0.1, lower-cases and maps names (UTS 46), and compresses IPv6.
    hostname = new URL(url).hostname;
  } catch {
    // Nothing can connect to it either (an IPv6 zone id, `[fe80::1%25eth0]`, makes a URL unparseable): fail closed.
    return 'must be a URL whose host the egress policy can read';
  }
  const host = urlHost(hostname);
  if (host === null) return 'must not use a host that ends in a number but is no IPv4 address';
  if (allow.hosts.has(host)) return null;
  const ip = parseIp(host);
  const why = ip === null ? forbiddenName(host) : addressAllowed(ip, allow) ? null : forbiddenAddress(ip);
  return why === null
    ? null
    : `must not point at a ${why} address (the egress policy refuses it; an operator can allow it explicitly)`;
}

/** Text of a network address, for messages (IPv6 uncompressed). */
function formatIp(ip: Parsed): string {
  if (!ip.v6) return [24n, 16n, 8n, 0n].map((s) => String((ip.bits >> s) & 0xffn)).join('.');
  return Array.from({ length: 8 }, (_, i) => ((ip.bits >> BigInt(112 - 16 * i)) & 0xffffn).toString(16)).join(':');
}

/**
 * Parses `--egress-allow` entries: CIDRs (10.1.0.0/16, fd00::/8), bare IPs (a /32 or /128) and host names. Strict, so
 * an entry never means more than it says: IPv4 in dotted decimal, a prefix in plain decimal (`/8`; not `/`, `/08`,
 * `/+8`, `/8.0`, `/0x8`, `/ 8`), within the address's width, and the network's own address (`10.0.0.0/8`, not
 * `10.1.2.3/8`: refused like Kubernetes' strict CIDR validation and Python's `ip_network`, not masked like Go's
 * `net.ParseCIDR`). An allow-listed range covers the addresses written in its family: `10.0.0.0/8` does not cover
 * `::ffff:10.0.0.1` (list that too if you need it).
 */
export function parseEgressAllowList(entries: readonly string[]): EgressAllowList {
  const ranges: { bits: bigint; prefix: number; v6: boolean }[] = [];
  const hosts = new Set<string>();
  for (const raw of entries
    .flatMap((e) => e.split(','))
    .map((e) => e.trim())
    .filter((e) => e !== '')) {
    const refuse = (why: string) => new RangeError(`egress allow-list entry ${JSON.stringify(raw)} ${why}`);
    if (raw.includes('%')) throw refuse('has a zone id (%…), which an allow-list entry cannot use');
    const slash = raw.indexOf('/');
    const addr = slash < 0 ? raw : raw.slice(0, slash);
    const prefixText = slash < 0 ? undefined : raw.slice(slash + 1);
    const ip = parseIp(addr);
    if (ip === null) {
      if (prefixText !== undefined || !/^[a-z0-9.-]+$/i.test(addr))
        throw refuse('is neither a CIDR (IPv4 in dotted decimal, or IPv6), an IP nor a host name');
      // A host the URL parser would read as an IPv4 address (010.0.0.1, 10.1, 0x0a000001) would never match a URL.
      const host = normalHost(addr);
      if (endsInNumber(host))
        throw refuse('reads as an IPv4 address in a spelling other than dotted decimal: write it as a.b.c.d');
      if (!/^[a-z0-9-]+(\.[a-z0-9-]+)*$/.test(host)) throw refuse('is not a host name (empty labels)');
      hosts.add(host);
      continue;
    }
    const width = ip.v6 ? 128 : 32;
    if (prefixText !== undefined && (!/^(0|[1-9]\d{0,2})$/.test(prefixText) || Number(prefixText) > width)) {
      throw refuse(
        `has an invalid prefix length: a plain decimal number from 0 to ${width} (no sign, leading zero, space or fraction)`,
      );
    }
    const prefix = prefixText === undefined ? width : Number(prefixText);
    const network = (ip.bits >> BigInt(width - prefix)) << BigInt(width - prefix);
    if (network !== ip.bits)
      throw refuse(
        `has bits set beyond its /${prefix} prefix: write the network address, ${formatIp({ ...ip, bits: network })}/${prefix}`,
      );
    ranges.push({ bits: ip.bits, prefix, v6: ip.v6 });
  }
  return { ranges, hosts };
}
