// One gateway as a pod runs it: the real CLI (`node src/cli/main.ts gateway`) in its own Node process. It binds its
// own ports (pass `--port 0 --ops-port 0`) and its URLs come from its "gateway listening" log line (at
// `--log-level info`), so no port is chosen before the gateway holds it.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { DiscoveryV1Api, type KubeConfig } from '@kubernetes/client-node';
import { loopbackEndpointSlice } from '../../src/kube/loopback-endpoints.ts';
import { type Projector, startProjector } from '../../src/kube/projector.ts';
import { reapWithWorker } from './reaper.ts';

const MAIN = join(import.meta.dirname, '..', '..', 'src', 'cli', 'main.ts');

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  /** The ops listener (health, metrics, the status endpoint). */
  opsUrl: string;
  /** Everything the process wrote to stdout and stderr. */
  output: string[];
}

/** Starts `gateway ...args` and resolves once it listens; `running` holds it until it exits. */
export function spawnGateway(args: string[], running: Set<ChildProcess>): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [MAIN, 'gateway', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  reapWithWorker(child);
  child.once('exit', () => running.delete(child));
  const output: string[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`gateway did not log "gateway listening" within 30 s:\n${output.join('')}`)),
      30_000,
    );
    let pending = '';
    let listening = false;
    child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stdout!.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      output.push(text);
      if (listening) return;
      pending += text;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        const entry = (() => {
          try {
            return JSON.parse(line) as { msg?: string; url?: string; opsUrl?: string };
          } catch {
            return undefined;
          }
        })();
        if (entry?.msg === 'gateway listening' && entry.url && entry.opsUrl) {
          listening = true;
          clearTimeout(timer);
          resolve({ child, url: entry.url, opsUrl: entry.opsUrl, output });
        }
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (${code ?? signal}) before listening:\n${output.join('')}`));
    });
  });
}

/** SIGTERM (the CLI closes the gateway and its ledger), SIGKILL after `killAfterMs`. */
export async function stopProcess(child: ChildProcess, killAfterMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  await exited;
  clearTimeout(timer);
}

/**
 * The gateway Service's EndpointSlices (`byok-gateway`, port `ops`), as kube-controller-manager would write them for
 * these processes (FQDN: 127.0.0.0/8 is refused in IPv4 slices), so the operator's health writer finds them.
 */
export async function publishGatewayEndpoints(
  kc: KubeConfig,
  routingNs: string,
  gateways: readonly GatewayProcess[],
): Promise<void> {
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  for (const [i, gw] of gateways.entries()) {
    await discovery.createNamespacedEndpointSlice({
      namespace: routingNs,
      body: loopbackEndpointSlice({
        namespace: routingNs,
        name: `byok-gateway-${i}`,
        service: 'byok-gateway',
        portName: 'ops',
        port: Number(new URL(gw.opsUrl).port),
        pod: `gateway-${i}`,
      }),
    });
  }
}

/** The mounted directories a gateway reads its routing config, credential bundles and bundle key from. */
export interface GatewayMounts {
  configDir: string;
  bundleDir: string;
  keyDir: string;
}

/**
 * A test gateway's command line on `mounts`, with the catalog and upstream CA that writeGatewayFiles put in `root`:
 * free ports, a 2 s attempt timeout, loopback egress, info logs; `more` is appended.
 */
export function gatewayCommand(root: string, mounts: GatewayMounts, more: string[] = []): string[] {
  return [
    '--config-dir',
    mounts.configDir,
    '--bundle-dir',
    mounts.bundleDir,
    '--key-dir',
    mounts.keyDir,
    '--catalog',
    join(root, 'catalog.json'),
    '--port',
    '0',
    '--ops-port',
    '0',
    '--attempt-timeout-ms',
    '2000',
    '--upstream-ca',
    join(root, 'upstream-ca.pem'),
    '--log-level',
    'info',
    '--egress-allow',
    '127.0.0.1/32',
    ...more,
  ];
}

/**
 * Gateway pods as the health tests run them: each process on its own kubelet-style projected directories under
 * `root` (routing-<i>, bundles-<i>, key-<i>), with the catalog, upstream CA and status token `root` holds, the
 * status endpoint on and loopback egress; `extraArgs` adds pod i's own flags (e.g. the ledger's). Listed for the health writer
 * through EndpointSlices of the Service `byok-gateway`.
 */
export async function spawnProjectedGateways(
  kc: KubeConfig,
  routingNamespace: string,
  root: string,
  running: Set<ChildProcess>,
  extraArgs: (pod: number) => string[],
  count = 2,
): Promise<{ projectors: Projector[]; gateways: GatewayProcess[] }> {
  const projectors: Projector[] = [];
  const gateways: GatewayProcess[] = [];
  for (let i = 0; i < count; i++) {
    const dirs = {
      configDir: join(root, `routing-${i}`),
      bundleDir: join(root, `bundles-${i}`),
      keyDir: join(root, `key-${i}`),
    };
    projectors.push(startProjector({ kubeConfig: kc, routingNamespace, ...dirs, pollMs: 100 }));
    gateways.push(
      await spawnGateway(
        gatewayCommand(root, dirs, ['--status-token-file', join(root, 'status-token'), ...extraArgs(i)]),
        running,
      ),
    );
  }
  await publishGatewayEndpoints(kc, routingNamespace, gateways);
  return { projectors, gateways };
}
