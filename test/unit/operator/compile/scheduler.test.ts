// When the compile pipeline runs (src/operator/compile/scheduler.ts): coalescing, growing batches while changes keep
// arriving, backoff after failures, holding for a reconcile backlog, flush.
import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { CompileScheduler } from '../../../../src/operator/compile/scheduler.ts';
import { advance, useFakeClock, useRealClock } from '../../../support/fake-clock.ts';

/** A scheduler over a counter of pending changes; each run takes them all, or fails while `failing`. */
function harness(
  opts: { coalesceMs?: number; maxBatchDelayMs?: number; backlog?: () => boolean; backlogDelayMs?: number } = {},
) {
  const state = { pending: 0, runs: 0, failing: false, refill: 0 };
  const s: CompileScheduler<number | undefined> = new CompileScheduler({
    ...opts,
    pending: () => state.pending > 0,
    run: async () => {
      state.runs++;
      const taken = state.pending;
      state.pending = state.refill;
      if (state.failing) {
        state.pending += taken;
        s.failed();
        return undefined;
      }
      s.succeeded(1);
      return state.runs;
    },
  });
  const mark = () => {
    state.pending++;
    s.schedule();
  };
  return { s, state, mark };
}

describe('CompileScheduler', () => {
  // Time moves only when a test moves it: a loaded machine cannot run a timer late or a poll early.
  beforeEach(useFakeClock);
  afterEach(useRealClock);

  test('changes in a burst coalesce into one run after coalesceMs', async () => {
    const { s, state, mark } = harness({ coalesceMs: 15 });
    s.start();
    for (let i = 0; i < 20; i++) mark();
    await advance(14);
    expect(state.runs).toBe(0);
    await advance(1);
    expect(state.runs).toBe(1);
    await advance(100);
    expect(state.runs).toBe(1);
    expect(state.pending).toBe(0);
    await s.stop();
  });

  test('nothing runs before start() or after stop()', async () => {
    const { s, state, mark } = harness({ coalesceMs: 5 });
    mark();
    await advance(20);
    expect(state.runs).toBe(0);
    s.start();
    mark();
    await s.stop();
    mark();
    await advance(20);
    expect(state.runs).toBe(0);
  });

  test('while changes keep arriving the wait doubles up to maxBatchDelayMs; an idle run resets it', async () => {
    const { s, state } = harness({ coalesceMs: 10, maxBatchDelayMs: 40 });
    s.start();
    expect(s.batchDelay()).toBe(10);
    state.refill = 1;
    state.pending = 1;
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      await s.drive();
      delays.push(s.batchDelay());
    }
    expect(delays).toEqual([20, 40, 40, 40]);
    state.refill = 0;
    await s.drive();
    expect(s.batchDelay()).toBe(10);
    await s.stop();
  });

  test('a failed run backs off (100 ms × 2^failures) and the changes stay pending', async () => {
    const { s, state, mark } = harness({ coalesceMs: 5 });
    s.start();
    state.failing = true;
    mark();
    await advance(5);
    expect(state.runs).toBe(1);
    expect(s.failures).toBe(1);
    // One failure: the retry comes 200 ms after the run, not a moment sooner.
    await advance(199);
    expect(state.runs).toBe(1);
    state.failing = false;
    await advance(1);
    expect(state.runs).toBe(2);
    expect(s.failures).toBe(0);
    expect(state.pending).toBe(0);
    await s.stop();
  });

  test('while the reconcilers are backed up the next run waits for the backlog to clear', async () => {
    let backlog = true;
    const { s, state } = harness({ coalesceMs: 5, backlog: () => backlog, backlogDelayMs: 10_000 });
    s.start();
    state.refill = 1;
    state.pending = 1;
    await s.drive();
    state.refill = 0;
    await advance(600);
    expect(state.runs).toBe(1);
    backlog = false;
    await advance(400);
    expect(state.runs).toBe(2);
    // The held run ended the batch: the next change waits only coalesceMs.
    expect(s.batchDelay()).toBe(5);
    await s.stop();
  });

  test('flush runs until nothing is pending and stops at a failure', async () => {
    const { s, state } = harness({ coalesceMs: 60_000 });
    s.start();
    expect(await s.flush(() => 7)).toBe(7);
    state.pending = 3;
    expect(await s.flush(() => undefined)).toBe(1);
    expect(state.pending).toBe(0);
    state.failing = true;
    state.pending = 1;
    expect(await s.flush(() => undefined)).toBeUndefined();
    expect(state.runs).toBe(2);
    expect(state.pending).toBe(1);
    await s.stop();
  });

  test('one run at a time: drive() during a run joins it', async () => {
    const { s, state } = harness({ coalesceMs: 5 });
    s.start();
    state.pending = 1;
    const a = s.drive();
    const b = s.drive();
    expect(a).toBe(b);
    await a;
    expect(state.runs).toBe(1);
    await s.stop();
  });
});
