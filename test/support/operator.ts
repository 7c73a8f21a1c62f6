// The operator harness for integration tests: an operator scoped to the test's namespaces with its pino output
// captured, typed reads of the five kinds (and a wait on Ready), Secrets, and the operator's metrics.
import { Writable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { REDACT_PATHS } from '../../src/operator/logger.ts';
import { type OperatorOptions, type RunningOperator, startOperator } from '../../src/operator/run.ts';
import { core, crApi } from './kube.ts';
import { until } from './until.ts';

export interface CapturedOperator {
  op: RunningOperator;
  logs: string[];
}

export async function startTestOperator(
  kc: KubeConfig,
  opts: Partial<OperatorOptions> & { routingNamespace: string; watchNamespaces: string[] },
): Promise<CapturedOperator> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      cb();
    },
  });
  const logger = pino({ level: 'debug', redact: { paths: REDACT_PATHS, censor: '[REDACTED]' } }, sink);
  const op = await startOperator({
    kubeConfig: kc,
    httpPort: 0,
    httpHost: '127.0.0.1',
    logger,
    resyncSeconds: 60,
    missingSecretMaxDelayMs: 1000,
    leaderElection: { enabled: false },
    ...opts,
  });
  return { op, logs };
}

export interface Cond {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
}
export interface Obj {
  metadata: { name: string; generation?: number; resourceVersion?: string; creationTimestamp?: string };
  spec?: Record<string, unknown>;
  status?: { conditions?: Cond[]; [k: string]: unknown };
}

export function cond(o: Obj | undefined, type: string): Cond | undefined {
  return o?.status?.conditions?.find((c) => c.type === type);
}

export function resource(plural: string, ns: string) {
  const api = crApi(plural, ns);
  return {
    ...api,
    get: async (name: string) => (await api.get(name)) as Obj,
    /** Waits until Ready has the given status (and reason) for the current generation. */
    waitReady: (name: string, status: 'True' | 'False', reason?: string, timeoutMs = 15_000) =>
      until(
        `${plural}/${name} Ready=${status}${reason ? ` (${reason})` : ''}`,
        async () => {
          const o = (await api.get(name)) as Obj;
          const c = cond(o, 'Ready');
          return c &&
            c.status === status &&
            (!reason || c.reason === reason) &&
            o.status?.observedGeneration === o.metadata.generation
            ? o
            : undefined;
        },
        timeoutMs,
      ),
    /** Read-modify-write of the whole object (retried on conflicts). */
    update: async (name: string, mutate: (o: Obj) => void) => {
      for (let i = 0; ; i++) {
        const o = (await api.get(name)) as Obj;
        mutate(o);
        try {
          return await api.replace(name, o);
        } catch (err) {
          if (i > 5 || (err as { code?: number }).code !== 409) throw err;
        }
      }
    },
  };
}

export async function createSecret(
  kc: KubeConfig,
  ns: string,
  name: string,
  value: string,
  key = 'key',
  labels?: Record<string, string>,
): Promise<void> {
  await core(kc).createNamespacedSecret({
    namespace: ns,
    body: { metadata: { name, ...(labels ? { labels } : {}) }, stringData: { [key]: value } },
  });
}

export async function setSecret(kc: KubeConfig, ns: string, name: string, value: string, key = 'key'): Promise<void> {
  await core(kc).patchNamespacedSecret({
    namespace: ns,
    name,
    body: [{ op: 'replace', path: `/data/${key}`, value: Buffer.from(value).toString('base64') }],
  });
}

export async function metricsText(op: RunningOperator): Promise<string> {
  const res = await fetch(`${op.httpAddress}/metrics`);
  return res.text();
}

export function metricValue(text: string, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (want.every((w) => line.includes(w))) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}
