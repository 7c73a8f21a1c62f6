// The gateway status report (docs/gateway.md, "Status endpoint"): what a gateway pod serves on GET /byok/status and
// the operator's leader reads into UpstreamHealthy, lastUsedTime and Delivered. The gateway writes it
// (src/gateway/health.ts, server.ts) and the operator parses it (src/operator/health/gather.ts) with this one type.
// Counters and digests only, never key material.

export const GATEWAY_STATUS_FORMAT = 'byok-gateway-status/v1';
export const GATEWAY_STATUS_PATH = '/byok/status';
/**
 * Query parameters of a held GET /byok/status: `after` is the `delivery.seq` the caller has seen; the pod answers
 * once its seq is past it (it loaded or refused something) or after `waitMs` (at most MAX_STATUS_WAIT_MS).
 */
export const STATUS_AFTER_PARAM = 'after';
export const STATUS_WAIT_PARAM = 'waitMs';
export const MAX_STATUS_WAIT_MS = 60_000;
/** POST {credentialId}: the operator asks one gateway pod to probe an idle credential (same status token). */
export const GATEWAY_PROBE_PATH = '/byok/probe';

/** How an upstream attempt with a BYOK credential ended, as health sees it. */
export const HEALTH_OUTCOMES = ['ok', 'unauthorized', 'rateLimited', 'upstreamError'] as const;
export type HealthOutcome = (typeof HEALTH_OUTCOMES)[number];

export interface CredentialCounters {
  ok: number;
  unauthorized: number;
  rateLimited: number;
  upstreamError: number;
  /** Epoch ms; absent until one happened. */
  lastSuccess?: number;
  lastFailure?: number;
}

export interface ProbeResult {
  at: number;
  outcome: HealthOutcome;
  /** Upstream HTTP status; null when none (Vertex token exchange, transport error). */
  status: number | null;
}

export interface GatewayStatusReport {
  format: typeof GATEWAY_STATUS_FORMAT;
  /** Random per process start: the operator treats a new value as a counter reset. */
  instance: string;
  /** Epoch ms at the gateway when the report was made. */
  at: number;
  routing: { version: string | null };
  /** The loaded bundle: active key id, kubelet generation ('' for a plain directory), credential id → envelope version. */
  bundle: { keyId: string | null; generation: string; credentials: Record<string, string> };
  /** Monotonic for the life of the process (per `instance`). */
  credentials: Record<string, CredentialCounters>;
  /** The last probe of each probed credential (not counted in `credentials`: a probe is not use). */
  probes: Record<string, ProbeResult>;
  /** What the pod loaded and acknowledged; absent from gateways that cannot hold a status request. */
  delivery?: DeliveryReport;
}

/** The pod's side of delivery: a sequence that moves whenever what it serves may have changed, and its last ack. */
export interface DeliveryReport {
  /** Moves (per `instance`) on every stream batch and every reload of what the pod serves. */
  seq: number;
  /** Whether the pod holds the operator's delivery stream now. */
  stream: 'connected' | 'down' | 'off';
  /** The last stream batch this pod acknowledged, with the refusal reason when it refused one. */
  lastBatch?: { batch: number; result: 'loaded' | 'refused'; reason?: string };
}

export class GatewayStatusError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GatewayStatusError';
  }
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isNullableString = (v: unknown): v is string | null => v === null || typeof v === 'string';

function fail(what: string): never {
  // Field names only: a report's values (ids, digests) stay out of errors and logs.
  throw new GatewayStatusError(`gateway status report: ${what}`);
}

function record<T>(value: unknown, what: string, check: (entry: unknown) => entry is T): Record<string, T> {
  if (!isObject(value)) fail(`${what} is not an object`);
  // Own properties of a fresh object: an id such as "__proto__" stays an ordinary key.
  const out: Record<string, T> = {};
  for (const [id, entry] of Object.entries(value)) {
    if (!check(entry)) fail(`an entry of ${what} is invalid`);
    Object.defineProperty(out, id, { value: entry, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

const isCounters = (v: unknown): v is CredentialCounters =>
  isObject(v) &&
  HEALTH_OUTCOMES.every((o) => isCount(v[o])) &&
  (v.lastSuccess === undefined || isTime(v.lastSuccess)) &&
  (v.lastFailure === undefined || isTime(v.lastFailure));

const isProbe = (v: unknown): v is ProbeResult =>
  isObject(v) &&
  isTime(v.at) &&
  (HEALTH_OUTCOMES as readonly unknown[]).includes(v.outcome) &&
  (v.status === null || (Number.isInteger(v.status) && (v.status as number) >= 0 && (v.status as number) <= 999));

/**
 * The report in a GET /byok/status body (already JSON-parsed), checked field by field; throws GatewayStatusError.
 * `probes` may be absent (gateways from before probes): read as none.
 */
export function parseGatewayStatusReport(value: unknown): GatewayStatusReport {
  if (!isObject(value)) fail('not an object');
  if (value.format !== GATEWAY_STATUS_FORMAT) fail('unknown status format');
  if (typeof value.instance !== 'string' || value.instance === '') fail('instance is missing');
  if (!isTime(value.at)) fail('at is not a time');
  const routing = value.routing;
  if (!isObject(routing) || !isNullableString(routing.version)) fail('routing.version is invalid');
  const bundle = value.bundle;
  if (!isObject(bundle) || !isNullableString(bundle.keyId) || typeof bundle.generation !== 'string')
    fail('bundle is invalid');
  return {
    format: GATEWAY_STATUS_FORMAT,
    instance: value.instance,
    at: value.at,
    routing: { version: routing.version },
    bundle: {
      keyId: bundle.keyId,
      generation: bundle.generation,
      credentials: record(bundle.credentials, 'bundle.credentials', (v): v is string => typeof v === 'string'),
    },
    credentials: record(value.credentials, 'credentials', isCounters),
    probes: value.probes === undefined ? {} : record(value.probes, 'probes', isProbe),
    ...(value.delivery === undefined ? {} : { delivery: deliveryReport(value.delivery) }),
  };
}

const MAX_REASON = 512;

function deliveryReport(value: unknown): DeliveryReport {
  if (!isObject(value) || !isCount(value.seq)) fail('delivery.seq is invalid');
  if (value.stream !== 'connected' && value.stream !== 'down' && value.stream !== 'off')
    fail('delivery.stream is invalid');
  const out: DeliveryReport = { seq: value.seq, stream: value.stream };
  const b = value.lastBatch;
  if (b === undefined) return out;
  if (
    !isObject(b) ||
    !isCount(b.batch) ||
    (b.result !== 'loaded' && b.result !== 'refused') ||
    (b.reason !== undefined && typeof b.reason !== 'string')
  )
    fail('delivery.lastBatch is invalid');
  out.lastBatch = {
    batch: b.batch,
    result: b.result,
    ...(typeof b.reason === 'string' ? { reason: deliveryReason(b.reason) } : {}),
  };
  return out;
}

/**
 * A refusal reason as it may travel into an Event: printable ASCII only, at most 512 characters. The gateway builds
 * it from object names of the routing namespace (`Secret/byok-bundle-3`), key ids and its own fixed phrases, never
 * from key material or tenant text.
 */
export function deliveryReason(text: string): string {
  const clean = text.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > MAX_REASON ? `${clean.slice(0, MAX_REASON - 3)}...` : clean;
}
