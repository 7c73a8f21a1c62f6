// pino JSON logs with every path that could hold key material censored. The reconciler never logs Secrets or
// payloads on purpose; the redaction is the second line of defence.
import pino, { type DestinationStream, type Logger } from 'pino';

export const REDACT_PATHS = [
  'data', 'stringData', 'payload', 'secret', 'apiKey', 'key', 'token', 'password', 'authorization',
  '*.data', '*.stringData', '*.payload', '*.secret', '*.apiKey', '*.key', '*.token', '*.password', '*.authorization',
  'req.headers.authorization', 'req.headers.cookie', '*.headers.authorization',
];

export function createLogger(opts: { level?: string; name?: string; destination?: DestinationStream } = {}): Logger {
  const options = {
    name: opts.name ?? 'byok-operator',
    level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    base: { pid: process.pid },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
