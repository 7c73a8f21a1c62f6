// The attempt loop (spec 1.1 rule 3): a plan's attempts in order, each prepared, sent under its own deadline and read
// by a sink, until one answers usably or none is left. Failover, timeouts, the client going away and
// `provider_responses` exist here once; the two sinks (buffered and streaming) only say what a usable answer is.
// No HTTP server and no upstream client in here: `send` is given, so the loop is unit-tested with a fake one.
import type { Attempt } from '../domain/index.ts';
import type { ProviderResponse } from './generations.ts';
import type { UpstreamRequest } from './upstream.ts';
import { UpstreamBody, type UpstreamResponse } from './upstream-body.ts';

export type { UpstreamResponse };

import { parseUntrustedJson } from '../domain/json.ts';

export type Outcome =
  | 'ok'
  | 'rate_limited'
  | 'upstream_error'
  | 'rejected'
  | 'timeout'
  | 'transport_error'
  | 'credential_error'
  | 'stream_broken';

export const outcomeOfStatus = (status: number): Outcome =>
  status < 300 ? 'ok' : status === 429 ? 'rate_limited' : status >= 500 ? 'upstream_error' : 'rejected';

export class AttemptTimeout extends Error {
  constructor(ms: number) {
    super(`no response within ${ms} ms`);
    this.name = 'AttemptTimeout';
  }
}

/** What the deadline or the client's departure tears down: the request in flight. */
export interface Cancellable {
  destroy(err?: Error): unknown;
}

export interface AttemptTimer {
  /** The request this deadline tears down when it passes (or when the client goes away). */
  attach(request: Cancellable): void;
  timedOut(): boolean;
  clear(): void;
}

/** The client side of one request: whether it went away, and the attempt to tear down when it does. */
export class ClientLink {
  gone = false;
  /** The upstream request of the attempt in flight (set by its deadline), destroyed when the client leaves. */
  attempt: Cancellable | undefined;

  /** Called once by the HTTP layer when the client disconnects before its response finished. */
  leave(): void {
    this.gone = true;
    this.attempt?.destroy(new Error('client went away'));
  }
}

/**
 * The per-attempt deadline: a plain timer and destroy() (an AbortSignal costs a DOMException per request here), one
 * object and no closures per attempt. clear() lets go of the request: a closure that still reached the upstream
 * request, its response and its parsed body kept all of them alive past the attempt, through scavenges into the old
 * generation (~4 KB per request).
 */
class AttemptDeadline implements AttemptTimer {
  private request: Cancellable | undefined;
  private expired = false;
  private readonly ms: number;
  private readonly client: ClientLink;
  private readonly timer: NodeJS.Timeout;

  constructor(ms: number, client: ClientLink) {
    this.ms = ms;
    this.client = client;
    this.timer = setTimeout(expire, ms, this);
  }

  attach(request: Cancellable): void {
    this.request = request;
    this.client.attempt = request;
  }

  timedOut(): boolean {
    return this.expired;
  }

  clear(): void {
    clearTimeout(this.timer);
    this.client.attempt = undefined;
    this.request = undefined;
  }

  expire(): void {
    this.expired = true;
    this.request?.destroy(new AttemptTimeout(this.ms));
  }
}

function expire(deadline: AttemptDeadline): void {
  deadline.expire();
}

export function startTimer(ms: number, client: ClientLink): AttemptTimer {
  return new AttemptDeadline(ms, client);
}

/** provider_responses as they accrue, and the time spent waiting on upstreams (the rest is the gateway's own). */
export class AttemptJournal {
  readonly responses: ProviderResponse[] = [];
  upstreamMs = 0;
  private readonly observe: (attempt: Attempt, outcome: Outcome, status: number | null, last: boolean) => void;

  /** `observe` sees every finished attempt (metrics, credential health). */
  constructor(observe: (attempt: Attempt, outcome: Outcome, status: number | null, last: boolean) => void) {
    this.observe = observe;
  }

  record(
    attempt: Attempt,
    status: number | null,
    error: string | undefined,
    t0: number,
    outcome: Outcome,
    last: boolean,
  ): void {
    const latency = performance.now() - t0;
    this.upstreamMs += latency;
    const entry: ProviderResponse = {
      provider: attempt.provider,
      endpoint_id: attempt.endpoint.id,
      credential: attempt.kind === 'credential' ? attempt.credentialId : 'shared',
      status,
      latency_ms: Math.round(latency * 10) / 10,
    };
    if (error !== undefined) entry.error = error;
    this.responses.push(entry);
    this.observe(attempt, outcome, status, last);
  }
}

export interface AttemptFailure {
  status: number | null;
  error?: string;
  outcome: Outcome;
}

/** How one kind of response is read: a usable answer is committed, anything else fails this attempt over. */
export interface Sink<T> {
  accept(res: UpstreamResponse): Promise<{ commit: T } | { fail: AttemptFailure }>;
  /** The response head arrived, then its body broke before the sink could decide. */
  brokenAfterHead(status: number): AttemptFailure;
}

export interface AttemptLoopDeps {
  timeoutMs: number;
  /** The upstream request of an attempt (URL, auth); throws when it cannot be built (recorded as credential_error). */
  prepare(attempt: Attempt): Promise<UpstreamRequest>;
  /** Says why `prepare` failed, in words fit for the tenant. */
  setupFailure(err: unknown): string;
  /** Sends one request; resolves with the response head. The timer must be attached to what it can tear down. */
  send(request: UpstreamRequest, timer: AttemptTimer): Promise<UpstreamResponse>;
  /** A transport failure, with its detail, for the gateway's own log (the tenant sees one generic string). */
  transportFailure?(err: unknown): void;
}

export type LoopResult<T> =
  | {
      committed: true;
      value: T;
      attempt: Attempt;
      last: boolean;
      /** When the committed attempt started (its latency is recorded when it settles). */
      t0: number;
      /** The upstream's status. */
      status: number;
    }
  | { committed: false };

/**
 * Runs the attempts in order until a sink commits one. Failed attempts are recorded in the journal; the committed one
 * is not (a buffered answer settles at once, a stream when it ends), so the caller records it with `t0`.
 */
export async function runAttempts<T>(
  attempts: readonly Attempt[],
  sink: Sink<T>,
  deps: AttemptLoopDeps,
  journal: AttemptJournal,
  client: ClientLink,
): Promise<LoopResult<T>> {
  for (let i = 0; i < attempts.length; i++) {
    if (client.gone) break;
    const attempt = attempts[i]!;
    const last = i === attempts.length - 1;
    const prepT0 = performance.now();
    let request: UpstreamRequest;
    try {
      request = await deps.prepare(attempt);
    } catch (err) {
      journal.record(attempt, null, deps.setupFailure(err), prepT0, 'credential_error', last);
      continue;
    }
    if (client.gone) break;
    const t0 = performance.now();
    const timer = startTimer(deps.timeoutMs, client);
    let res: UpstreamResponse | undefined;
    try {
      res = await deps.send(request, timer);
      const read = await sink.accept(res);
      timer.clear();
      if ('commit' in read)
        return { committed: true, value: read.commit, attempt, last, t0, status: res.statusCode ?? 200 };
      journal.record(attempt, read.fail.status, read.fail.error, t0, read.fail.outcome, last);
    } catch (err) {
      timer.clear();
      res?.destroy();
      const f: AttemptFailure = timer.timedOut()
        ? { status: null, error: new AttemptTimeout(deps.timeoutMs).message, outcome: 'timeout' }
        : client.gone
          ? { status: null, error: 'client went away', outcome: 'transport_error' }
          : res?.statusCode !== undefined
            ? sink.brokenAfterHead(res.statusCode)
            : (deps.transportFailure?.(err),
              { status: null, error: 'upstream unreachable', outcome: 'transport_error' });
      journal.record(attempt, f.status, f.error, t0, f.outcome, last);
      if (client.gone) break;
    }
  }
  return { committed: false };
}

/** The answer to the client when no attempt committed: the last real upstream status, else 504 or 502. */
/** Status of an answer whose last upstream refused its key: not 401 (SDKs read that as a bad gateway key), not retried. */
export const UPSTREAM_AUTH_STATUS = 424;
export const UPSTREAM_AUTH_ERROR = 'upstream_auth_error';

export function failureAnswer(responses: readonly ProviderResponse[]): {
  status: number;
  message: string;
  type?: typeof UPSTREAM_AUTH_ERROR;
} {
  // The last status an upstream actually answered; attempts that never got one (timeouts, missing keys) do not mask it.
  const answered = responses.findLast((r) => r.status !== null);
  const last = responses[responses.length - 1];
  if (answered && (answered.status === 401 || answered.status === 403)) {
    // The provider refused the key the gateway sent for it: the team's own (BYOK) or the platform's. The gateway key was fine.
    const whose =
      answered.credential === 'shared'
        ? "the platform's shared key"
        : `the team's own key (BYOK credential ${answered.credential})`;
    return {
      status: UPSTREAM_AUTH_STATUS,
      type: UPSTREAM_AUTH_ERROR,
      message: `upstream authentication failed: ${answered.provider} refused ${whose} with ${answered.status}; your gateway API key was accepted. Every attempt failed; provider_responses lists them. Fix or rotate the provider key (kubectl get byok shows UPSTREAM)`,
    };
  }
  // An upstream's 4xx/5xx is passed on; its 1xx, 3xx or unusable 2xx is not an answer for the client: 502 (the
  // upstream's code stays in provider_responses).
  const status =
    answered?.status != null && answered.status >= 400 && answered.status <= 599
      ? answered.status
      : last?.error?.startsWith('no response within')
        ? 504
        : 502;
  const message = answered
    ? `every attempt failed; the last upstream status was ${answered.status} (${answered.provider})`
    : `every attempt failed without an upstream status; the last (${last?.provider ?? 'none'}): ${last?.error ?? 'unknown'}`;
  return { status, message };
}

/** The largest buffered (non-stream) answer read from an upstream: the gateway's own request body limit. */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** What is read of a non-2xx body before it is dropped (its text is never passed on). */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/** A body past the limit its reader set: the response is destroyed, nothing more is held. */
export class BodyTooLarge extends Error {
  constructor(limit: number) {
    super(`the upstream response is larger than ${limit / (1024 * 1024)} MiB`);
    this.name = 'BodyTooLarge';
  }
}

/**
 * Reads a whole body of at most `limit` bytes (a larger one rejects with BodyTooLarge: an upstream, maybe the
 * tenant's, decides the size). `on`, not `once`: each of these fires at most once that matters (the promise settles
 * once), `once` costs a wrapper per listener, and an 'error' listener that stays means a late error is never unhandled.
 */
export function readAll(res: UpstreamResponse, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    res.on('data', (c: Buffer) => {
      bytes += c.length;
      if (bytes <= limit) return void chunks.push(c);
      chunks.length = 0;
      reject(new BodyTooLarge(limit));
      res.destroy();
    });
    res.on('end', () =>
      res.complete === false
        ? reject(new Error('upstream connection closed mid-response'))
        : resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)),
    );
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('upstream connection closed mid-response')));
  });
}

export interface BufferedAnswer {
  /** The upstream's JSON object, to be amended (id, provider, provider_responses) and sent on. */
  body: Record<string, unknown>;
  bytes: number;
}

/** A non-streaming answer: usable when it is a 2xx whose body is a JSON object. */
export const bufferedSink: Sink<BufferedAnswer> = {
  async accept(res) {
    const status = res.statusCode!;
    if (status < 200 || status >= 300) {
      await readAll(res, MAX_ERROR_BODY_BYTES).catch(() => undefined);
      return { fail: { status, outcome: outcomeOfStatus(status) } };
    }
    let raw: Buffer;
    try {
      raw = await readAll(res, MAX_ANSWER_BYTES);
    } catch (err) {
      if (err instanceof BodyTooLarge) return { fail: { status, error: err.message, outcome: 'upstream_error' } };
      throw err;
    }
    let parsed: unknown;
    try {
      parsed = parseUntrustedJson(raw);
    } catch {
      return { fail: { status, error: 'invalid JSON in the upstream response', outcome: 'upstream_error' } };
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      return { fail: { status, error: 'the upstream response is not a JSON object', outcome: 'upstream_error' } };
    return { commit: { body: parsed as Record<string, unknown>, bytes: raw.length } };
  },
  // As before any status: which transport failure it was stays in the log.
  brokenAfterHead: () => ({ status: null, error: 'upstream unreachable', outcome: 'transport_error' }),
};

/** A streaming answer: usable once a 2xx has sent its first byte; from then on the client has bytes, no failover. */
export const streamingSink: Sink<UpstreamBody> = {
  async accept(res) {
    const status = res.statusCode!;
    if (status < 200 || status >= 300) {
      await readAll(res, MAX_ERROR_BODY_BYTES).catch(() => undefined);
      return { fail: { status, outcome: outcomeOfStatus(status) } };
    }
    const body = new UpstreamBody(res);
    await body.first();
    return { commit: body };
  },
  brokenAfterHead: (status) => ({ status, error: 'stream broke before the first byte', outcome: 'stream_broken' }),
};
