// The delivery stream's pure parts (src/contract/delivery.ts): which objects a pod lacks, the signature, the
// never-backwards rule, and the line splitter. The generators attack: (1) the delta against a model of "send what
// is newer, remove only what this replica saw deleted at or after the held version", over random held/current/
// tombstone maps; (2) DeliveryState under random sequences of signed, forged, replayed and reordered objects and
// removals, against a model that keeps the highest verified version per object; (3) the splitter under every
// chunking and every line end (LF, CRLF, lone CR, a CRLF split across chunks), against a whole-buffer split, and
// with lines over the bound (an error, never a growing buffer).
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import {
  compareVersions,
  DeliveryError,
  type DeliveryKind,
  type DeliveryObject,
  type DeliveryRemoval,
  DeliveryState,
  deltaFor,
  filesDigest,
  LineSplitter,
  objectKey,
  parseDeliveryLine,
  signSubject,
} from '../../../src/contract/delivery.ts';
import type { Keyring } from '../../../src/contract/envelope.ts';
import { SourceRule } from '../../../src/gateway/delivered-routing.ts';
import { expectEqual, expectIs, propertyRuns } from '../../support/properties.ts';

const SEED = 42_0101;
const RUNS = 3000;

const ring: Keyring = { active: 'k1', keys: new Map([['k1', Buffer.alloc(32, 7)]]) };
const other: Keyring = { active: 'k1', keys: new Map([['k1', Buffer.alloc(32, 9)]]) };

function object(
  kind: DeliveryKind,
  name: string,
  version: string,
  files: Record<string, string>,
  signer: Keyring = ring,
): DeliveryObject {
  const digest = filesDigest(files);
  return {
    type: 'object',
    kind,
    name,
    version,
    digest,
    files,
    ...signSubject(signer, { kind, name, version, digest }),
  };
}
function removal(kind: DeliveryKind, name: string, version: string, signer: Keyring = ring): DeliveryRemoval {
  return { type: 'removed', kind, name, version, ...signSubject(signer, { kind, name, version, digest: '' }) };
}
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('compareVersions', () => {
  test('orders decimal versions as numbers, whatever their length', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 10n ** 30n }), fc.bigInt({ min: 1n, max: 10n ** 30n }), (a, b) => {
        expectIs(Math.sign(compareVersions(String(a), String(b))), a < b ? -1 : a > b ? 1 : 0);
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});

describe('deltaFor', () => {
  const versions = fc.dictionary(
    fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'),
    fc.integer({ min: 1, max: 20 }).map(String),
    { maxKeys: 6 },
  );
  test('sends exactly what is newer or not held, removes only what was seen deleted at or after the held version', () => {
    fc.assert(
      fc.property(versions, versions, versions, (held, current, tomb) => {
        for (const k of Object.keys(current)) delete tomb[k];
        const out = deltaFor(
          new Map(Object.entries(held)),
          new Map(Object.entries(current).map(([k, v]) => [k, { version: v }])),
          new Map(Object.entries(tomb)),
        );
        const send = Object.keys(current).filter((k) => held[k] === undefined || Number(current[k]) > Number(held[k]));
        const remove = Object.keys(held).filter(
          (k) => current[k] === undefined && tomb[k] !== undefined && Number(tomb[k]) >= Number(held[k]),
        );
        expectEqual(out.send.sort(), send.sort());
        expectEqual(out.remove.sort(), remove.sort());
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('a reconnecting pod that holds everything gets nothing; one that moved from a fresher replica keeps its newer object', () => {
    const current = new Map([
      ['ConfigMap/a', { version: '10' }],
      ['Secret/b', { version: '12' }],
    ]);
    expectEqual(
      deltaFor(
        new Map([
          ['ConfigMap/a', '10'],
          ['Secret/b', '12'],
        ]),
        current,
        new Map(),
      ),
      { send: [], remove: [] },
    );
    expectEqual(
      deltaFor(
        new Map([
          ['ConfigMap/a', '11'],
          ['Secret/b', '12'],
          ['Secret/new', '13'],
        ]),
        current,
        new Map(),
      ),
      { send: [], remove: [] },
    );
  });
});

describe('DeliveryState', () => {
  test('applies a signed newer object, refuses an older, a replayed-different, a forged, a tampered and an unknown-key one', () => {
    const s = new DeliveryState();
    const keys = ring.keys;
    expect(
      s.apply(object('ConfigMap', 'byok-routing-index', '5', { 'byok-routing-index.json': b64('{"v":5}') }), keys),
    ).toBeUndefined();
    expect(
      s.apply(object('ConfigMap', 'byok-routing-index', '4', { 'byok-routing-index.json': b64('{"v":4}') }), keys),
    ).toMatch(/older than the held 5 \(never backwards\)/);
    expect(
      s.apply(object('ConfigMap', 'byok-routing-index', '5', { 'byok-routing-index.json': b64('{"v":"x"}') }), keys),
    ).toMatch(/different content at the held version 5/);
    expect(
      s.apply(object('ConfigMap', 'byok-routing-index', '5', { 'byok-routing-index.json': b64('{"v":5}') }), keys),
    ).toBeUndefined();
    expect(
      s.apply(
        object('ConfigMap', 'byok-routing-index', '9', { 'byok-routing-index.json': b64('{"v":9}') }, other),
        keys,
      ),
    ).toMatch(/signature does not verify/);
    const tampered = {
      ...object('ConfigMap', 'byok-routing-index', '9', { 'byok-routing-index.json': b64('{"v":9}') }),
      files: { 'byok-routing-index.json': b64('{"v":666}') },
    };
    expect(s.apply(tampered, keys)).toMatch(/do not match the digest/);
    const relabelled = {
      ...object('ConfigMap', 'byok-routing-index', '9', { 'byok-routing-index.json': b64('{"v":9}') }),
      name: 'byok-routing-0',
    };
    expect(s.apply(relabelled, keys)).toMatch(/signature does not verify/);
    expect(s.apply({ ...object('Secret', 'byok-bundle-0', '3', { x: b64('e') }), kid: 'k2' }, keys)).toMatch(
      /key id k2, which this pod does not hold/,
    );
    expectIs(s.files('ConfigMap')['byok-routing-index.json']!.toString(), '{"v":5}');
    expect(s.apply(removal('ConfigMap', 'byok-routing-index', '4'), keys)).toMatch(/removal older/);
    expect(s.apply(removal('ConfigMap', 'byok-routing-index', '7'), keys)).toBeUndefined();
    expectIs(s.size, 0);
  });

  test('generated: the state holds, per object, the highest version among the verified items, never one that did not verify', () => {
    const item = fc.record({
      kind: fc.constantFrom<DeliveryKind>('ConfigMap', 'Secret'),
      name: fc.constantFrom('byok-routing-0', 'byok-routing-1', 'byok-bundle-0'),
      version: fc.integer({ min: 1, max: 12 }),
      content: fc.constantFrom('a', 'b'),
      forged: fc.boolean(),
      remove: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(item, { maxLength: 30 }), (items) => {
        const s = new DeliveryState();
        const model = new Map<string, { version: number; content: string }>();
        for (const it of items) {
          const signer = it.forged ? other : ring;
          const key = objectKey(it.kind, it.name);
          const have = model.get(key);
          // Content is a function of the version in a real cluster; `content` varying at one version is the replay attack.
          const files = { [`${it.name}.json`]: b64(`${it.version}:${it.content}`) };
          const refused = s.apply(
            it.remove
              ? removal(it.kind, it.name, String(it.version), signer)
              : object(it.kind, it.name, String(it.version), files, signer),
            ring.keys,
          );
          let expectRefused: boolean;
          if (it.forged) expectRefused = true;
          else if (it.remove) {
            expectRefused = have !== undefined && it.version < have.version;
            if (!expectRefused) model.delete(key);
          } else {
            expectRefused =
              have !== undefined &&
              (it.version < have.version || (it.version === have.version && it.content !== have.content));
            if (!expectRefused) model.set(key, { version: it.version, content: it.content });
          }
          expectIs(refused !== undefined, expectRefused);
        }
        expectEqual(
          new Map(s.held().map((h) => [objectKey(h.kind, h.name), Number(h.version)])),
          new Map([...model].map(([k, v]) => [k, v.version])),
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});

describe('parseDeliveryLine', () => {
  test('refuses file names that would escape or shadow the volume layout, bad versions and unknown kinds', () => {
    const good = object('Secret', 'byok-bundle-0', '3', { 'c0ffee00-0000-4000-8000-000000000000': b64('x') });
    expectEqual(parseDeliveryLine(JSON.stringify(good)), good);
    for (const name of ['..data', '../x', 'a/b', '.hidden', '']) {
      expect(() => parseDeliveryLine(JSON.stringify({ ...good, files: { [name]: b64('x') } }))).toThrow(DeliveryError);
    }
    expect(() => parseDeliveryLine(JSON.stringify({ ...good, version: '007' }))).toThrow(/invalid version/);
    expect(() => parseDeliveryLine(JSON.stringify({ ...good, kind: 'Pod' }))).toThrow(/unknown kind/);
    expect(() => parseDeliveryLine(JSON.stringify({ ...good, files: { a: 'not base64!' } }))).toThrow(/not base64/);
    expect(() => parseDeliveryLine(JSON.stringify({ ...good, files: { ['__proto__']: b64('x') } }))).toThrow(
      DeliveryError,
    );
    expect(() => parseDeliveryLine('{')).toThrow(/not JSON/);
  });
});

describe('LineSplitter', () => {
  const lineText = fc.stringMatching(/^[a-z{}":0-9 ]{0,20}$/);
  const ending = fc.constantFrom('\n', '\r\n', '\r');
  test('generated: every chunking and every line end gives the lines of a whole-buffer split', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(lineText, ending), { maxLength: 20 }),
        fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 10 }),
        (lines, cuts) => {
          const text = lines.map(([l, e]) => l + e).join('');
          const want = lines.map(([l]) => l).filter((l) => l !== '');
          const got: string[] = [];
          const splitter = new LineSplitter((line) => got.push(line.toString()), 1024);
          const bytes = Buffer.from(text);
          let at = 0;
          for (let i = 0; at < bytes.length; i++) {
            const n = cuts[i % cuts.length]!;
            splitter.push(bytes.subarray(at, at + n));
            at += n;
          }
          expectEqual(got, want);
          expectIs(splitter.pending, 0);
        },
      ),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('a line over the bound is an error before it is buffered whole; the buffer never exceeds the bound', () => {
    const splitter = new LineSplitter(() => undefined, 100);
    splitter.push(Buffer.alloc(60, 0x61));
    expectIs(splitter.pending, 60);
    expect(() => splitter.push(Buffer.alloc(60, 0x61))).toThrow(/longer than 100 bytes/);
  });
});

describe('SourceRule (the mount is the floor)', () => {
  test('mount until the stream loads; the stream while up; after a drop, the stream until the mount moves, then the mount until the stream loads again', () => {
    const rule = new SourceRule();
    expectIs(rule.pick(false), 'mount');
    rule.connection(true);
    expectIs(rule.pick(false), 'mount');
    rule.streamLoaded();
    expectIs(rule.pick(true), 'stream');
    // A mount swap while the stream is up changes nothing: the stream is at least as new.
    rule.mountReloaded();
    expectIs(rule.pick(true), 'stream');
    rule.connection(false);
    expectIs(rule.pick(true), 'stream');
    rule.mountReloaded();
    expectIs(rule.pick(true), 'mount');
    // Back up: the mount until the stream's next batch has loaded (what it held may be older than the mount).
    rule.connection(true);
    expectIs(rule.pick(true), 'mount');
    rule.streamLoaded();
    expectIs(rule.pick(true), 'stream');
  });
});
