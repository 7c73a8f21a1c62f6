// A leader-only background loop (spend status, health status): one pass at a time, the first on start(), then
// every intervalMs; a pass still running when the timer fires is not started twice. stop() waits for it.
export interface PeriodicPass {
  start(): void;
  stop(): Promise<void>;
  /**
   * Asks for an extra pass within delayMs (an event that must not wait for the interval, e.g. a new credential
   * version). Requests coalesce; one that arrives during a pass runs right after it. No-op while stopped.
   */
  soon(delayMs?: number): void;
}

export function periodicPass(
  pass: () => Promise<void>,
  intervalMs: number,
  onError: (err: unknown) => void,
): PeriodicPass {
  let timer: NodeJS.Timeout | undefined;
  let extra: NodeJS.Timeout | undefined;
  let extraAt = 0;
  let running: Promise<void> | undefined;
  let again = false;
  // The interval skips a tick that finds a pass running; an extra pass asked for during one runs after it.
  const tick = (asked = false) => {
    if (running) {
      if (asked) again = true;
      return;
    }
    running = pass()
      .catch(onError)
      .finally(() => {
        running = undefined;
        if (again && timer) {
          again = false;
          tick();
        }
      });
  };
  return {
    start() {
      if (timer) return;
      tick();
      timer = setInterval(() => tick(), intervalMs);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      if (extra) clearTimeout(extra);
      timer = undefined;
      extra = undefined;
      again = false;
      await running;
    },
    soon(delayMs = 0) {
      if (!timer) return;
      // An earlier request replaces a later one: a pass asked for now never waits for one asked for in a second.
      if (extra && extraAt <= Date.now() + delayMs) return;
      if (extra) clearTimeout(extra);
      extraAt = Date.now() + delayMs;
      extra = setTimeout(() => {
        extra = undefined;
        tick(true);
      }, delayMs);
      extra.unref();
    },
  };
}
