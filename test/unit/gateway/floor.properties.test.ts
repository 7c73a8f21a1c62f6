// the floor under a tenant-chosen upstream's count comes from the bytes relayed to the client and the
// bytes forwarded to the upstream, never from the fields a client is expected to read. This generator attacks the
// floor the way a tenant's own endpoint (reporting usage 0/0, absent or deflated) can: the same content placed in any
// field of a message or delta, in a content part of any type, in a field beside `choices`, written in whitespace code
// points or \u escapes, buffered or streamed in events of any size whose JSON spans several `data:` lines in any
// framing; and prompts that carry their content in messages, parts of any type, tools, response_format or any other
// field. The oracle is the documented floor (docs/ledger.md, "The floor"), computed here from the wire bytes.
import { describe, test } from '@jest/globals';
import fc from 'fast-check';
import { SseUsageScanner } from '../../../src/gateway/sse-scanner.ts';
import {
  bodyFloorTokens,
  type CostFields,
  costFields,
  meteredUsage,
  promptFloorTokens,
  streamFloorTokens,
  usageBounds,
} from '../../../src/gateway/usage.ts';
import { expectEqual, propertyRuns } from '../../support/properties.ts';

const SEED = 41_0003;
const RUNS = 3000;

// ---- The documented floor, as the oracle reads it. -----------------------------------------------------------------
const BYTES_PER_TOKEN = 16;
const FRAMING = 1024;
const utf8 = (s: string) => Buffer.byteLength(s, 'utf8');
const tokens = (bytes: number) => Math.ceil(Math.max(0, bytes) / BYTES_PER_TOKEN);
/** A buffered answer: its bytes less 1 KiB and 1 KiB per choice. */
const bodyFloor = (bytes: number, n: number) => tokens(bytes - FRAMING - FRAMING * n);
/** A stream: each event's bytes past 1 KiB, and one token per data event past 2n + 3. */
const streamFloor = (events: string[], n: number) =>
  Math.max(tokens(events.reduce((s, e) => s + Math.max(0, utf8(e) - FRAMING), 0)), events.length - (2 * n + 3));
/** A prompt: the forwarded body's bytes less 1 KiB. */
const promptFloor = (forwarded: string) => tokens(utf8(forwarded) - FRAMING);

// ---- Content, where it goes, how it is written. --------------------------------------------------------------------
/** The 25 code points JavaScript's \s matches: a floor that skips them meters such content at nothing. */
const SPACES = [
  ...'\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff',
];
const content = fc.oneof(
  fc
    .array(fc.constantFrom('the', 'clocks', 'were', 'striking', 'thirteen,', 'Winston'), {
      minLength: 40,
      maxLength: 300,
    })
    .map((w) => w.join(' ')),
  fc.array(fc.constantFrom(...SPACES), { minLength: 200, maxLength: 1500 }).map((a) => a.join('')),
  fc.string({
    unit: fc.integer({ min: 0x4e00, max: 0x9fff }).map((cp) => String.fromCodePoint(cp)),
    minLength: 100,
    maxLength: 600,
  }),
  fc.integer({ min: 200, max: 1500 }).map((k) => '-'.repeat(k)),
);
type Place = 'content' | 'part' | 'beside' | 'tool_call' | 'reasoning' | 'field';
type Encoding = 'plain' | 'escape-non-ascii' | 'escape-all';
interface Delivery {
  text: string;
  n: number;
  place: Place;
  partType: string;
  fieldName: string;
  encoding: Encoding;
  stream: false | { piece: number; linesPerEvent: number; terminator: '\n' | '\r\n' | '\r' };
  usage: 'zero' | 'absent' | 'deflated';
}
const delivery: fc.Arbitrary<Delivery> = fc.record({
  text: content,
  n: fc.integer({ min: 1, max: 3 }),
  place: fc.constantFrom<Place>('content', 'part', 'beside', 'tool_call', 'reasoning', 'field'),
  partType: fc.constantFrom('text', 'output_json', 'output_text', 'image', 'x-anything'),
  fieldName: fc.constantFrom('text', 'json', 'value', 'annotations', 'zz'),
  encoding: fc.constantFrom<Encoding>('plain', 'escape-non-ascii', 'escape-all'),
  stream: fc.oneof(
    fc.constant(false as const),
    fc.record({
      piece: fc.constantFrom(1, 8, 64, 700, 2000),
      linesPerEvent: fc.integer({ min: 1, max: 3 }),
      terminator: fc.constantFrom('\n' as const, '\r\n' as const, '\r' as const),
    }),
  ),
  usage: fc.constantFrom('zero' as const, 'absent' as const, 'deflated' as const),
});

/** JSON text with the strings written as the encoding says (JSON.parse reads all three the same). */
function serialize(value: unknown, encoding: Encoding): string {
  const json = JSON.stringify(value);
  if (encoding === 'plain') return json;
  const hex = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  // Inside string literals only: every char (escape-all) or every non-ASCII or whitespace char.
  return json.replace(/"(?:[^"\\]|\\.)*"/g, (lit) => {
    const raw = JSON.parse(lit) as string;
    let out = '"';
    for (const ch of raw) {
      for (let i = 0; i < ch.length; i++) {
        const c = ch[i]!;
        out +=
          encoding === 'escape-all' || c.charCodeAt(0) > 0x7e || c.charCodeAt(0) <= 0x20
            ? hex(c)
            : c === '"' || c === '\\'
              ? `\\${c}`
              : c;
      }
    }
    return `${out}"`;
  });
}

/** One choice's message or delta carrying `text` where the delivery puts it. */
function carrier(d: Delivery, text: string): Record<string, unknown> {
  switch (d.place) {
    case 'content':
      return { role: 'assistant', content: text };
    case 'part':
      return { role: 'assistant', content: [{ type: d.partType, [d.fieldName]: text }] };
    case 'tool_call':
      return {
        role: 'assistant',
        tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: text } }],
      };
    case 'reasoning':
      return { role: 'assistant', reasoning_content: text };
    case 'field':
      return { role: 'assistant', [d.fieldName]: { nested: [text] } };
    case 'beside':
      return { role: 'assistant', content: '' };
  }
}
const usageOf = (d: Delivery) =>
  d.usage === 'zero'
    ? { prompt_tokens: 0, completion_tokens: 0 }
    : d.usage === 'deflated'
      ? { prompt_tokens: 1, completion_tokens: 1 }
      : undefined;

function bufferedText(d: Delivery): string {
  const choices = Array.from({ length: d.n }, (_, index) => ({
    index,
    message: carrier(d, d.place === 'beside' ? '' : d.text),
    finish_reason: 'stop',
  }));
  const usage = usageOf(d);
  return serialize(
    {
      id: 'chatcmpl-x',
      object: 'chat.completion',
      choices,
      ...(d.place === 'beside' ? { [d.fieldName]: d.text } : {}),
      ...(usage ? { usage } : {}),
    },
    d.encoding,
  );
}

/** The stream's events: the content cut into pieces per choice, each event's JSON over 1-3 data lines. */
function streamEvents(d: Delivery, s: Exclude<Delivery['stream'], false>): string[] {
  const cps = [...d.text];
  const objects: unknown[] = [];
  for (let index = 0; index < d.n; index++) {
    for (let i = 0; i < cps.length; i += s.piece) {
      const piece = cps.slice(i, i + s.piece).join('');
      objects.push(
        d.place === 'beside'
          ? { choices: [{ index, delta: {} }], [d.fieldName]: piece }
          : { choices: [{ index, delta: carrier(d, piece) }] },
      );
    }
  }
  const usage = usageOf(d);
  if (usage) objects.push({ choices: [], usage });
  const t = s.terminator;
  const events = objects.map((o) => {
    // Split the JSON text at commas between members: SSE joins the data lines with LF, which JSON reads as whitespace.
    const json = serialize(o, d.encoding);
    const cuts = [...json.matchAll(/,"/g)].map((m) => m.index);
    const at = cuts.slice(0, s.linesPerEvent - 1);
    const lines: string[] = [];
    let from = 0;
    for (const c of at) {
      lines.push(json.slice(from, c + 1));
      from = c + 1;
    }
    lines.push(json.slice(from));
    return lines.map((l) => `data: ${l}${t}`).join('') + t;
  });
  events.push(`data: [DONE]${t}${t}`);
  return events;
}

// ---- The code under test, called as src/gateway/completions.ts calls it for a tenant upstream. ---------------------
function fieldsOf(body: Record<string, unknown>): CostFields {
  const f = costFields(body);
  if ('error' in f) throw new Error(f.error);
  return f;
}
const NO_LIMITS = { contextLength: null, maxOutputTokens: null };
const REQUEST = { messages: [{ role: 'user', content: 'hi' }] };

function meterCompletion(d: Delivery): { metered: number; floor: number } {
  const body = { ...REQUEST, n: d.n };
  const cost = fieldsOf(body);
  const bounds = usageBounds(NO_LIMITS, cost, utf8(JSON.stringify(body)));
  const seen = (responseBytes: number, floor: number) => ({
    requestBytes: utf8(JSON.stringify(body)),
    responseBytes,
    minPromptTokens: promptFloorTokens(utf8(JSON.stringify(body)), cost),
    minCompletionTokens: floor,
  });
  if (d.stream === false) {
    const text = bufferedText(d);
    const parsed = JSON.parse(text) as { usage?: unknown };
    const m = meteredUsage(parsed.usage, bounds, 'tenant', seen(utf8(text), bodyFloorTokens(utf8(text), cost)));
    return { metered: m.completionTokens, floor: bodyFloor(utf8(text), d.n) };
  }
  const events = streamEvents(d, d.stream);
  const bytes = Buffer.from(events.join(''));
  const scanner = new SseUsageScanner();
  // Reads of 1,000 bytes: a CR and its LF land in different reads now and then.
  for (let i = 0; i < bytes.length; i += 1000) scanner.scan(bytes.subarray(i, i + 1000));
  const reported = scanner.finish();
  const m = meteredUsage(reported, bounds, 'tenant', seen(bytes.length, streamFloorTokens(scanner, cost)));
  return { metered: m.completionTokens, floor: streamFloor(events, d.n) };
}

describe('the floor counts the bytes relayed, wherever the content is (properties, seed 410003)', () => {
  test('an answer is metered at least the documented floor of the bytes relayed, in any field, part type, encoding or framing', () => {
    fc.assert(
      fc.property(delivery, (d) => {
        const { metered, floor } = meterCompletion(d);
        const label = `${d.place}/${d.partType}/${d.fieldName} ${d.encoding} ${d.stream === false ? 'buffered' : `stream piece=${d.stream.piece} lines=${d.stream.linesPerEvent} ${JSON.stringify(d.stream.terminator)}`} usage=${d.usage} n=${d.n}`;
        expectEqual({ label, metered, atLeastFloor: metered >= floor }, { label, metered, atLeastFloor: true });
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('a prompt is metered at least the documented floor of the whole forwarded body, in any field', () => {
    const prompt = fc.record({
      text: content,
      place: fc.constantFrom('message', 'part', 'tools', 'response_format', 'top-level'),
      partType: fc.constantFrom('text', 'input_text', 'x-anything'),
      encoding: fc.constantFrom<Encoding>('plain', 'escape-non-ascii', 'escape-all'),
    });
    fc.assert(
      fc.property(prompt, (p) => {
        const messages =
          p.place === 'message'
            ? [{ role: 'user', content: p.text }]
            : p.place === 'part'
              ? [{ role: 'user', content: [{ type: p.partType, text: p.text }] }]
              : [{ role: 'user', content: 'hi' }];
        const extra =
          p.place === 'tools'
            ? {
                tools: [
                  { type: 'function', function: { name: 'f', description: p.text, parameters: { type: 'object' } } },
                ],
              }
            : p.place === 'response_format'
              ? {
                  response_format: { type: 'json_schema', json_schema: { name: 's', schema: { description: p.text } } },
                }
              : p.place === 'top-level'
                ? { context_blob: p.text }
                : {};
        // What the client sends, in its encoding; what the gateway forwards is that body parsed, without model.
        const clientText = serialize({ model: 'azure/dep', messages, ...extra }, p.encoding);
        const { model: _model, ...forward } = JSON.parse(clientText) as Record<string, unknown>;
        const forwarded = JSON.stringify(forward);
        const cost = fieldsOf(forward);
        const bounds = usageBounds(NO_LIMITS, cost, utf8(clientText));
        const m = meteredUsage({ prompt_tokens: 0, completion_tokens: 0 }, bounds, 'tenant', {
          requestBytes: utf8(clientText),
          responseBytes: 10,
          minPromptTokens: promptFloorTokens(utf8(forwarded), cost),
          minCompletionTokens: 0,
        });
        const floor = promptFloor(forwarded);
        expectEqual(
          { place: p.place, metered: m.promptTokens, atLeastFloor: m.promptTokens >= floor, floor },
          {
            place: p.place,
            metered: m.promptTokens,
            atLeastFloor: true,
            floor,
          },
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test("the issue's cases: 8,000 characters metered the same order of magnitude wherever they are", () => {
    const text = 'It was a bright cold day in April. '.repeat(229).slice(0, 8000);
    const whitespace = SPACES.join('').repeat(320).slice(0, 8000);
    const base: Delivery = {
      text,
      n: 1,
      place: 'content',
      partType: 'text',
      fieldName: 'text',
      encoding: 'plain',
      stream: false,
      usage: 'zero',
    };
    const cases: Delivery[] = [
      base,
      { ...base, text: whitespace },
      { ...base, place: 'part', partType: 'output_json', fieldName: 'json' },
      { ...base, place: 'beside', fieldName: 'annotations' },
      { ...base, stream: { piece: 4000, linesPerEvent: 2, terminator: '\n' } },
    ];
    for (const d of cases) {
      const { metered } = meterCompletion(d);
      // 8,000 bytes or more past 2 KiB of framing allowance, at 16 bytes per token.
      expectEqual({ place: d.place, metered, atLeast: metered >= 370 }, { place: d.place, metered, atLeast: true });
    }
  });
});
