import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import type { DestinationStream } from 'pino';
import { type AccessLine, directAccessLog, pinoAccessLog } from '../../../src/gateway/access-log.ts';
import { createLogger } from '../../../src/operator/logger.ts';

/** A logger as the CLI builds the gateway's (createLogger, no redaction, child with component), writing into lines. */
function capture(level = 'info') {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString('utf8'));
      cb();
    },
  });
  // pino's sync write path needs a `write` that returns; a Writable's does.
  const log = createLogger({ level, redact: false, destination: destination as unknown as DestinationStream }).child({
    component: 'gateway',
  });
  return { log, lines };
}

const withoutTime = (line: string) => line.replace(/"time":\d+/, '"time":0');

const LINES: AccessLine[] = [
  {
    generationId: 'gen-0001',
    account: 'acme',
    apiKeyHash: 'ab'.repeat(32),
    model: 'openai/gpt-4o',
    status: 200,
    stream: false,
    streamError: undefined,
    providerResponses: [{ provider: 'openai', endpoint_id: 'openai', credential: 'c1', status: 200, latency_ms: 12.3 }],
    durationMs: 14.26,
    overheadMs: 1.234,
  },
  {
    // Everything a tenant or an upstream controls that reaches the line, with characters JSON must escape.
    generationId: 'gen-0002',
    account: 'acme',
    apiKeyHash: 'cd'.repeat(32),
    model: 'x"}\n{"level":60,"msg":"forged\u2028\u0000',
    status: 502,
    stream: true,
    streamError: 'the upstream stream broke: "\\"\n',
    providerResponses: [
      {
        provider: 'openai',
        endpoint_id: 'e"1',
        credential: 'shared',
        status: null,
        latency_ms: 0,
        error: 'upstream unreachable\r\n',
      },
    ],
    durationMs: 0.04,
    overheadMs: 0,
  },
  {
    generationId: 'gen-0003',
    account: 'a',
    apiKeyHash: '',
    model: '',
    status: 402,
    stream: false,
    streamError: '',
    providerResponses: [],
    durationMs: 1e-7,
    overheadMs: 123456.789,
  },
];

describe('the access line', () => {
  it('is byte for byte the line pino writes for the same fields (time aside)', () => {
    for (const line of LINES) {
      const viaPino = capture();
      const direct = capture();
      pinoAccessLog(viaPino.log).write(line);
      directAccessLog(direct.log).write(line);
      expect(direct.lines).toHaveLength(1);
      expect(withoutTime(direct.lines[0]!)).toBe(withoutTime(viaPino.lines[0]!));
      // One JSON object per line: nothing a tenant sends can start a second one.
      expect(direct.lines[0]!.endsWith('}\n')).toBe(true);
      expect(direct.lines[0]!.slice(0, -1)).not.toContain('\n');
      expect(JSON.parse(direct.lines[0]!)).toMatchObject({
        level: 30,
        component: 'gateway',
        msg: 'chat completion',
        generation_id: line.generationId,
        model: line.model,
      });
    }
  });

  it('follows the level: nothing below warn when the logger is at warn', () => {
    const { log, lines } = capture('warn');
    directAccessLog(log).write(LINES[0]!);
    expect(lines).toEqual([]);
  });
});
