// Gateway processes as pods run them (`node src/cli/main.ts gateway`), for the integration tests that need real
// gateway processes: started, their URLs read from the "gateway listening" line, and stopped.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { DiscoveryV1Api, type KubeConfig } from '@kubernetes/client-node';
import { loopbackEndpointSlice } from '../../../src/kube/loopback-endpoints.ts';

const MAIN = join(import.meta.dirname, '..', '..', '..', 'src', 'cli', 'main.ts');

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  /** The ops listener (health, metrics, the status endpoint). */
  opsUrl: string;
  /** Everything the process wrote to stdout and stderr. */
  output: string[];
}

/** One gateway as a pod runs it: the real CLI in its own Node process; its URL comes from the "gateway listening" log line. */
export function spawnGateway(args: string[], running: Set<ChildProcess>): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [MAIN, 'gateway', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  child.once('exit', () => running.delete(child));
  const output: string[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not log "gateway listening" within 30 s:\n${output.join('')}`)), 30_000);
    let pending = '';
    child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stdout!.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      output.push(text);
      pending += text;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        const entry = (() => { try { return JSON.parse(line) as { msg?: string; url?: string; opsUrl?: string }; } catch { return undefined; } })();
        if (entry?.msg === 'gateway listening' && entry.url && entry.opsUrl) {
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

/** SIGTERM (the CLI closes the gateway and its ledger), SIGKILL after 5 s. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/**
 * The gateway Service's EndpointSlices (`byok-gateway`, port `ops`), as kube-controller-manager would write them for
 * these processes (FQDN: 127.0.0.0/8 is refused in IPv4 slices), so the operator's health writer finds them.
 */
export async function publishGatewayEndpoints(kc: KubeConfig, routingNs: string, gateways: readonly GatewayProcess[]): Promise<void> {
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  for (const [i, gw] of gateways.entries()) {
    await discovery.createNamespacedEndpointSlice({
      namespace: routingNs,
      body: loopbackEndpointSlice({ namespace: routingNs, name: `byok-gateway-${i}`, service: 'byok-gateway', portName: 'ops', port: Number(new URL(gw.opsUrl).port), pod: `gateway-${i}` }),
    });
  }
}
