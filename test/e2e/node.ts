// A one-node cluster from parts: a Linux bridge with a pod CIDR that exists only on this machine,
// containerd (Debian package) with runc and the CNI bridge plugin, and kubelet, kube-controller-manager,
// kube-scheduler and kube-proxy built from the control plane's own Go module (hack/node/build.sh). Every address is
// the bridge's or a pod's behind it; everything is torn down at the end, interfaces and iptables chains included.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { type ControlPlane, ProcessSet } from '../../src/controlplane/control-plane.ts';
import { freePort } from '../../src/controlplane/ports.ts';
import { sleep } from '../support/until.ts';
import { kubeRouterArgs } from './netpol.ts';

export const BRIDGE = 'byok-e2e0';
export const BRIDGE_ADDRESS = '10.250.0.1';
export const POD_CIDR = '10.250.0.0/24';
export const NODE_NAME = 'byok-e2e';
export const PAUSE_IMAGE = 'localhost/byok-pause:e2e';
export const SERVICE_CIDR = '10.96.0.0/24';

const sh = (cmd: string, args: string[], input?: string) =>
  execFileSync(cmd, args, {
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'pipe'],
    ...(input !== undefined ? { input } : {}),
  });
const quiet = (cmd: string, args: string[]) => {
  try {
    return sh(cmd, args);
  } catch {
    return '';
  }
};

/** The bridge pods hang off; the apiserver listens on its address, so it must exist before the control plane. */
export function createBridge(): void {
  deleteBridge();
  sh('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
  sh('ip', ['addr', 'add', `${BRIDGE_ADDRESS}/24`, 'dev', BRIDGE]);
  sh('ip', ['link', 'set', BRIDGE, 'up']);
  // Service traffic between pods is DNATed and masqueraded on the host, then forwarded back onto the bridge.
  writeFileSync('/proc/sys/net/ipv4/ip_forward', '1');
}

export function deleteBridge(): void {
  if (quiet('ip', ['link', 'show', BRIDGE]) !== '') quiet('ip', ['link', 'del', BRIDGE]);
}

/**
 * kube-router's filter chains and ipsets. Its own `--cleanup-config` reports success yet leaves them with the nftables
 * flavour of iptables (and then crashes in its service-proxy cleanup), so they are removed here: the jumps from the
 * built-in chains (commented `kube-router netpol`), then its chains, then its ipsets.
 */
export function removeKubeRouterRules(): void {
  const rules = quiet('iptables-save', ['-t', 'filter']).split('\n');
  for (const rule of rules.filter((r) => /^-A (INPUT|FORWARD|OUTPUT) .*kube-router netpol/.test(r))) {
    quiet('sh', ['-c', `iptables -t filter ${rule.replace(/^-A /, '-D ')}`]);
  }
  const chains = rules
    .map((r) => /^:(KUBE-ROUTER-\S+|KUBE-POD-FW-\S+|KUBE-NWPLCY-\S+)/.exec(r)?.[1])
    .filter((c): c is string => !!c);
  for (const chain of chains) quiet('iptables', ['-t', 'filter', '-F', chain]);
  for (const chain of chains) quiet('iptables', ['-t', 'filter', '-X', chain]);
  for (const set of quiet('ipset', ['list', '-n'])
    .split('\n')
    .filter((n) => /^(KUBE-DST-|KUBE-SRC-|kube-router-)/.test(n)))
    quiet('ipset', ['destroy', set]);
}

export interface RunningNode {
  readonly dir: string;
  readonly containerdSocket: string;
  ctr(...args: string[]): string;
  /** Log of one component: containerd, kubelet, kube-controller-manager, kube-scheduler, kube-proxy. */
  logOf(name: string): string;
  stop(): Promise<void>;
}

/** `netpolBin`: the directory holding kube-router (hack/netpol/build.sh), which enforces NetworkPolicies on the node. */
export async function startNode(opts: {
  nodeBin: string;
  netpolBin: string;
  cp: ControlPlane;
  dir: string;
  images: string[];
  log: (l: string) => void;
}): Promise<RunningNode> {
  const { nodeBin, cp, dir, log } = opts;
  mkdirSync(dir, { recursive: true });
  // The kubelet and containerd get 10 s to stop their pods and tasks before SIGKILL.
  const procs = new ProcessSet(dir, 10_000);
  const path = (...p: string[]) => join(dir, ...p);
  const socket = path('containerd', 'containerd.sock');
  const ctr = (...args: string[]) => sh('ctr', ['--address', socket, '-n', 'k8s.io', ...args]);

  // ---- containerd ----
  mkdirSync(path('cni'), { recursive: true });
  writeFileSync(
    path('containerd.toml'),
    [
      'version = 2',
      `root = "${path('containerd', 'root')}"`,
      `state = "${path('containerd', 'state')}"`,
      '[grpc]',
      `  address = "${socket}"`,
      '[plugins."io.containerd.grpc.v1.cri"]',
      `  sandbox_image = "${PAUSE_IMAGE}"`,
      // The sandbox asks for a negative oom_score_adj, which needs CAP_SYS_RESOURCE (root here lacks it).
      '  restrict_oom_score_adj = true',
      '  [plugins."io.containerd.grpc.v1.cri".cni]',
      '    bin_dir = "/usr/lib/cni"',
      `    conf_dir = "${path('cni')}"`,
      '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
      '    runtime_type = "io.containerd.runc.v2"',
      '',
    ].join('\n'),
  );
  writeFileSync(
    path('cni', '10-byok-e2e.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'byok-e2e',
      plugins: [
        {
          type: 'bridge',
          bridge: BRIDGE,
          isGateway: true,
          isDefaultGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: POD_CIDR, gateway: BRIDGE_ADDRESS }]],
            dataDir: path('cni-ipam'),
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    }),
  );
  log('starting containerd');
  procs.start('containerd', 'containerd', ['--config', path('containerd.toml')]);
  for (let i = 0; i < 100 && !existsSync(socket); i++) await sleep(100);
  for (let i = 0; i < 50; i++) {
    if (quiet('ctr', ['--address', socket, 'version']).includes('Server')) break;
    await sleep(200);
  }
  for (const image of opts.images) ctr('images', 'import', image);

  // ---- the control plane's controllers and scheduler, and kube-proxy ----
  const kubeconfig = cp.kubeconfigPath;
  log('starting kube-controller-manager, kube-scheduler and kube-proxy');
  procs.start('kube-controller-manager', join(nodeBin, 'kube-controller-manager'), [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    `--service-account-private-key-file=${join(cp.workDir, 'sa.key')}`,
    `--root-ca-file=${join(cp.workDir, 'ca.crt')}`,
    '--leader-elect=false',
    '--use-service-account-credentials=false',
    '--bind-address=127.0.0.1',
    '--secure-port=0',
  ]);
  procs.start('kube-scheduler', join(nodeBin, 'kube-scheduler'), [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    '--leader-elect=false',
    '--bind-address=127.0.0.1',
    '--secure-port=0',
  ]);
  writeFileSync(
    path('kube-proxy.yaml'),
    stringify({
      apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
      kind: 'KubeProxyConfiguration',
      clientConnection: { kubeconfig },
      mode: 'iptables',
      hostnameOverride: NODE_NAME,
      bindAddress: BRIDGE_ADDRESS,
      clusterCIDR: POD_CIDR,
      // Pod-to-Service-to-pod on one bridge returns through the host only when masqueraded (no br_netfilter here).
      iptables: { masqueradeAll: true },
      // Conntrack sysctls are not ours to raise (no CAP_SYS_RESOURCE / read-only /proc/sys parts).
      conntrack: { maxPerCore: 0, min: 0 },
      metricsBindAddress: `127.0.0.1:${await freePort()}`,
      healthzBindAddress: `127.0.0.1:${await freePort()}`,
    }),
  );
  procs.start('kube-proxy', join(nodeBin, 'kube-proxy'), [`--config=${path('kube-proxy.yaml')}`]);

  // ---- kubelet ----
  writeFileSync(
    path('kubelet.yaml'),
    stringify({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      // This machine: cgroup v1 controllers beside a cgroup2 mount, no systemd, root without CAP_SYS_RESOURCE
      // (../shared/notes/real-node.md).
      cgroupDriver: 'cgroupfs',
      failCgroupV1: false,
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      failSwapOn: false,
      resolvConf: '',
      localStorageCapacityIsolation: false,
      address: BRIDGE_ADDRESS,
      readOnlyPort: 0,
      healthzBindAddress: '127.0.0.1',
      healthzPort: 0,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: join(cp.workDir, 'ca.crt') },
      },
      authorization: { mode: 'Webhook' },
      evictionHard: { 'memory.available': '50Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
      maxPods: 30,
      // The e2e's DNS (dns.ts) on the bridge address: pods resolve the chart's Service names.
      clusterDNS: [BRIDGE_ADDRESS],
      clusterDomain: 'cluster.local',
      // Left at kubelet's defaults on purpose: the delivery lag measured here is the one users get.
      // (syncFrequency 1m; configMapAndSecretChangeDetectionStrategy Watch.)
    }),
  );
  log('starting kubelet');
  procs.start('kubelet', join(nodeBin, 'kubelet'), [
    `--config=${path('kubelet.yaml')}`,
    `--kubeconfig=${kubeconfig}`,
    `--root-dir=${path('kubelet')}`,
    `--cert-dir=${path('kubelet-pki')}`,
    `--container-runtime-endpoint=unix://${socket}`,
    `--hostname-override=${NODE_NAME}`,
    `--node-ip=${BRIDGE_ADDRESS}`,
    '--v=1',
  ]);

  // NetworkPolicies: kube-router's firewall alone (iptables and ipset; this kernel lacks nftables' queue expression,
  // which kube-network-policies needs). It matches pods by address in ipsets and filters bridged traffic too. It
  // looks its node up once at start, so it starts once the kubelet has registered the node.
  for (
    let i = 0;
    i < 120 &&
    quiet(join(cp.binDir, 'kubectl'), ['--kubeconfig', kubeconfig, 'get', 'node', NODE_NAME, '-o', 'name']) === '';
    i++
  )
    await sleep(500);
  removeKubeRouterRules();
  log('starting kube-router (network policy only)');
  procs.start(
    'kube-router',
    join(opts.netpolBin, 'kube-router'),
    kubeRouterArgs({ kubeconfig, nodeName: NODE_NAME, serviceCidr: SERVICE_CIDR }),
  );

  const stop = async () => {
    await procs.stop('kubelet');
    // Pod sandboxes and containers the kubelet left: their tasks, then the containers (network namespaces go with them).
    const ctrQuiet = (...args: string[]) => quiet('ctr', ['--address', socket, '-n', 'k8s.io', ...args]);
    const ids = (what: 'tasks' | 'containers') => ctrQuiet(what, 'ls', '-q').split('\n').filter(Boolean);
    for (const id of ids('tasks')) ctrQuiet('tasks', 'kill', '-s', 'SIGKILL', id);
    await sleep(1000);
    for (const id of ids('tasks')) ctrQuiet('tasks', 'delete', '-f', id);
    for (const id of ids('containers')) ctrQuiet('containers', 'delete', id);
    for (const name of ['kube-router', 'kube-proxy', 'kube-scheduler', 'kube-controller-manager', 'containerd'])
      await procs.stop(name);
    quiet(join(nodeBin, 'kube-proxy'), ['--cleanup']);
    removeKubeRouterRules();
    // Whatever is still mounted under the node's directories (pod volumes, sandboxes' shm, overlay snapshots).
    const mounts = readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[1] ?? '')
      .filter((m) => m.startsWith(dir))
      .sort((a, b) => b.length - a.length);
    for (const m of mounts) quiet('umount', ['-l', m]);
    for (const link of quiet('ip', ['-o', 'link', 'show', 'master', BRIDGE])
      .split('\n')
      .map((l) => /^\d+: ([^@:]+)/.exec(l)?.[1])
      .filter((n): n is string => !!n))
      quiet('ip', ['link', 'del', link]);
    // The pods' network namespaces that containerd's CNI made (cni-<id>); nobody else's.
    for (const ns of quiet('ip', ['netns', 'list'])
      .split('\n')
      .map((l) => l.split(' ')[0] ?? '')
      .filter((n) => n.startsWith('cni-')))
      quiet('ip', ['netns', 'delete', ns]);
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    dir,
    containerdSocket: socket,
    ctr,
    logOf: (name) => (existsSync(path(`${name}.log`)) ? readFileSync(path(`${name}.log`), 'utf8') : ''),
    stop,
  };
}
