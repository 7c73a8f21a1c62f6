// The egress policy for URLs a tenant chooses (an Azure `endpoint_url`, a Vertex `token_uri`): never loopback,
// private, link-local, CGNAT, multicast, unspecified or cloud-metadata addresses, never names that only make sense
// inside the cluster, unless an operator allow-lists them (issue 24). Pure: the same verdict at validation (both
// doors) and, in the gateway, on every address a name resolves to at connect time (DNS rebinding).

/** Ranges and hosts an operator allows in spite of the policy (chart `egress.allow`, `--egress-allow`). */
export interface EgressAllowList {
  readonly ranges: readonly { bits: bigint; prefix: number; v6: boolean }[];
  readonly hosts: ReadonlySet<string>;
}

export const NO_EGRESS_EXCEPTIONS: EgressAllowList = Object.freeze({ ranges: [], hosts: new Set<string>() });

type Parsed = { v6: false; bits: bigint } | { v6: true; bits: bigint };

function parseIPv4(text: string): bigint | null {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) return null;
  return parts.reduce((acc, p) => (acc << 8n) | BigInt(p), 0n);
}

function parseIPv6(text: string): bigint | null {
  let t = text;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(t);
  if (v4) {
    const n = parseIPv4(v4[1]!);
    if (n === null) return null;
    t = `${t.slice(0, -v4[1]!.length)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
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

/** An IP literal (IPv4 dotted, or IPv6 with or without brackets), or null for a name. */
export function parseIp(host: string): Parsed | null {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const four = parseIPv4(bare);
  if (four !== null) return { v6: false, bits: four };
  const six = bare.includes(':') ? parseIPv6(bare.replace(/%.*$/, '')) : null;
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
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];
const V6: readonly [string, number, string][] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['fe80::', 10, 'link-local'],
  ['fc00::', 7, 'private (unique local, cloud metadata)'],
  ['ff00::', 8, 'multicast'],
];
const inRange = (bits: bigint, base: bigint, prefix: number, width: number) => bits >> BigInt(width - prefix) === base >> BigInt(width - prefix);
const V4_RANGES = V4.map(([a, p, why]) => ({ base: parseIPv4(a)!, prefix: p, why }));
const V6_RANGES = V6.map(([a, p, why]) => ({ base: parseIPv6(a)!, prefix: p, why }));

/** Why an address is forbidden by the policy, or null. IPv4-mapped and NAT64 IPv6 addresses are judged by their IPv4. */
export function forbiddenAddress(ip: Parsed): string | null {
  if (!ip.v6) return V4_RANGES.find((r) => inRange(ip.bits, r.base, r.prefix, 32))?.why ?? null;
  const high96 = ip.bits >> 32n;
  if (high96 === 0xffffn || high96 === 0x64ff9b0000000000000000n) return forbiddenAddress({ v6: false, bits: ip.bits & 0xffffffffn });
  return V6_RANGES.find((r) => inRange(ip.bits, r.base, r.prefix, 128))?.why ?? null;
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

const normalHost = (host: string) => host.toLowerCase().replace(/\.$/, '');

export function addressAllowed(ip: Parsed, allow: EgressAllowList): boolean {
  return allow.ranges.some((r) => r.v6 === ip.v6 && inRange(ip.bits, r.bits, r.prefix, ip.v6 ? 128 : 32));
}

/** Why the policy refuses a resolved address for `host`, or null (an allow-listed host is trusted as it resolves). */
export function resolvedAddressProblem(host: string, address: string, allow: EgressAllowList): string | null {
  if (allow.hosts.has(normalHost(host))) return null;
  const ip = parseIp(address);
  if (ip === null) return 'an address that is not an IP';
  const why = forbiddenAddress(ip);
  return why !== null && !addressAllowed(ip, allow) ? why : null;
}

/**
 * Why the policy refuses a tenant URL's host as written (an IP literal in any spelling the URL parser accepts, or a
 * cluster-internal name), or null. Names that pass are checked again on every address they resolve to.
 */
export function urlEgressProblem(url: string, allow: EgressAllowList = NO_EGRESS_EXCEPTIONS): string | null {
  let host: string;
  try {
    // WHATWG URL parsing already turns 2130706433, 0177.0.0.1 and 0x7f.1 into 127.0.0.1.
    host = normalHost(new URL(url).hostname);
  } catch {
    return null; // not a URL: the payload schema reports it
  }
  if (allow.hosts.has(host)) return null;
  const ip = parseIp(host);
  const why = ip === null ? forbiddenName(host) : addressAllowed(ip, allow) ? null : forbiddenAddress(ip);
  return why === null ? null : `must not point at a ${why} address (the egress policy refuses it; an operator can allow it explicitly)`;
}

/** Parses `--egress-allow` entries: CIDRs (10.1.0.0/16, fd00::/8), bare IPs (a /32 or /128) and host names. */
export function parseEgressAllowList(entries: readonly string[]): EgressAllowList {
  const ranges: { bits: bigint; prefix: number; v6: boolean }[] = [];
  const hosts = new Set<string>();
  for (const raw of entries.flatMap((e) => e.split(',')).map((e) => e.trim()).filter((e) => e !== '')) {
    const [addr, prefixText] = raw.split('/') as [string, string | undefined];
    const ip = parseIp(addr);
    if (ip === null) {
      if (prefixText !== undefined || !/^[a-z0-9.-]+$/i.test(addr)) throw new RangeError(`egress allow-list entry ${JSON.stringify(raw)} is neither a CIDR, an IP nor a host name`);
      hosts.add(normalHost(addr));
      continue;
    }
    const width = ip.v6 ? 128 : 32;
    const prefix = prefixText === undefined ? width : Number(prefixText);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > width) throw new RangeError(`egress allow-list entry ${JSON.stringify(raw)} has an invalid prefix length`);
    ranges.push({ bits: ip.bits, prefix, v6: ip.v6 });
  }
  return { ranges, hosts };
}
