// An upstream's streamed response body, read with ONE set of listeners attached before any data flows. A body that
// arrives in a single read (a short stream, or an upstream that answers `stream: true` with plain JSON) emits 'end'
// right after its only 'data'; listeners attached later, even a microtask later, never hear it, and the client's
// response would never end. Here the end is recorded whenever it happens and replayed to the sink.
import type { Readable } from 'node:stream';

/** An upstream response: its head (status) and its body as a byte stream. */
export type UpstreamResponse = Readable & { statusCode?: number | undefined; complete?: boolean };

export interface BodySink {
  /** A chunk for the client; false asks for a pause until resume() (back-pressure). */
  chunk(c: Buffer): boolean;
  /** The body is over: complete (undefined) or broken (why, never upstream text). Called exactly once. */
  end(error: string | undefined): void;
}

export class UpstreamBody {
  /** Bytes received from the upstream so far. */
  bytes = 0;
  private readonly held: Buffer[] = [];
  private ended: { error: string | undefined; cause: Error | undefined } | undefined;
  private sink: BodySink | undefined;
  private waiter: { resolve(): void; reject(err: Error): void } | undefined;

  private readonly res: UpstreamResponse;

  constructor(res: UpstreamResponse) {
    this.res = res;
    res.on('data', (c: Buffer) => {
      this.bytes += c.length;
      if (this.sink) {
        if (!this.sink.chunk(c)) res.pause();
        return;
      }
      this.held.push(c);
      res.pause();
      this.settleWaiter();
    });
    res.once('end', () => this.finish(res.complete !== false ? undefined : 'upstream connection closed mid-stream'));
    res.once('error', (err) =>
      this.finish(err.name === 'AttemptTimeout' ? err.message : 'upstream connection failed mid-stream', err),
    );
    res.once('aborted', () => this.finish('upstream connection closed mid-stream'));
  }

  /** Resolves when the first byte is here; rejects (with the cause) when the body ends or fails before one. */
  first(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      this.settleWaiter();
    });
  }

  /** Hands the body to the sink: held chunks first, then the rest as it comes; an end already seen is replayed. */
  pipe(sink: BodySink): void {
    this.sink = sink;
    let wantsPause = false;
    for (const c of this.held.splice(0)) if (!sink.chunk(c)) wantsPause = true;
    if (this.ended) sink.end(this.ended.error);
    else if (!wantsPause) this.res.resume();
  }

  resume(): void {
    if (!this.ended) this.res.resume();
  }

  /** Stops reading (the client went away, or the idle deadline passed): what was received stays counted in `bytes`. */
  destroy(err?: Error): void {
    this.res.destroy(err);
  }

  private finish(error: string | undefined, cause?: Error): void {
    if (this.ended) return;
    this.ended = { error, cause };
    const sink = this.sink;
    // Nothing comes after the end: the response lets go of the sink, which reaches the client's side.
    this.sink = undefined;
    if (sink) sink.end(error);
    else this.settleWaiter();
  }

  private settleWaiter(): void {
    const w = this.waiter;
    if (!w) return;
    if (this.held.length > 0) {
      this.waiter = undefined;
      w.resolve();
    } else if (this.ended) {
      this.waiter = undefined;
      w.reject(this.ended.cause ?? new Error(this.ended.error ?? 'upstream stream ended before any data'));
    }
  }
}
