// The ops routes: /healthz, /readyz, /metrics, and the operator's /byok/status and /byok/probe (behind the status
// token). The CLI and the chart serve them on their own port, never beside tenants (docs/gateway.md, "Endpoints").
import { hash as digestOnce, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import {
  GATEWAY_PROBE_PATH,
  GATEWAY_STATUS_PATH,
  MAX_STATUS_WAIT_MS,
  STATUS_AFTER_PARAM,
  STATUS_WAIT_PARAM,
} from '../contract/gateway-status.ts';
import type { ProviderPayload } from '../domain/index.ts';
import { type GatewayStatusReport, healthOutcome, type ProbeResult } from './health.ts';
import { type GatewayRuntime, type SpecError, specError } from './runtime.ts';
import { type UpstreamAuth, UpstreamSetupError } from './upstream.ts';

export interface OpsOptions {
  /** Bearer token of /byok/status and /byok/probe; without it both answer 404 (they list credential ids). */
  statusToken?: string | undefined;
  statusReport(): GatewayStatusReport;
  /** Resolves once the delivery sequence is past `after` or after `ms` (a held status request). */
  waitPast?(after: number, ms: number): Promise<void>;
}

/** `after` and `waitMs` of a held status request; undefined when absent or not whole numbers in range (answer now). */
function heldFor(query: unknown): { after: number; waitMs: number } | undefined {
  const q = query as Record<string, unknown> | undefined;
  const after = Number(q?.[STATUS_AFTER_PARAM]);
  const waitMs = Number(q?.[STATUS_WAIT_PARAM]);
  if (!Number.isSafeInteger(after) || after < 0 || !Number.isSafeInteger(waitMs) || waitMs <= 0) return undefined;
  return { after, waitMs: Math.min(waitMs, MAX_STATUS_WAIT_MS) };
}

export function registerOpsRoutes(ops: FastifyInstance, rt: GatewayRuntime, opts: OpsOptions): void {
  ops.get('/healthz', async () => 'ok\n');
  ops.get('/readyz', async (_req, reply) =>
    rt.routing.current() ? 'ok\n' : reply.code(503).send('no routing config loaded yet\n'),
  );
  ops.get('/metrics', async (_req, reply) =>
    reply.type(rt.metrics.registry.contentType).send(await rt.metrics.registry.metrics()),
  );

  const statusAuth = opts.statusToken ? digestOnce('sha256', `Bearer ${opts.statusToken}`, 'buffer') : undefined;
  // Digests of equal length, compared in constant time.
  const statusAllowed = (authorization: string | undefined) =>
    statusAuth !== undefined &&
    authorization !== undefined &&
    timingSafeEqual(digestOnce('sha256', authorization, 'buffer'), statusAuth);
  ops.get(GATEWAY_STATUS_PATH, async (req, reply) => {
    if (!statusAuth) return reply.code(404).send(specError(404, `no route GET ${GATEWAY_STATUS_PATH}`));
    if (!statusAllowed(req.headers.authorization))
      return reply.code(401).send(specError(401, "the status endpoint needs the operator's status token"));
    // The operator's leader holds this request until the pod loads or refuses something (docs/gateway.md).
    const held = heldFor(req.query);
    if (held && opts.waitPast) await opts.waitPast(held.after, held.waitMs);
    return opts.statusReport();
  });
  // The operator asks one pod to probe an idle credential (spec: the gateway owns upstream auth and egress).
  ops.post(GATEWAY_PROBE_PATH, async (req, reply) => {
    if (!statusAuth) return reply.code(404).send(specError(404, `no route POST ${GATEWAY_PROBE_PATH}`));
    if (!statusAllowed(req.headers.authorization))
      return reply.code(401).send(specError(401, "the probe endpoint needs the operator's status token"));
    const id = (req.body as { credentialId?: unknown } | null)?.credentialId;
    if (typeof id !== 'string') return reply.code(400).send(specError(400, 'credentialId is required'));
    const result = await probeCredential(rt, id);
    if ('error' in result) return reply.code(result.error.code).send(result);
    rt.health.recordProbe(id, result);
    rt.log?.info({ credential: id, outcome: result.outcome, status: result.status }, 'credential probed');
    return result;
  });
}

/** One cheapest authenticated call with a credential (docs/gateway.md, "Probes"); never echoes provider text. */
async function probeCredential(rt: GatewayRuntime, credentialId: string): Promise<ProbeResult | SpecError> {
  const found = rt.routing.current()?.credential(credentialId);
  if (!found) return specError(404, `credential ${credentialId} is not in the loaded routing config`);
  const provider = found.credential.provider;
  const cat = rt.catalog.current();
  const serves = (regionless: boolean) => (e: { provider: string; region: string | null }) =>
    e.provider === provider && (!regionless || e.region === null);
  const model =
    cat.models.find((m) => m.endpoints.some(serves(true))) ?? cat.models.find((m) => m.endpoints.some(serves(false)));
  const endpoint = model?.endpoints.find(serves(true)) ?? model?.endpoints.find(serves(false));
  const spec = model && endpoint ? cat.upstream(model.model, endpoint.id) : undefined;
  if (!model || !spec) return specError(409, `the catalog has no endpoint of provider ${provider} to probe`);
  const at = Date.now();
  let request: Awaited<ReturnType<UpstreamAuth['probe']>>;
  try {
    let payload: ProviderPayload;
    try {
      payload = rt.payloads.credential(provider, credentialId);
    } catch (err) {
      if (err instanceof UpstreamSetupError) return specError(409, err.message);
      throw err;
    }
    request = await rt.auth.probe(
      { kind: 'credential', account: found.account.namespace, credentialId },
      payload,
      spec,
      model.model,
    );
  } catch (err) {
    // A refused Vertex token exchange reports its HTTP status (400 invalid_grant, 401, 403): the key is refused.
    const status =
      (err as { status?: unknown; response?: { status?: unknown } }).response?.status ??
      (err as { status?: unknown }).status;
    if (typeof status === 'number' && status >= 400 && status < 500 && status !== 429)
      return { at, outcome: 'unauthorized', status };
    if (status === 429) return { at, outcome: 'rateLimited', status };
    return { at, outcome: 'upstreamError', status: typeof status === 'number' ? status : null };
  }
  if (request === null) return { at, outcome: 'ok', status: null };
  const status = await rt.transport.status(request, rt.attemptTimeoutMs);
  if (status === null) return { at, outcome: 'upstreamError', status };
  // A models list the provider does not serve (404, 405) still passed authentication.
  const outcome = healthOutcome(status, status < 300 ? 'ok' : status >= 500 ? 'upstream_error' : 'rejected') ?? 'ok';
  return { at, outcome, status };
}
