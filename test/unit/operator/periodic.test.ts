// periodicPass: the leader's background loops (health, spend). `soon()` is how a compile asks the health writer for a
// pass now instead of at the next poll.
import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { periodicPass } from '../../../src/operator/periodic.ts';
import { advance, useFakeClock, useRealClock } from '../../support/fake-clock.ts';

describe('periodicPass', () => {
  // Time moves only when a test moves it: a loaded machine cannot run a timer late or a poll early.
  beforeEach(useFakeClock);
  afterEach(useRealClock);

  test('soon() runs an extra pass well before the interval, and requests in a burst coalesce into one', async () => {
    let passes = 0;
    const loop = periodicPass(
      async () => void passes++,
      60_000,
      () => undefined,
    );
    loop.start();
    await advance(5);
    expect(passes).toBe(1);
    for (let i = 0; i < 10; i++) loop.soon(10);
    await advance(9);
    expect(passes).toBe(1);
    await advance(1);
    expect(passes).toBe(2);
    await advance(100);
    expect(passes).toBe(2);
    await loop.stop();
  });

  test('an earlier soon() replaces a later one: a pass asked for now does not wait for one asked for later', async () => {
    let passes = 0;
    const loop = periodicPass(
      async () => void passes++,
      60_000,
      () => undefined,
    );
    loop.start();
    await advance(5);
    loop.soon(60_000);
    loop.soon(0);
    await advance(20);
    expect(passes).toBe(2);
    await loop.stop();
  });

  test('soon() during a running pass runs once more right after it; an interval tick during one is skipped', async () => {
    let passes = 0;
    let release: (() => void) | undefined;
    const loop = periodicPass(
      () => {
        passes++;
        return passes === 1 ? new Promise<void>((r) => (release = r)) : Promise.resolve();
      },
      15,
      () => undefined,
    );
    loop.start();
    await advance(50); // several interval ticks while the first pass hangs: none starts a second pass
    expect(passes).toBe(1);
    loop.soon();
    await advance(5);
    expect(passes).toBe(1);
    release!();
    await advance(5);
    expect(passes).toBeGreaterThanOrEqual(2);
    await loop.stop();
  });

  test('soon() is a no-op while stopped, and stop() cancels a pending extra pass', async () => {
    let passes = 0;
    const loop = periodicPass(
      async () => void passes++,
      60_000,
      () => undefined,
    );
    loop.soon();
    await advance(10);
    expect(passes).toBe(0);
    loop.start();
    await advance(5);
    loop.soon(20);
    await loop.stop();
    await advance(40);
    expect(passes).toBe(1);
  });
});
