// A clock the test controls: Jest's fake timers (setTimeout, setInterval, setImmediate, Date, performance.now), with
// process.nextTick and microtasks left real so that promises settle as they would. Time moves only when the test
// moves it, so a loaded machine cannot change what a test sees, and a test that waits a second of the code's time
// does not wait a second of the machine's.
import { jest } from '@jest/globals';

export function useFakeClock(): void {
  jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask'] });
}

export function useRealClock(): void {
  jest.useRealTimers();
}

/** Moves the clock by `ms`, running each timer due on the way and the promise callbacks between them. */
export async function advance(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
}

/** Moves the clock in steps of `stepMs` until `work` settles; fails once `capMs` of the clock passed first. */
export async function advanceUntil<T>(what: string, work: Promise<T>, capMs = 600_000, stepMs = 5): Promise<T> {
  let settled = false;
  const done = () => {
    settled = true;
  };
  work.then(done, done);
  for (let elapsed = 0; !settled; elapsed += stepMs) {
    if (elapsed >= capMs) throw new Error(`${what} did not settle within ${capMs} ms of the test's clock`);
    await jest.advanceTimersByTimeAsync(stepMs);
  }
  return work;
}
