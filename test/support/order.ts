// Tests assert order and outcome, never a stopwatch reading (speed belongs in bench/). A claim like "the change is
// compiled at once, not after the batch delay" becomes: it happened before a cap fired, where the cap is the trap
// the test guards against (the delay, timeout or period the behaviour must not wait for), started before the work,
// and far longer than the behaviour takes. Only a stall of about the cap on a loaded machine can fail it.

/** 'done' when `work` settles (either way) before a timer of `capMs`, started now, fires; else 'cap'. */
export async function beforeCap(work: Promise<unknown>, capMs: number): Promise<'done' | 'cap'> {
  let timer: NodeJS.Timeout | undefined;
  const cap = new Promise<'cap'>((resolve) => {
    timer = setTimeout(() => resolve('cap'), capMs);
  });
  const settled = work.then(() => 'done' as const, () => 'done' as const);
  try {
    return await Promise.race([settled, cap]);
  } finally {
    clearTimeout(timer);
  }
}
