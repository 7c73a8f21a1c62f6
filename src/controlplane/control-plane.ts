// A real etcd + kube-apiserver on loopback, the way controller-runtime's envtest runs them: generated
// certificates, an admin identity, RBAC, service-account keys and the front-proxy flags API aggregation needs.
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { createWriteStream, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { stringify } from 'yaml';
import { type CertificateAuthority, createCertificateAuthority } from './pki.ts';
import { freePort, startOwnPorts } from './ports.ts';
import { startReaper } from './reaper.ts';

/** GOGC for etcd and kube-apiserver (Go's default is 100): 14 % less apiserver CPU for a few hundred MB more. */
const LOCAL_GOGC = '400';

export interface ControlPlaneOptions {
  /** Directory holding kube-apiserver and etcd (and kubectl); defaults to $BYOK_CONTROL_PLANE_BIN or $KUBEBUILDER_ASSETS. */
  binDir?: string;
  /** Progress lines; silent by default. */
  log?: (line: string) => void;
  /** Seconds to wait for readiness. */
  startTimeoutSeconds?: number;
  /**
   * Where kube-apiserver listens and what it advertises (the `kubernetes` Service's endpoint). Default 127.0.0.1: only
   * this machine's processes. The e2e node gives the address of a bridge it made, so that pods reach the API.
   */
  address?: string;
  /** Run the ServiceAccount admission plugin (pods get their token volume); off for the suite, which runs no pods. */
  serviceAccountAdmission?: boolean;
  /**
   * A fixed secure port instead of a free one. The e2e node gives 6443 on its own bridge address: a NetworkPolicy
   * matches the port after kube-proxy's DNAT, and the chart's egress rule for the Kubernetes API names 443 and 6443.
   */
  port?: number;
  /** Write every request's metadata (user, verb, resource) to this JSON-lines audit log: the e2e counts requests by user. */
  auditLogPath?: string;
}

export interface ControlPlane {
  readonly server: string;
  readonly kubeconfigPath: string;
  readonly workDir: string;
  readonly binDir: string;
  readonly version: string;
  /** A kubeconfig for a non-admin user, authenticated by a client certificate; RBAC decides what it may do. */
  kubeconfigFor(user: string, groups?: string[]): Promise<string>;
  /** Stops and starts kube-apiserver on the same port and etcd data: clients see a real outage. */
  restartApiServer(): Promise<void>;
  stop(): Promise<void>;
}

export function resolveBinDir(explicit?: string): string {
  const candidates = [explicit, process.env.BYOK_CONTROL_PLANE_BIN, process.env.KUBEBUILDER_ASSETS].filter(
    (d): d is string => !!d,
  );
  for (const dir of candidates) {
    if (existsSync(join(dir, 'kube-apiserver')) && existsSync(join(dir, 'etcd'))) return dir;
  }
  throw new Error(
    'kube-apiserver and etcd not found: run through `npm test` / `npm run dev` (which build them), ' +
      'or set BYOK_CONTROL_PLANE_BIN or KUBEBUILDER_ASSETS to a directory that holds them',
  );
}

interface Probe {
  status: number;
  body: string;
}

function get(url: string, tls?: { ca: string; cert: string; key: string }, body?: string): Promise<Probe> {
  return new Promise((resolve, reject) => {
    const req = (tls ? httpsRequest : httpRequest)(
      url,
      { ...tls, timeout: 2000, method: body === undefined ? 'GET' : 'POST' },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

function kubeconfig(server: string, caPem: string, user: string, certPem: string, keyPem: string): string {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'byok-local', cluster: { server, 'certificate-authority-data': b64(caPem) } }],
    users: [{ name: user, user: { 'client-certificate-data': b64(certPem), 'client-key-data': b64(keyPem) } }],
    contexts: [{ name: 'byok-local', context: { cluster: 'byok-local', user } }],
    'current-context': 'byok-local',
  });
}

/** Child processes by name, each logging to <workDir>/<name>.log with its pid in <name>.pid (for the reaper). */
export class ProcessSet {
  private readonly children = new Map<string, ChildProcess>();
  private readonly workDir: string;
  private readonly killAfterMs: number;
  /** killAfterMs: how long stop() waits after SIGTERM before SIGKILL. */
  constructor(workDir: string, killAfterMs = 5000) {
    this.workDir = workDir;
    this.killAfterMs = killAfterMs;
  }

  start(name: string, command: string, args: string[]): ChildProcess {
    const logFile = createWriteStream(join(this.workDir, `${name}.log`), { flags: 'a' });
    // A local control plane has memory to spare and two cores to share: Go's collector runs a quarter as often.
    const env = { ...process.env, GOGC: process.env.GOGC ?? LOCAL_GOGC };
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    child.stdout?.pipe(logFile);
    child.stderr?.pipe(logFile);
    writeFileSync(join(this.workDir, `${name}.pid`), String(child.pid));
    this.children.set(name, child);
    return child;
  }

  async stop(name: string): Promise<void> {
    const child = this.children.get(name);
    if (!child) return;
    this.children.delete(name);
    rmSync(join(this.workDir, `${name}.pid`), { force: true });
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const killTimer = setTimeout(() => child.kill('SIGKILL'), this.killAfterMs);
    await exited;
    clearTimeout(killTimer);
  }

  names(): string[] {
    return [...this.children.keys()];
  }
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const log = options.log ?? (() => {});
  const binDir = resolveBinDir(options.binDir);
  const workDir = mkdtempSync(join(tmpdir(), 'byok-control-plane-'));
  // Kills the servers and removes the work dir if this process dies without stopping them.
  const reaper = startReaper(workDir, { graceSeconds: 2, removeDir: true });
  const processes = new ProcessSet(workDir);
  const deadline = () => Date.now() + (options.startTimeoutSeconds ?? 90) * 1000;
  const path = (name: string) => join(workDir, name);

  const stop = async () => {
    for (const name of processes.names().reverse()) await processes.stop(name);
    writeFileSync(path('stopped'), '');
    reaper.kill();
    rmSync(workDir, { recursive: true, force: true });
  };

  try {
    const ca = await createCertificateAuthority('byok-local-ca');
    const frontProxyCa = await createCertificateAuthority('byok-front-proxy-ca');
    const address = options.address ?? '127.0.0.1';
    // 10.96.0.1: the `kubernetes` Service's ClusterIP in --service-cluster-ip-range, which pods dial.
    const serving = await ca.issue({
      commonName: 'kube-apiserver',
      usage: 'server',
      dnsNames: ['localhost', 'kubernetes', 'kubernetes.default.svc'],
      ipAddresses: [...new Set(['127.0.0.1', address, '10.96.0.1'])],
    });
    const admin = await ca.issue({ commonName: 'byok-admin', organizations: ['system:masters'], usage: 'client' });
    const proxyClient = await frontProxyCa.issue({ commonName: 'front-proxy-client', usage: 'client' });
    const serviceAccountKeys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const files: Record<string, string> = {
      'ca.crt': ca.certPem,
      // Lets test workers issue user certificates (kubeconfigFor) from another process.
      'ca.key': ca.keyPem,
      'front-proxy-ca.crt': frontProxyCa.certPem,
      'apiserver.crt': serving.certPem,
      'apiserver.key': serving.keyPem,
      'front-proxy-client.crt': proxyClient.certPem,
      'front-proxy-client.key': proxyClient.keyPem,
      'sa.key': serviceAccountKeys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      'sa.pub': serviceAccountKeys.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    };
    for (const [name, content] of Object.entries(files)) writeFileSync(path(name), content, { mode: 0o600 });

    // The member name tells this etcd from another worker's that took its port first.
    const etcdName = `byok-${basename(workDir)}`;
    const {
      ports: [etcdPort],
    } = await startOwnPorts('etcd', {
      ports: async () => [await freePort(), await freePort()] as const,
      start: ([client, peer]) => {
        const etcdUrl = `http://127.0.0.1:${client}`;
        const peerUrl = `http://127.0.0.1:${peer}`;
        log(`starting etcd on 127.0.0.1:${client}`);
        return processes.start('etcd', join(binDir, 'etcd'), [
          `--name=${etcdName}`,
          `--data-dir=${path('etcd-data')}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=${peerUrl}`,
          `--initial-advertise-peer-urls=${peerUrl}`,
          `--initial-cluster=${etcdName}=${peerUrl}`,
          '--unsafe-no-fsync',
          '--log-level=warn',
          '--quota-backend-bytes=8589934592',
        ]);
      },
      ready: async ([client]) =>
        (await get(`http://127.0.0.1:${client}/v3/cluster/member/list`, undefined, '{}')).body.includes(
          `"name":"${etcdName}"`,
        ),
      beforeRetry: () => rmSync(path('etcd-data'), { recursive: true, force: true }),
      deadline: deadline(),
    });
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;

    const apiServerArgs = (apiPort: number) => [
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${path('certs')}`,
      `--bind-address=${address}`,
      `--advertise-address=${address}`,
      `--secure-port=${apiPort}`,
      `--tls-cert-file=${path('apiserver.crt')}`,
      `--tls-private-key-file=${path('apiserver.key')}`,
      `--client-ca-file=${path('ca.crt')}`,
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${path('sa.pub')}`,
      `--service-account-signing-key-file=${path('sa.key')}`,
      '--service-cluster-ip-range=10.96.0.0/24',
      '--allow-privileged=true',
      ...(options.serviceAccountAdmission ? [] : ['--disable-admission-plugins=ServiceAccount']),
      `--requestheader-client-ca-file=${path('front-proxy-ca.crt')}`,
      '--requestheader-allowed-names=front-proxy-client',
      '--requestheader-username-headers=X-Remote-User',
      '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      `--proxy-client-cert-file=${path('front-proxy-client.crt')}`,
      `--proxy-client-key-file=${path('front-proxy-client.key')}`,
      '--enable-aggregator-routing=true',
      // A node's name need not resolve (the e2e node's does not): reach kubelets by the address they report.
      '--kubelet-preferred-address-types=InternalIP',
      ...(options.auditLogPath
        ? [
            `--audit-policy-file=${path('audit-policy.yaml')}`,
            `--audit-log-path=${options.auditLogPath}`,
            '--audit-log-format=json',
            '--audit-log-maxsize=0',
          ]
        : []),
    ];
    if (options.auditLogPath) {
      writeFileSync(
        path('audit-policy.yaml'),
        stringify({
          apiVersion: 'audit.k8s.io/v1',
          kind: 'Policy',
          omitStages: ['RequestReceived'],
          rules: [{ level: 'Metadata' }],
        }),
      );
    }
    const adminTls = { ca: ca.certPem, cert: admin.certPem, key: admin.keyPem };
    // Only this apiserver's certificate passes adminTls: another worker's on a taken port is never taken for it.
    const startApiServer = async (port?: number) => {
      const started = await startOwnPorts('kube-apiserver', {
        // A restart keeps its port (the kubeconfig names it); a clash then is retried on that port.
        ports: async () => port ?? (await freePort()),
        start: (p) => {
          log(`starting kube-apiserver on https://${address}:${p}`);
          return processes.start('kube-apiserver', join(binDir, 'kube-apiserver'), apiServerArgs(p));
        },
        ready: async (p) => (await get(`https://${address}:${p}/readyz`, adminTls)).status === 200,
        deadline: deadline(),
      });
      return started.ports;
    };
    const apiPort = await startApiServer(options.port);
    const server = `https://${address}:${apiPort}`;
    const version = (JSON.parse((await get(`${server}/version`, adminTls)).body) as { gitVersion: string }).gitVersion;
    const kubeconfigPath = path('kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfig(server, ca.certPem, 'byok-admin', admin.certPem, admin.keyPem), {
      mode: 0o600,
    });
    log(`kube-apiserver ${version} ready`);

    return {
      server,
      kubeconfigPath,
      workDir,
      binDir,
      version,
      kubeconfigFor: (user, groups) =>
        writeUserKubeconfig(ca, server, path(`kubeconfig-${user.replace(/[^a-z0-9-]/gi, '_')}`), user, groups ?? []),
      restartApiServer: async () => {
        await processes.stop('kube-apiserver');
        await startApiServer(apiPort);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function writeUserKubeconfig(
  ca: CertificateAuthority,
  server: string,
  file: string,
  user: string,
  groups: string[],
): Promise<string> {
  const cert = await ca.issue({ commonName: user, organizations: groups, usage: 'client' });
  writeFileSync(file, kubeconfig(server, ca.certPem, user, cert.certPem, cert.keyPem), { mode: 0o600 });
  return file;
}
