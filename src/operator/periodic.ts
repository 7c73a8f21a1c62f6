// A leader-only background loop (spend status, health status): one pass at a time, the first on start(), then
// every intervalMs; a pass still running when the timer fires is not started twice. stop() waits for it.
export interface PeriodicPass {
  start(): void;
  stop(): Promise<void>;
}

export function periodicPass(pass: () => Promise<void>, intervalMs: number, onError: (err: unknown) => void): PeriodicPass {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const tick = () => {
    running ??= pass()
      .catch(onError)
      .finally(() => {
        running = undefined;
      });
  };
  return {
    start() {
      if (timer) return;
      tick();
      timer = setInterval(tick, intervalMs);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      await running;
    },
  };
}
