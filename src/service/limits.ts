// Bounds and log redaction both doors apply to every request, so the REST door and the aggregated door cannot
// drift apart (a change here reaches both on purpose).

/** Bodies larger than this get 413. A service-account JSON is ~2.4 KB; the payload limit is 64 KiB. */
export const BODY_LIMIT = 128 * 1024;

/** Paths pino must never print: the bearer token and any secret in a body. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'req.body',
  'body',
  'key',
  '*.key',
  'payload',
];
