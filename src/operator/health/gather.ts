// Gather, the health writer's contact with the data plane: finds the gateway pods (the gateway Service's ready
// EndpointSlice endpoints, or fixed URLs), pulls GET /byok/status from each, and asks them to probe idle
// credentials (POST /byok/probe). No decisions and no Kubernetes writes here.
import type { KubernetesObject, V1EndpointSliceList } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import {
  GATEWAY_PROBE_PATH,
  GATEWAY_STATUS_PATH,
  type GatewayStatusReport,
  parseGatewayStatusReport,
  STATUS_AFTER_PARAM,
  STATUS_WAIT_PARAM,
} from '../../contract/gateway-status.ts';
import { publicId } from '../../domain/ids.ts';
import { kubeClient } from '../../kube/client.ts';
import type { KubeAccess } from '../../kube/kubeconfig.ts';

export const PROBE_ANNOTATION = 'byok.gateway.dev/probe';

/** What the collector needs of the gateway status configuration (GatewayStatusConfig in writer.ts). */
export interface CollectorConfig {
  token: string;
  service?: { namespace: string; name: string; port?: string | number; scheme?: 'http' | 'https' };
  urls?: string[];
  requestTimeoutMs?: number;
  probe?: { idleMs?: number; perProviderIntervalMs?: number };
}

export interface Target {
  pod: string;
  url: string;
}

type Report = GatewayStatusReport;

export class GatewayCollector {
  private readonly config: CollectorConfig;
  private readonly kubeConfig: KubeAccess;
  private readonly log: Pick<Logger, 'debug'>;
  private readonly timeoutMs: number;
  private readonly probesTotal: Counter;
  private readonly probeAsked = new Map<string, number>();
  private readonly providerProbed = new Map<string, number>();
  private probeTurn = 0;

  constructor(deps: {
    config: CollectorConfig;
    kubeConfig: KubeAccess;
    log: Pick<Logger, 'debug'>;
    probesTotal: Counter;
  }) {
    this.config = deps.config;
    this.kubeConfig = deps.kubeConfig;
    this.log = deps.log;
    this.timeoutMs = deps.config.requestTimeoutMs ?? 3000;
    this.probesTotal = deps.probesTotal;
  }

  /** The gateway pods to ask, by pod name. */
  async targets(): Promise<Target[]> {
    const config = this.config;
    if (config.urls) return config.urls.map((url) => ({ pod: new URL(url).host, url }));
    const svc = config.service!;
    const slices = await kubeClient(this.kubeConfig).request<V1EndpointSliceList>(
      'GET',
      `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(svc.namespace)}/endpointslices`,
      {
        query: { labelSelector: `kubernetes.io/service-name=${svc.name}` },
      },
    );
    const out = new Map<string, Target>();
    for (const slice of slices.items) {
      const port = (slice.ports ?? []).find((p) =>
        typeof svc.port === 'string' ? p.name === svc.port : svc.port === undefined || p.port === svc.port,
      )?.port;
      if (port === undefined) continue;
      for (const ep of slice.endpoints ?? []) {
        if (ep.conditions?.ready === false) continue;
        const address = ep.addresses[0];
        if (!address) continue;
        const host = slice.addressType === 'IPv6' ? `[${address}]` : address;
        const pod = ep.targetRef?.name ?? `${host}:${port}`;
        out.set(pod, { pod, url: `${svc.scheme ?? 'http'}://${host}:${port}` });
      }
    }
    return [...out.values()];
  }

  /**
   * One pod's status report; undefined when it does not answer with the known format. With `held`, the pod holds the
   * request until its delivery sequence is past `after` (it loaded or refused something) or `waitMs` passed.
   */
  async report(
    target: Target,
    held?: { after: number; waitMs: number; signal?: AbortSignal },
  ): Promise<Report | undefined> {
    try {
      const query = held ? `?${STATUS_AFTER_PARAM}=${held.after}&${STATUS_WAIT_PARAM}=${held.waitMs}` : '';
      const timeout = AbortSignal.timeout(this.timeoutMs + (held?.waitMs ?? 0));
      const signal = held?.signal ? AbortSignal.any([timeout, held.signal]) : timeout;
      const res = await fetch(`${target.url}${GATEWAY_STATUS_PATH}${query}`, {
        headers: { authorization: `Bearer ${this.config.token}` },
        signal,
      });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      // Every field checked (src/contract/gateway-status.ts): a malformed report counts that pod as failed for the pass.
      return parseGatewayStatusReport(await res.json());
    } catch (err) {
      this.log.debug(
        { pod: target.pod, err: err instanceof Error ? err.message : String(err) },
        'gateway status unavailable',
      );
      return undefined;
    }
  }

  /** Reports of every pod that answered, by pod name. */
  async reports(found: readonly Target[]): Promise<Map<string, Report>> {
    const reports = new Map<string, Report>();
    await Promise.all(
      found.map(async (target) => {
        const r = await this.report(target);
        if (r) reports.set(target.pod, r);
      }),
    );
    return reports;
  }

  /**
   * Probes of idle credentials annotated byok.gateway.dev/probe: "true": the longest idle one of each provider,
   * at most one per provider per perProviderIntervalMs, pods taken in turn. `idleSince` is when a credential was
   * last used or its probe last reported.
   */
  async probeIdle(
    creds: readonly KubernetesObject[],
    pods: readonly Target[],
    now: number,
    idleSince: (id: string) => number,
  ): Promise<void> {
    const config = this.config;
    if (!config.probe || pods.length === 0) return;
    const idleMs = config.probe.idleMs ?? 3_600_000;
    const spacing = config.probe.perProviderIntervalMs ?? 10_000;
    const due = new Map<string, { id: string; idleSince: number }>();
    for (const cred of creds) {
      if (cred.metadata?.annotations?.[PROBE_ANNOTATION] !== 'true') continue;
      const id = publicId('BYOKCredential', cred.metadata.namespace ?? '', cred.metadata.name ?? '');
      const since = Math.max(idleSince(id), this.probeAsked.get(id) ?? 0);
      if (now - since < idleMs) continue;
      const provider = (cred as { spec?: { provider?: string } }).spec?.provider ?? '';
      if (now - (this.providerProbed.get(provider) ?? -Infinity) < spacing) continue;
      // The longest idle credential of each provider goes first.
      const best = due.get(provider);
      if (!best || since < best.idleSince) due.set(provider, { id, idleSince: since });
    }
    await Promise.all(
      [...due].map(async ([provider, { id }]) => {
        const pod = pods[this.probeTurn++ % pods.length]!;
        this.providerProbed.set(provider, now);
        this.probeAsked.set(id, now);
        try {
          const res = await fetch(`${pod.url}${GATEWAY_PROBE_PATH}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${config.token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ credentialId: id }),
            signal: AbortSignal.timeout(this.timeoutMs * 5),
          });
          await res.text();
          this.probesTotal.inc({ provider, result: res.ok ? 'done' : 'refused' });
        } catch {
          this.probesTotal.inc({ provider, result: 'unreachable' });
        }
      }),
    );
  }

  /** A credential that is gone: forget when it was probed. */
  forget(id: string): void {
    this.probeAsked.delete(id);
  }
}
