// every parser of bytes a tenant or an upstream controls does constant work per byte and holds a bounded
// buffer. This generator attacks the SSE usage scanner (src/gateway/sse-scanner.ts) with streams in every framing the
// specification allows (lines ending in LF, CRLF, CR, or a mix), cut anywhere (inside a UTF-8 sequence, between a CR
// and its LF), with comments and other fields, usage events whose JSON spans several `data:` lines, and giant events
// past the scanner's cap. It checks that the usage read is the one a WHATWG parser would dispatch, the same in every
// framing and chunking; that the floor's byte counts are exact; and that the bytes the scanner looks at stay within
// a constant times the bytes received.
import { describe, test } from '@jest/globals';
import fc from 'fast-check';
import { SseUsageScanner } from '../../../src/gateway/sse-scanner.ts';
import { expectEqual, expectIs, propertyRuns } from '../../support/properties.ts';

const SEED = 41_0002;
const RUNS = 3000;
/** The cap the scanner is built with here: giant events are drawn well past it, ordinary ones well under it. */
const CAP = 1024;
/** Bytes examined per byte received, at most (two searches, one copy of a data line, a copy, a search and a parse of an event's data). */
const WORK_PER_BYTE = 8;

type Terminator = '\n' | '\r\n' | '\r';
type Field =
  | { kind: 'data'; json: unknown; pretty: boolean }
  | { kind: 'text'; line: string }
  | { kind: 'comment'; text: string }
  | { kind: 'other'; name: string; value: string }
  | { kind: 'giant'; size: number; withUsage: boolean };
interface Stream {
  events: Field[][];
  framing: Terminator | 'mixed';
  /** Per line, when mixed. */
  picks: number[];
  cuts: number[];
  /** Also cut right after every CR (its LF, if any, comes in the next chunk). */
  cutAfterCr: boolean;
  noSpaceAfterColon: boolean;
}

const usageObj = fc.record({ prompt_tokens: fc.nat({ max: 100_000 }), completion_tokens: fc.nat({ max: 100_000 }) });
// Text without CR or LF (a value never holds them), with non-ASCII so chunk cuts land inside UTF-8 sequences.
const lineText = fc
  .string({
    unit: fc.oneof(
      fc.constantFrom('a', ' ', ':', '{', '"', 'é', '人', '😀', '\t'),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }),
    ),
    maxLength: 40,
  })
  .map((s) => s.replace(/[\r\n]/g, ''));
const field: fc.Arbitrary<Field> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('data' as const),
      json: fc.oneof(
        fc.record({ choices: fc.constant([]), usage: usageObj }),
        fc.record({ choices: fc.array(fc.record({ delta: fc.record({ content: lineText }) }), { maxLength: 2 }) }),
      ),
      pretty: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('text' as const), line: lineText }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('comment' as const), text: lineText }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('other' as const),
      name: fc.constantFrom('event', 'id', 'retry', 'dat', 'datum', 'Data'),
      value: lineText,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('giant' as const),
      size: fc.integer({ min: 2 * CAP, max: 6 * CAP }),
      withUsage: fc.boolean(),
    }),
  },
);
const streamArb: fc.Arbitrary<Stream> = fc.record({
  events: fc.array(fc.array(field, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 12 }),
  framing: fc.constantFrom('\n' as const, '\r\n' as const, '\r' as const, 'mixed' as const),
  picks: fc.array(fc.nat({ max: 2 }), { minLength: 64, maxLength: 64 }),
  cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 16 }),
  cutAfterCr: fc.boolean(),
  noSpaceAfterColon: fc.boolean(),
});

/** An event's lines, without terminators. */
function linesOf(event: Field[], s: Stream): string[] {
  const sep = s.noSpaceAfterColon ? ':' : ': ';
  return event.flatMap((f) => {
    switch (f.kind) {
      // Pretty-printed JSON spans several data lines, which SSE joins with LF: the JSON is whole again.
      case 'data':
        return JSON.stringify(f.json, null, f.pretty ? 2 : undefined)
          .split('\n')
          .map((l) => `data${sep}${l}`);
      case 'text':
        return [`data${sep}${f.line}`];
      case 'comment':
        return [`:${f.text}`];
      case 'other':
        return [`${f.name}${sep}${f.value}`];
      case 'giant': {
        const body = f.withUsage
          ? JSON.stringify({ usage: { prompt_tokens: 999_999, completion_tokens: 999_999 }, pad: 'x'.repeat(f.size) })
          : 'y'.repeat(f.size);
        return [`data${sep}${body}`];
      }
    }
  });
}

/** The stream's events as text in its framing; a CR never precedes an LF-ended blank line (that would read as one CRLF). */
function renderEvents(s: Stream): string[] {
  const out: string[] = [];
  let k = 0;
  let prev: Terminator | undefined;
  const term = (blank: boolean): Terminator => {
    let t: Terminator =
      s.framing === 'mixed' ? (['\n', '\r\n', '\r'] as const)[s.picks[k++ % s.picks.length]!]! : s.framing;
    if (blank && prev === '\r' && t === '\n') t = '\r\n';
    prev = t;
    return t;
  };
  for (const event of s.events) {
    let text = '';
    for (const line of linesOf(event, s)) text += line + term(false);
    out.push(text + term(true));
  }
  return out;
}
const render = (s: Stream) => renderEvents(s).join('');

/** What a WHATWG parser dispatches last with a usage object: read from the events as generated, not from the bytes. */
function expectedUsage(s: Stream): unknown {
  let usage: unknown;
  for (const event of s.events) {
    // The scanner's cap is on an event's data: one giant field puts the whole event past it.
    if (event.some((f) => f.kind === 'giant')) continue;
    const data = linesOf(event, s)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''))
      .join('\n');
    if (!event.some((f) => f.kind === 'data' || f.kind === 'text')) continue;
    try {
      const v = JSON.parse(data) as { usage?: unknown } | null;
      if (typeof v === 'object' && v !== null && v.usage !== undefined && v.usage !== null && data.includes('"usage"'))
        usage = v.usage;
    } catch {
      // Not JSON: no usage.
    }
  }
  return usage;
}

function chunks(text: string, s: Stream): Buffer[] {
  const bytes = Buffer.from(text, 'utf8');
  const at = new Set(s.cuts.map((f) => Math.floor(f * bytes.length)));
  if (s.cutAfterCr) for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x0d) at.add(i + 1);
  const out: Buffer[] = [];
  let from = 0;
  for (const to of [...at, bytes.length].sort((a, b) => a - b)) {
    out.push(bytes.subarray(from, to));
    from = to;
  }
  return out;
}

function scan(parts: Buffer[]) {
  const scanner = new SseUsageScanner(CAP);
  for (const p of parts) scanner.scan(p);
  const atBoundary = scanner.atBoundary;
  const usage = scanner.finish();
  return {
    usage,
    bytes: scanner.bytes,
    excessBytes: scanner.excessBytes,
    dataEvents: scanner.dataEvents,
    examined: scanner.examined,
    atBoundary,
  };
}

describe('the SSE scanner reads every framing in linear work (properties, seed 410002)', () => {
  test('usage is what a WHATWG parser dispatches, the same in every framing and chunking', () => {
    fc.assert(
      fc.property(streamArb, (s) => {
        const text = render(s);
        const got = scan(chunks(text, s));
        const lf = scan([Buffer.from(render({ ...s, framing: '\n' }))]);
        expectEqual(got.usage, expectedUsage(s));
        expectEqual(got.usage, lf.usage);
        // Every event ends with its blank line: the closing comment may follow without a separator.
        expectIs(got.atBoundary, true);
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test("the floor's byte counts are exact: every byte, each event's bytes past 1 KiB, the events with data", () => {
    fc.assert(
      fc.property(streamArb, (s) => {
        const text = render(s);
        const got = scan(chunks(text, s));
        expectIs(got.bytes, Buffer.byteLength(text));
        expectIs(
          got.dataEvents,
          s.events.filter((e) => e.some((f) => f.kind === 'data' || f.kind === 'text' || f.kind === 'giant')).length,
        );
        // Each event's bytes: its lines and their terminators, its blank line (a CRLF counts both bytes).
        expectIs(
          got.excessBytes,
          renderEvents(s).reduce((sum, e) => sum + Math.max(0, Buffer.byteLength(e) - 1024), 0),
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('the bytes examined stay within a constant times the bytes received, however the stream is framed and cut', () => {
    fc.assert(
      fc.property(streamArb, (s) => {
        const text = render(s);
        const got = scan(chunks(text, s));
        expectEqual(
          { examined: got.examined, within: got.examined <= WORK_PER_BYTE * got.bytes + 64 },
          {
            examined: got.examined,
            within: true,
          },
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('one stream of 4 MiB in each framing, as one event or many, in 64 KiB reads: linear work, usage found', () => {
    const usage = { prompt_tokens: 10, completion_tokens: 20 };
    const event = (t: string) =>
      `data: ${JSON.stringify({ choices: [{ delta: { content: 'word '.repeat(20) } }] })}${t}${t}`;
    const tail = (t: string) => `data: ${JSON.stringify({ choices: [], usage })}${t}${t}data: [DONE]${t}${t}`;
    const MiB4 = 4 * 1024 * 1024;
    const bodies = {
      lf: event('\n').repeat(Math.ceil(MiB4 / event('\n').length)) + tail('\n'),
      crlf: event('\r\n').repeat(Math.ceil(MiB4 / event('\r\n').length)) + tail('\r\n'),
      cr: event('\r').repeat(Math.ceil(MiB4 / event('\r').length)) + tail('\r'),
      giant: `data: ${'z'.repeat(MiB4)}\r\n\r\n${tail('\r\n')}`,
      multiline: `${'data: {"choices":[{"delta":{"content":"x"}}],\n'.repeat(MiB4 / 48)}data: "usage":${JSON.stringify(usage)}}\n\n`,
    };
    for (const [name, body] of Object.entries(bodies)) {
      const bytes = Buffer.from(body);
      const scanner = new SseUsageScanner();
      for (let i = 0; i < bytes.length; i += 65_536) scanner.scan(bytes.subarray(i, i + 65_536));
      const reported = scanner.finish();
      // A multi-line event of 4 MiB is past the 1 MiB cap: counted toward the floor, its usage not read.
      expectEqual(
        { name, reported, linear: scanner.examined <= WORK_PER_BYTE * bytes.length },
        {
          name,
          reported: name === 'multiline' ? undefined : usage,
          linear: true,
        },
      );
    }
  });
});

describe('SSE parsing details', () => {
  const usageOf = (...parts: string[]) => {
    const s = new SseUsageScanner();
    for (const p of parts) s.scan(p);
    return s.finish();
  };
  const u = '{"usage":{"prompt_tokens":1,"completion_tokens":2}}';

  test('a CR at the end of one read and its LF at the start of the next are one line end', () => {
    expectEqual(usageOf(`data: ${u}\r`, '\n\r', '\n'), { prompt_tokens: 1, completion_tokens: 2 });
    // CR then CR: a blank line; the event is dispatched before the next read.
    const s = new SseUsageScanner();
    s.scan(`data: ${u}\r\r`);
    expectEqual(s.reported, { prompt_tokens: 1, completion_tokens: 2 });
    expectIs(s.atBoundary, true);
  });

  test('`data:` without a space, a BOM, and one JSON object over three data lines', () => {
    expectEqual(usageOf(`\ufeffdata:${u}\n\n`), { prompt_tokens: 1, completion_tokens: 2 });
    expectEqual(usageOf('data: {"usage":\ndata: {"prompt_tokens":3,\ndata: "completion_tokens":4}}\n\n'), {
      prompt_tokens: 3,
      completion_tokens: 4,
    });
  });

  test('a stream cut mid-line is not at an event boundary; a finished event is', () => {
    const s = new SseUsageScanner();
    s.scan('data: {"a":');
    expectIs(s.atBoundary, false);
    s.scan('1}\n');
    expectIs(s.atBoundary, false);
    s.scan('\n');
    expectIs(s.atBoundary, true);
  });

  test('a plain JSON body answered to stream: true is read whole, within the cap', () => {
    expectEqual(usageOf('{"choices":[],\n\n', u.slice(1)), { prompt_tokens: 1, completion_tokens: 2 });
    const s = new SseUsageScanner(64);
    s.scan(`{"pad":"${'x'.repeat(100)}","usage":{"prompt_tokens":1,"completion_tokens":2}}`);
    expectEqual([s.finish(), s.plainJson], [undefined, false]);
  });
});
