// A log destination that gathers the lines written during one turn of the event loop and hands them to the
// underlying destination in one write when the turn's I/O callbacks are done (setImmediate). Under load many
// requests finish in one turn: one write(2) for all their lines instead of one each. Order is kept; a line is
// held at most until the end of its turn (or until BATCH_LIMIT bytes wait), and whatever waits is written before
// the process exits, an uncaught exception included (process 'exit').
import type { DestinationStream } from 'pino';

/** Past this many UTF-16 units waiting, the batch is written at once: a burst never holds much memory. */
export const BATCH_LIMIT = 64 * 1024;

export interface SyncDestination {
  write(data: string): unknown;
}

export class TurnBatchedDestination implements DestinationStream {
  private pending = '';
  private scheduled = false;
  private readonly target: SyncDestination;

  /** `target` writes synchronously (sonic-boom with `sync: true`), so a flush has left the process when it returns. */
  constructor(target: SyncDestination, opts: { flushOnExit?: boolean } = {}) {
    this.target = target;
    if (opts.flushOnExit !== false) process.on('exit', () => this.flush());
  }

  write(line: string): void {
    this.pending += line;
    if (this.pending.length >= BATCH_LIMIT) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(flushTurn, this);
    }
  }

  /** Writes what waits now (pino's `logger.flush(cb)` calls this with its callback). */
  flush(done?: (err?: Error) => void): void {
    this.scheduled = false;
    if (this.pending !== '') {
      const out = this.pending;
      this.pending = '';
      this.target.write(out);
    }
    done?.();
  }
}

function flushTurn(d: TurnBatchedDestination): void {
  d.flush();
}
