// NetworkPolicy on the e2e node: kube-router (hack/netpol/build.sh) as a network-policy controller only, and TCP
// probes from inside a pod's network namespace (the packets leave through the pod's own interface with the pod's
// address, so the node's filter sees them exactly as the pod's own traffic) or from the host, where the kube-apiserver
// runs. A probe says `admitted` when the TCP handshake completes and `refused` otherwise, with the error it saw.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export type Verdict = 'admitted' | 'refused';

export interface PolicyCheck {
  from: string;
  to: string;
  expected: Verdict;
  observed: Verdict;
  /** How the connection ended (connected, ECONNREFUSED, timeout...). */
  detail: string;
}

/** kube-router's arguments: the firewall (NetworkPolicy) controller alone, no BGP routing, no service proxy. */
export function kubeRouterArgs(opts: { kubeconfig: string; nodeName: string; serviceCidr: string }): string[] {
  return [
    `--kubeconfig=${opts.kubeconfig}`,
    `--hostname-override=${opts.nodeName}`,
    '--run-firewall=true',
    '--run-router=false',
    '--run-service-proxy=false',
    '--enable-ipv4=true',
    '--enable-ipv6=false',
    `--service-cluster-ip-range=${opts.serviceCidr}`,
    '--metrics-port=0',
    '--health-port=0',
    '--v=1',
  ];
}

/** The network namespace (`ip netns` name) whose eth0 holds this pod address; containerd's CNI names them cni-<id>. */
export async function netnsOf(podIp: string): Promise<string> {
  const { stdout } = await run('ip', ['netns', 'list'], { encoding: 'utf8' });
  for (const name of stdout
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n.startsWith('cni-'))) {
    const addrs = await run('ip', ['-n', name, '-4', '-o', 'addr', 'show'], { encoding: 'utf8' }).then(
      (r) => r.stdout,
      () => '',
    );
    if (addrs.includes(` ${podIp}/`)) return name;
  }
  throw new Error(`no network namespace holds ${podIp}`);
}

const PROBE = `
const [host, port] = process.argv.slice(1);
const s = require('node:net').connect({ host, port: Number(port) });
s.setTimeout(3000, () => { console.log('timeout'); process.exit(0); });
s.on('connect', () => { console.log('connected'); s.destroy(); process.exit(0); });
s.on('error', (e) => { console.log(e.code ?? e.message); process.exit(0); });
`;

/** One TCP connection attempt; `netns` undefined: from the host (the kube-apiserver's own address). */
export async function probe(
  netns: string | undefined,
  host: string,
  port: number,
): Promise<{ observed: Verdict; detail: string }> {
  const node = [process.execPath, '-e', PROBE, host, String(port)];
  const [cmd, ...args] = netns ? ['ip', 'netns', 'exec', netns, ...node] : node;
  const { stdout } = await run(cmd!, args, { encoding: 'utf8', timeout: 15_000 });
  const detail = stdout.trim();
  return { observed: detail === 'connected' ? 'admitted' : 'refused', detail };
}
