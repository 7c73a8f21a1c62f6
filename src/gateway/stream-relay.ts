// Relays a committed upstream SSE stream to the client: bytes as they come (with back-pressure and an idle deadline),
// the usage the upstream reports on the way, and a closing event that always comes. A stream that breaks after
// bytes were sent cannot fail over: the client gets a spec 7 error event, then the closing comment.
import type { ServerResponse } from 'node:http';
import { AttemptTimeout } from './attempts.ts';
import { SseUsageScanner } from './sse-scanner.ts';
import type { UpstreamBody } from './upstream-body.ts';
import type { StreamBytes } from './usage.ts';

/** The error a stream ends with when the client went away (metering tells it from upstream faults). */
export const CLIENT_WENT_AWAY = 'client went away';

export interface RelayOptions {
  idleTimeoutMs: number;
  /** Headers of the client's 200 (the generation id among them). */
  headers: Record<string, string>;
  /** The closing comment's text (provider_responses), asked for when the stream ends. */
  closing(): string;
  /** The spec 7 error event of a stream that broke after bytes were sent. */
  brokenEvent(error: string): string;
  /** Called once when the stream is over: why it broke (undefined when it completed), the usage it reported, and the bytes relayed (for the floor). */
  ended(error: string | undefined, reportedUsage: unknown, relayed: StreamBytes): void;
}

/** The relay of one committed stream; `leave()` is for the client going away. */
export class StreamRelay {
  /** Reads what the client gets: the usage, the bytes for the floor, and whether it ends on an event boundary. */
  private readonly usage = new SseUsageScanner();
  private idle: NodeJS.Timeout | undefined;
  private done = false;
  private clientGone = false;
  private resolveDone: (() => void) | undefined;
  private readonly out: ServerResponse;
  private readonly body: UpstreamBody;
  private readonly opts: RelayOptions;

  constructor(out: ServerResponse, body: UpstreamBody, opts: RelayOptions) {
    this.out = out;
    this.body = body;
    this.opts = opts;
  }

  /** Resolves when the stream is over (completed, broken or abandoned). */
  run(): Promise<void> {
    this.out.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...this.opts.headers,
    });
    // 'close' also follows a normal end; only an unfinished response means the client went away.
    this.out.on('close', () => {
      if (!this.out.writableFinished) this.leave();
    });
    return new Promise<void>((resolve) => {
      this.resolveDone = resolve;
      this.armIdle();
      this.body.pipe({ chunk: (c) => this.chunk(c), end: (error) => this.end(error) });
    });
  }

  leave(): void {
    this.clientGone = true;
    this.end(CLIENT_WENT_AWAY);
    this.body.destroy();
  }

  private armIdle(): void {
    // One timer per stream, re-armed per chunk: a new timer and closure per chunk was most of a stream's garbage.
    if (this.idle) this.idle.refresh();
    else this.idle = setTimeout(idleOut, this.opts.idleTimeoutMs, this);
  }

  /** No byte for idleTimeoutMs. */
  idledOut(): void {
    this.body.destroy(new AttemptTimeout(this.opts.idleTimeoutMs));
  }

  private chunk(c: Buffer): boolean {
    this.armIdle();
    this.usage.scan(c);
    if (this.out.write(c)) return true;
    this.out.once('drain', () => this.body.resume());
    return false;
  }

  private end(error: string | undefined): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.idle);
    const clientGone = this.clientGone || this.out.destroyed;
    // Asked before finish(), which dispatches an unfinished trailing event as if it had ended.
    const atBoundary = this.usage.atBoundary;
    this.opts.ended(error, this.usage.finish(), this.usage);
    if (!clientGone) {
      // In any framing: after a line cut short, or a CR whose LF may follow, a blank line still ends the event.
      if (error) this.out.write(`${atBoundary ? '' : '\n\n'}${this.opts.brokenEvent(error)}`);
      // The closing comment is an event of its own, even after a body that did not end on an event boundary.
      const separator = atBoundary || error !== undefined ? '' : '\n\n';
      this.out.end(`${separator}${this.opts.closing()}`);
    }
    this.resolveDone?.();
  }
}

function idleOut(relay: StreamRelay): void {
  relay.idledOut();
}
