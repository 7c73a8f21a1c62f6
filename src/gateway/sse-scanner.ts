// Reads an SSE stream an upstream sends, as the WHATWG HTML "server-sent events" parser does, for the `usage` it
// reports and the byte counts its floor is computed from (usage.ts, streamFloorTokens). The bytes come from a host
// the tenant may choose, so the work is constant per byte and the memory bounded: every byte is looked at a fixed
// number of times, whatever the framing (lines end in CRLF, LF or CR, a CR at one chunk's end and its LF in the next)
// and however large an event; an event past MAX_EVENT_BYTES is counted but not held or parsed.
import { eventExcessBytes, type StreamBytes } from './usage.ts';

/** The most of one event's data held for parsing; a larger event is counted toward the floor but not read. */
export const MAX_EVENT_BYTES = 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const DATA = Buffer.from('data');
const USAGE = Buffer.from('"usage"');
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const NEWLINE = Buffer.from([LF]);

/** The field of the line being read: unknown until its first five bytes (or its end) are in. */
type LineKind = 'unknown' | 'data' | 'other';

export class SseUsageScanner implements StreamBytes {
  /** The last usage object an event carried (unvalidated: metering checks it). */
  reported: unknown;
  bytes = 0;
  excessBytes = 0;
  dataEvents = 0;
  plainJson = false;
  /** Bytes looked at: scanned for line ends, copied, searched or parsed (the linear-work tests read it). */
  examined = 0;

  /** Bytes of the current event so far, terminators included. */
  private eventBytes = 0;
  /** The last byte was a CR ending a line: an LF first in the next chunk belongs to it. */
  private skipLf = false;
  /** Bytes of the event dispatched last, for an LF that arrives after its CR ended the event's blank line. */
  private lastEventBytes = -1;
  private line: Buffer[] = [];
  private lineBytes = 0;
  private lineKind: LineKind = 'unknown';
  /** The current event's data, `data` lines joined with LF, while within MAX_EVENT_BYTES. */
  private data: Buffer[] = [];
  private dataBytes = 0;
  private hasData = false;
  private overflow = false;
  /** The body so far while it may be a plain JSON object (its first byte past whitespace is `{`), within the cap. */
  private head: Buffer[] | null = [];
  private headBytes = 0;
  private headStarted = false;
  private readonly maxEventBytes: number;

  /** `maxEventBytes`: the cap on one event's data (and a plain JSON body); tests set a small one. */
  constructor(maxEventBytes = MAX_EVENT_BYTES) {
    this.maxEventBytes = maxEventBytes;
  }

  /** Whether what was scanned ends on an event boundary: nothing of an unfinished line or event is pending. */
  get atBoundary(): boolean {
    return this.lineBytes === 0 && this.eventBytes === 0;
  }

  scan(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let pos = 0;
    if (this.bytes === 0 && buf.length >= 3 && buf[0] === BOM[0] && buf[1] === BOM[1] && buf[2] === BOM[2]) pos = 3;
    this.bytes += buf.length;
    this.eventBytes += pos;
    if (this.head) this.keepHead(buf);
    if (this.skipLf && pos < buf.length) {
      this.skipLf = false;
      this.examined++;
      if (buf[pos] === LF) {
        // As if both bytes had come in one read: the LF belongs to the line (and the event) its CR ended.
        if (this.lastEventBytes >= 0) {
          this.excessBytes += eventExcessBytes(this.lastEventBytes + 1) - eventExcessBytes(this.lastEventBytes);
          this.lastEventBytes = -1;
        } else this.eventBytes++;
        pos++;
      }
    }
    // The next LF and CR at or after pos, found once each and reused: each byte is searched at most twice.
    let nextLf = -2;
    let nextCr = -2;
    while (pos < buf.length) {
      if (nextLf !== -1 && nextLf < pos) nextLf = this.find(buf, LF, pos);
      if (nextCr !== -1 && nextCr < pos) nextCr = this.find(buf, CR, pos);
      const end = nextLf === -1 ? nextCr : nextCr === -1 ? nextLf : Math.min(nextLf, nextCr);
      if (end === -1) {
        this.append(buf, pos, buf.length);
        this.eventBytes += buf.length - pos;
        return;
      }
      this.append(buf, pos, end);
      this.eventBytes += end + 1 - pos;
      pos = end + 1;
      if (buf[end] === CR) {
        if (pos === buf.length) this.skipLf = true;
        else if (buf[pos] === LF) {
          this.eventBytes++;
          pos++;
        }
      }
      this.lastEventBytes = -1;
      this.endLine();
    }
  }

  /**
   * The stream is over: a trailing line or event without its terminator is still read (the client gets those bytes
   * too); so is an upstream that answered `stream: true` with a plain JSON completion (the whole body is that object).
   */
  finish(): unknown {
    if (this.lineBytes > 0 || this.lineKind !== 'unknown') this.endLine();
    if (this.eventBytes > 0 || this.hasData) this.dispatch();
    if (this.head && this.dataEvents === 0 && this.headStarted) {
      const body = Buffer.concat(this.head, this.headBytes);
      this.examined += body.length;
      const event = parsed(body);
      if (event !== undefined) {
        this.plainJson = true;
        if (this.reported === undefined && event.usage !== undefined && event.usage !== null)
          this.reported = event.usage;
      }
    }
    this.head = null;
    return this.reported;
  }

  private find(buf: Buffer, byte: number, from: number): number {
    const at = buf.indexOf(byte, from);
    this.examined += (at === -1 ? buf.length : at + 1) - from;
    return at;
  }

  /** Bytes of the current line: held only while the line may be a `data` line of an event within the cap. */
  private append(buf: Buffer, from: number, to: number): void {
    if (to === from) return;
    this.lineBytes += to - from;
    if (this.lineKind === 'other' || this.overflow) return;
    this.line.push(buf.subarray(from, to));
    if (this.lineKind === 'unknown' && this.lineBytes >= DATA.length + 1) {
      const start = Buffer.concat(this.line, DATA.length + 1);
      this.lineKind = start.subarray(0, DATA.length).equals(DATA) && start[DATA.length] === COLON ? 'data' : 'other';
      if (this.lineKind === 'other') this.line = [];
    }
    if (this.lineKind === 'data' && this.dataBytes + this.lineBytes > this.maxEventBytes) this.dropEvent();
  }

  private endLine(): void {
    const length = this.lineBytes;
    if (length === 0) {
      this.resetLine();
      this.dispatch();
      return;
    }
    // A line shorter than `data:` is a data field only when it is exactly `data` (an empty value).
    const kind =
      this.lineKind !== 'unknown'
        ? this.lineKind
        : length === DATA.length && !this.overflow && Buffer.concat(this.line).equals(DATA)
          ? 'data'
          : 'other';
    if (kind === 'data') {
      if (!this.overflow) {
        const whole = this.line.length === 1 ? this.line[0]! : Buffer.concat(this.line, length);
        this.examined += length;
        // The value: past `data:` and one optional space; a second data line is joined to the first with LF.
        let from = Math.min(DATA.length + 1, whole.length);
        if (whole[from] === SPACE) from++;
        if (this.hasData) {
          this.data.push(NEWLINE);
          this.dataBytes++;
        }
        this.data.push(whole.subarray(from));
        this.dataBytes += whole.length - from;
      }
      // An empty value is still a data field: the event counts as one with data.
      this.hasData = true;
    }
    this.resetLine();
  }

  private resetLine(): void {
    this.line = [];
    this.lineBytes = 0;
    this.lineKind = 'unknown';
  }

  /** A blank line (or the end): the event's bytes count toward the floor; its data is read when it mentions usage. */
  private dispatch(): void {
    this.excessBytes += eventExcessBytes(this.eventBytes);
    this.lastEventBytes = this.eventBytes;
    this.eventBytes = 0;
    if (this.hasData) {
      this.dataEvents++;
      // Past its first event with data the body is SSE, not a plain JSON object.
      this.head = null;
      if (!this.overflow && this.dataBytes > 0) {
        const data = this.data.length === 1 ? this.data[0]! : Buffer.concat(this.data, this.dataBytes);
        this.examined += data.length;
        if (data.includes(USAGE)) {
          this.examined += data.length;
          const usage = parsed(data)?.usage;
          if (usage !== undefined && usage !== null) this.reported = usage;
        }
      }
    }
    this.data = [];
    this.dataBytes = 0;
    this.hasData = false;
    this.overflow = false;
  }

  /** The event passed MAX_EVENT_BYTES: what it held is let go; its bytes still count. */
  private dropEvent(): void {
    this.overflow = true;
    this.line = [];
    this.data = [];
    this.dataBytes = 0;
  }

  private keepHead(buf: Buffer): void {
    if (this.headBytes + buf.length > this.maxEventBytes) {
      this.head = null;
      return;
    }
    if (!this.headStarted) {
      // Only whitespace so far: the first other byte says whether this may be a JSON object.
      let i = 0;
      while (i < buf.length && (buf[i] === SPACE || buf[i] === LF || buf[i] === CR || buf[i] === 0x09)) i++;
      this.examined += Math.min(i + 1, buf.length);
      if (i < buf.length) {
        if (buf[i] !== OPEN_BRACE) {
          this.head = null;
          return;
        }
        this.headStarted = true;
      }
    }
    this.head!.push(buf);
    this.headBytes += buf.length;
  }
}

function parsed(json: Buffer): { usage?: unknown } | undefined {
  try {
    const v = JSON.parse(json.toString('utf8')) as unknown;
    return typeof v === 'object' && v !== null ? (v as { usage?: unknown }) : undefined;
  } catch {
    // Not JSON (e.g. [DONE], or a cut body): nothing to read.
    return undefined;
  }
}
