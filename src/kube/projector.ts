// A small kubelet stand-in for dev and tests: polls the compiled routing objects of the routing namespace and writes
// them into three directories with kubelet's atomic `..data` swap, the layout gateway pods see through their
// projected volumes (routing ConfigMaps, bundle Secrets, the bundle key Secret). Each volume is swapped on its own,
// as kubelet does, so readers meet the same cross-volume orderings as in a cluster.
import { createHash } from 'node:crypto';
import { kubeletWrite } from '../contract/atomic-dir.ts';
import { ROUTING_LABEL } from '../contract/routing.ts';
import { kubeClient } from './client.ts';
import type { KubeAccess } from './kubeconfig.ts';

export interface ProjectorOptions {
  kubeConfig: KubeAccess;
  routingNamespace: string;
  configDir: string;
  bundleDir: string;
  keyDir: string;
  /** Default 250 ms (kubelet's real delay is up to about a minute). */
  pollMs?: number;
  onError?: (err: Error) => void;
}

export interface Projector {
  /** One sync now; resolves when the directories reflect what the apiserver holds. */
  sync(): Promise<void>;
  stop(): Promise<void>;
}

interface Item {
  metadata: { name: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

const digest = (files: Record<string, Buffer>) => {
  const h = createHash('sha256');
  for (const name of Object.keys(files).sort()) h.update(name).update('\0').update(files[name]!).update('\0');
  return h.digest('hex');
};

export function startProjector(opts: ProjectorOptions): Projector {
  const client = kubeClient(opts.kubeConfig);
  const written = new Map<string, string>();
  const list = async (kind: 'configmaps' | 'secrets') =>
    (
      await client.request<{ items: Item[] }>('GET', `/api/v1/namespaces/${opts.routingNamespace}/${kind}`, {
        query: { labelSelector: ROUTING_LABEL },
      })
    ).items;

  const write = (dir: string, files: Record<string, Buffer>) => {
    const d = digest(files);
    if (written.get(dir) === d) return;
    kubeletWrite(dir, files);
    written.set(dir, d);
  };

  const sync = async () => {
    const [cms, secrets] = await Promise.all([list('configmaps'), list('secrets')]);
    const routing: Record<string, Buffer> = {};
    for (const cm of cms) {
      for (const [k, v] of Object.entries(cm.data ?? {})) routing[k] = Buffer.from(v, 'utf8');
      for (const [k, v] of Object.entries(cm.binaryData ?? {})) routing[k] = Buffer.from(v, 'base64');
    }
    const bundles: Record<string, Buffer> = {};
    const keys: Record<string, Buffer> = {};
    for (const s of secrets) {
      const target =
        s.metadata.labels?.[ROUTING_LABEL] === 'bundle-key'
          ? keys
          : s.metadata.labels?.[ROUTING_LABEL] === 'bundle'
            ? bundles
            : undefined;
      if (!target) continue;
      for (const [k, v] of Object.entries(s.data ?? {})) target[k] = Buffer.from(v, 'base64');
    }
    // Same order as the operator writes: bundles and keys before the index that names them.
    if (Object.keys(keys).length > 0) write(opts.keyDir, keys);
    write(opts.bundleDir, bundles);
    if (Object.keys(routing).length > 0) write(opts.configDir, routing);
  };

  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  const tick = () => {
    running = sync().catch((err: unknown) => opts.onError?.(err instanceof Error ? err : new Error(String(err))));
    void running.then(() => {
      if (!stopped) timer = setTimeout(tick, opts.pollMs ?? 250);
    });
  };
  let timer: NodeJS.Timeout | undefined = setTimeout(tick, 0);
  return {
    sync: async () => {
      await running;
      await sync();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
