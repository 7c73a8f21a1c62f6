import { describe, expect, it } from '@jest/globals';
import { directAccessLog } from '../../../src/gateway/access-log.ts';
import { createLogger } from '../../../src/operator/logger.ts';
import { BATCH_LIMIT, TurnBatchedDestination } from '../../../src/operator/turn-batched-destination.ts';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function recorder() {
  const writes: string[] = [];
  return { writes, target: { write: (s: string) => void writes.push(s) } };
}

describe('TurnBatchedDestination', () => {
  it('writes the lines of one turn in one write, in order, once the turn is over', async () => {
    const { writes, target } = recorder();
    const d = new TurnBatchedDestination(target, { flushOnExit: false });
    d.write('a\n');
    d.write('b\n');
    d.write('c\n');
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toEqual(['a\nb\nc\n']);
    d.write('d\n');
    await nextTurn();
    expect(writes).toEqual(['a\nb\nc\n', 'd\n']);
  });

  it('writes at once when a batch reaches its limit, keeping the order with what follows', async () => {
    const { writes, target } = recorder();
    const d = new TurnBatchedDestination(target, { flushOnExit: false });
    const big = `${'x'.repeat(BATCH_LIMIT)}\n`;
    d.write('first\n');
    d.write(big);
    expect(writes).toEqual([`first\n${big}`]);
    d.write('after\n');
    await nextTurn();
    expect(writes).toEqual([`first\n${big}`, 'after\n']);
  });

  it("hands what waits to pino's flush, and calls its callback", () => {
    const { writes, target } = recorder();
    const d = new TurnBatchedDestination(target, { flushOnExit: false });
    const log = createLogger({ level: 'info', redact: false, destination: d }).child({ component: 'gateway' });
    log.info({ n: 1 }, 'one');
    directAccessLog(log).write({
      generationId: 'gen-1',
      account: 'acme',
      apiKeyHash: 'ab'.repeat(32),
      model: 'm',
      status: 200,
      stream: false,
      streamError: undefined,
      providerResponses: [],
      durationMs: 1,
      overheadMs: 0.5,
    });
    let called = false;
    log.flush(() => (called = true));
    expect(called).toBe(true);
    expect(writes).toHaveLength(1);
    const lines = writes[0]!
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { msg: string });
    expect(lines.map((l) => l.msg)).toEqual(['one', 'chat completion']);
  });
});
