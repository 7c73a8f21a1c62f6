// pino JSON logs with every path that could hold key material censored. The reconciler never logs Secrets or
// payloads on purpose; the redaction is the second line of defence.
import pino, { type DestinationStream, type Logger } from 'pino';
import { TurnBatchedDestination } from './turn-batched-destination.ts';

export const REDACT_PATHS = [
  'data',
  'stringData',
  'payload',
  'secret',
  'apiKey',
  'key',
  'token',
  'password',
  'authorization',
  '*.data',
  '*.stringData',
  '*.payload',
  '*.secret',
  '*.apiKey',
  '*.key',
  '*.token',
  '*.password',
  '*.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  '*.headers.authorization',
];

/**
 * `redact: false` is for the gateway only: its request path logs fixed fields built from ids, hashes, statuses and
 * timings, never a payload or a header (test/integration/gateway canaries check), and path redaction was a
 * measurable part of every request's CPU there (docs/gateway.md, "Speed").
 */
export function createLogger(
  opts: { level?: string; name?: string; destination?: DestinationStream; redact?: boolean; syncStdout?: boolean } = {},
): Logger {
  const options = {
    name: opts.name ?? 'byok-operator',
    level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
    ...(opts.redact === false ? {} : { redact: { paths: REDACT_PATHS, censor: '[REDACTED]' } }),
    base: { pid: process.pid },
  };
  if (opts.destination) return pino(options, opts.destination);
  // Synchronous writes to stdout: the default hands every line to libuv's thread pool, a thread switch per line
  // (its cost: docs/perf/gateway-speed.md). A stalled log reader then blocks the process, as it does any program
  // that logs to a full pipe. The lines of one event-loop turn go out in one write (TurnBatchedDestination).
  return opts.syncStdout
    ? pino(options, new TurnBatchedDestination(pino.destination({ dest: 1, sync: true })))
    : pino(options);
}

/**
 * A child logger that never repeats a key its parent already binds: pino appends each child's bindings to the
 * parent's, so `child({ component })` under a logger that has `component` writes the key twice (invalid for
 * strict JSON readers, and most keep only one of them). Equal values are dropped; a different `component`
 * becomes `subcomponent` (the parent names the process part, e.g. operator; the child its piece, e.g. compile);
 * any other key bound with a different value keeps the parent's and the child's goes under `<key>Child`.
 */
export function childLogger(parent: Logger, bindings: Record<string, unknown>): Logger {
  const bound = parent.bindings();
  const own: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(bindings)) {
    if (!(key in bound)) own[key] = value;
    else if (bound[key] !== value) own[key === 'component' ? 'subcomponent' : `${key}Child`] = value;
  }
  return Object.keys(own).length === 0 ? parent : parent.child(own);
}
