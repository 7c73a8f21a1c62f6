// Relays a committed upstream SSE stream to the client: bytes as they come (with back-pressure and an idle deadline),
// the usage the upstream reports on the way, and a closing event that always comes. A stream that breaks after
// bytes were sent cannot fail over: the client gets a spec 7 error event, then the closing comment.
import type { ServerResponse } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import { AttemptTimeout } from './attempts.ts';
import type { UpstreamBody } from './upstream-body.ts';
import { deliveredUnits } from './usage.ts';

/**
 * Finds `usage` in SSE `data:` events as they pass, without holding more than one unfinished event. With
 * `countContent` (a tenant-chosen upstream, whose count has a floor) it also reads every event's choices for the
 * floor units of what was delivered (usage.ts, deliveredUnits); otherwise only events that mention usage are parsed.
 */
export class SseUsageScanner {
  /** The last usage object an event carried (unvalidated: metering checks it). */
  reported: unknown;
  /** Floor units of the content delivered so far (counted with `countContent` only). */
  units = 0;
  private pending = '';
  /** A character split between two reads is decoded whole, not as two replacement characters. */
  private readonly decoder = new StringDecoder('utf8');
  private readonly countContent: boolean;

  constructor(countContent = false) {
    this.countContent = countContent;
  }

  scan(chunk: Buffer | string): void {
    const text = this.pending + (typeof chunk === 'string' ? chunk : this.decoder.write(chunk));
    const cut = text.lastIndexOf('\n\n');
    if (cut < 0) {
      this.pending = text;
      return;
    }
    this.pending = text.slice(cut + 2);
    if (!this.countContent && !text.includes('"usage"')) return;
    for (const event of text.slice(0, cut).split('\n\n')) {
      if (!this.countContent && !event.includes('"usage"')) continue;
      for (const line of event.split('\n')) {
        if (line.startsWith('data:')) this.read(line.slice(5));
      }
    }
  }

  /**
   * The stream is over: a trailing event without its blank line is still read; so is an upstream that answered
   * `stream: true` with a plain JSON completion (the whole body is that one object).
   */
  finish(): unknown {
    this.pending += this.decoder.end();
    if (this.pending.length > 0) {
      const tail = this.pending;
      const before = this.units;
      this.scan('\n\n');
      if (this.reported === undefined && this.units === before && tail.trimStart().startsWith('{')) this.read(tail);
    }
    return this.reported;
  }

  private read(json: string): void {
    const event = parsed(json);
    if (event === undefined) return;
    const usage = event.usage;
    if (usage !== undefined && usage !== null) this.reported = usage;
    if (this.countContent) this.units += deliveredUnits(event.choices);
  }
}

function parsed(json: string): { usage?: unknown; choices?: unknown } | undefined {
  try {
    const v = JSON.parse(json) as unknown;
    return typeof v === 'object' && v !== null ? (v as { usage?: unknown; choices?: unknown }) : undefined;
  } catch {
    // Not JSON (e.g. [DONE], or a cut body): nothing to read.
    return undefined;
  }
}

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
  /** Read the delivered content's floor units too (a tenant-chosen upstream; every event is parsed then). */
  countContent?: boolean;
  /** Called once when the stream is over: why it broke (undefined when it completed), the usage it reported, and the floor units delivered (0 without countContent). */
  ended(error: string | undefined, reportedUsage: unknown, deliveredUnits: number): void;
}

/** The relay of one committed stream; `leave()` is for the client going away. */
export class StreamRelay {
  private readonly usage: SseUsageScanner;
  /** Whether what the client has so far ends on an SSE event boundary (a blank line). */
  private atBoundary = true;
  private lastByte = 0x0a;
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
    this.usage = new SseUsageScanner(opts.countContent === true);
  }

  /** Resolves when the stream is over (completed, broken or abandoned). */
  run(): Promise<void> {
    this.out.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', ...this.opts.headers });
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
    if (c.length > 0) {
      this.atBoundary = c[c.length - 1] === 0x0a && (c.length >= 2 ? c[c.length - 2] : this.lastByte) === 0x0a;
      this.lastByte = c[c.length - 1]!;
    }
    if (this.out.write(c)) return true;
    this.out.once('drain', () => this.body.resume());
    return false;
  }

  private end(error: string | undefined): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.idle);
    const clientGone = this.clientGone || this.out.destroyed;
    this.opts.ended(error, this.usage.finish(), this.usage.units);
    if (!clientGone) {
      if (error) this.out.write(`${this.atBoundary ? '' : '\n\n'}${this.opts.brokenEvent(error)}`);
      // The closing comment is an event of its own, even after a body that did not end on an event boundary.
      const separator = this.atBoundary || error !== undefined ? '' : '\n\n';
      this.out.end(`${separator}${this.opts.closing()}`);
    }
    this.resolveDone?.();
  }
}

function idleOut(relay: StreamRelay): void {
  relay.idledOut();
}
