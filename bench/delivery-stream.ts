// Benchmark of delivery on the dev path: a real kube-apiserver and etcd, the full operator in its own process (compile
// pipeline, delivery stream, health writer with its default intervals, as the chart runs it), and N real gateway
// processes (`node src/cli/main.ts gateway --delivery-stream …`, default 10) on the stream, each presenting a
// TokenRequest token of the gateway ServiceAccount. Their mounted volumes are projected once and then frozen (a
// kubelet that has not synced yet), so every rotation reaches them through the stream.
//
// Measured, per rotation (new Secret, credential patched to it): apply → Delivered=True on the credential with every
// pod counted (the status polled every 20 ms), and apply → the first upstream request carrying the new key on each
// pod (each pod asked every --ask-ms, default 100 ms: the figure's resolution). And the operator's RSS and CPU while idle with 0 and with N connected pods, and
// its CPU per rotation with N pods. Prints one JSON object.
//
//   node bench/delivery-stream.ts [--gateways 10] [--rotations 20] [--idle 20] [--ask-ms 100]
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DiscoveryV1Api, KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_DELIVERY_AUDIENCE } from '../src/contract/delivery.ts';
import { startControlPlane } from '../src/controlplane/control-plane.ts';
import { installCrds } from '../src/controlplane/install-crds.ts';
import { kubeClient } from '../src/kube/client.ts';
import { loopbackEndpointSlice } from '../src/kube/loopback-endpoints.ts';
import { startProjector } from '../src/kube/projector.ts';
import { API_VERSION, GROUP, VERSION } from '../src/schema/resources.ts';
import { processCpuSeconds } from '../test/support/proc-cpu.ts';
import { procStatusMB } from './lib/proc.ts';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const GATEWAYS = arg('gateways', 10);
const ROTATIONS = arg('rotations', 20);
const IDLE_S = arg('idle', 20);
/** How often each pod is asked for a completion while a rotation is pending (the figure's resolution; more load). */
const ASK_MS = arg('ask-ms', 100);
const MAIN = join(import.meta.dirname, '..', 'src', 'cli', 'main.ts');
const API_KEY = 'sk-gw-bench-delivery-0123456789abcdef';
const log = (line: string) => process.stderr.write(`[delivery-stream] ${line}\n`);

/** CPU seconds (user + system) of a process so far. */
const cpuSeconds = (pid: number) => processCpuSeconds(pid).self;

const quantiles = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
  return { n: s.length, p50: Math.round(q(0.5)), p99: Math.round(q(0.99)), max: Math.round(s.at(-1)!) };
};

/** A loopback OpenAI-style upstream that remembers the bearer of every request. */
async function upstream(): Promise<{ server: Server; url: string; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push((req.headers.authorization ?? '').replace(/^Bearer /, ''));
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          created: 0,
          model: 'gpt-4o',
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

interface Gateway {
  child: ChildProcess;
  url: string;
  opsUrl: string;
}

async function until(what: string, check: () => Promise<boolean>, ms = 60_000, every = 20): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await sleep(every);
  }
}

/** The key the upstream saw for one request through `gw`. */
async function keySent(up: { seen: string[] }, gw: Gateway): Promise<string | undefined> {
  const before = up.seen.length;
  const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.text();
  return up.seen.slice(before).at(-1);
}

function spawnGateway(args: string[]): Promise<Gateway> {
  const child = spawn(process.execPath, [MAIN, 'gateway', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let pending = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        const m = /"url":"([^"]+)","opsUrl":"([^"]+)".*"msg":"gateway listening"/.exec(line);
        if (m) resolve({ child, url: m[1]!, opsUrl: m[2]! });
      }
    });
    child.once('exit', (code) => reject(new Error(`gateway exited (${code}) before listening`)));
  });
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'byok-bench-delivery-'));
  const cp = await startControlPlane({ log: () => undefined });
  const children: ChildProcess[] = [];
  const up = await upstream();
  try {
    await installCrds(cp.kubeconfigPath);
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const client = kubeClient(kc);
    const ns = 'bench-acct';
    const routingNs = 'byok-system';
    for (const n of [ns, routingNs])
      await client.request('POST', '/api/v1/namespaces', {
        body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: n } },
      });
    await client.request('POST', `/api/v1/namespaces/${routingNs}/serviceaccounts`, {
      body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'byok-gateway' } },
    });
    const statusToken = randomBytes(24).toString('hex');
    writeFileSync(join(root, 'status-token'), statusToken);

    const op = spawn(
      process.execPath,
      [
        join(import.meta.dirname, 'lib', 'delivery-operator-child.ts'),
        cp.kubeconfigPath,
        routingNs,
        join(root, 'status-token'),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(op);
    const deliveryUrl = await new Promise<string>((resolve, reject) => {
      op.stdout!.on('data', (c: Buffer) => {
        const m = /ready (\S+)/.exec(c.toString());
        if (m) resolve(m[1]!);
      });
      op.once('exit', (code) => reject(new Error(`operator exited (${code})`)));
    });
    const pid = op.pid!;

    const cr = (plural: string) => `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}`;
    const create = (plural: string, kind: string, name: string, spec: object) =>
      client.request('POST', cr(plural), { body: { apiVersion: API_VERSION, kind, metadata: { name }, spec } });
    const secret = (name: string, key: string) =>
      client.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
        body: { apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData: { key } },
      });
    await create('accounts', 'Account', 'account', {});
    await create('workspaces', 'Workspace', 'main', { default: true });
    await create('gatewayapikeys', 'GatewayAPIKey', 'k', { hash: createHash('sha256').update(API_KEY).digest('hex') });
    await secret('oa-v0', 'sk-bench-delivery-v0');
    await create('byokcredentials', 'BYOKCredential', 'oa', { provider: 'openai', secretRef: { name: 'oa-v0' } });
    type Cred = {
      status?: {
        delivery?: { configVersion?: string; loaded?: number; total?: number };
        conditions?: { type: string; status: string }[];
      };
    };
    const credential = () => client.request<Cred>('GET', `${cr('byokcredentials')}/oa`);
    await until(
      'credential Ready',
      async () =>
        ((await credential()).status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
      60_000,
      100,
    );
    // The routing objects exist: project the mount once, then "the kubelet sleeps".
    const mount = { configDir: join(root, 'routing'), bundleDir: join(root, 'bundles'), keyDir: join(root, 'key') };
    const projector = startProjector({ kubeConfig: kc, routingNamespace: routingNs, ...mount, pollMs: 3_600_000 });
    await until(
      'routing projected',
      async () => {
        await projector.sync();
        try {
          return readFileSync(join(mount.configDir, 'byok-routing-index.json')).length > 0;
        } catch {
          return false;
        }
      },
      60_000,
      200,
    );
    await projector.stop();

    const idle = async () => {
      const c0 = cpuSeconds(pid);
      await sleep(IDLE_S * 1000);
      return {
        rssMB: +procStatusMB(pid, 'VmRSS').toFixed(1),
        cpuPercent: +((100 * (cpuSeconds(pid) - c0)) / IDLE_S).toFixed(2),
      };
    };
    log(`operator idle, 0 gateways (${IDLE_S} s)`);
    const idle0 = await idle();

    const token = await client.request<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${routingNs}/serviceaccounts/byok-gateway/token`,
      {
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: 3600, audiences: [DEFAULT_DELIVERY_AUDIENCE] },
        },
      },
    );
    writeFileSync(join(root, 'token'), token.status.token);
    writeFileSync(
      join(root, 'catalog.json'),
      JSON.stringify({
        format: 'byok-gateway-catalog/v1',
        models: [
          {
            model: 'openai/gpt-4o',
            endpoints: [
              {
                id: 'openai',
                provider: 'openai',
                pricing: { kind: 'per-token', promptUsdPerMillionTokens: '1', completionUsdPerMillionTokens: '1' },
                upstream: { baseUrl: `${up.url}/v1`, model: 'gpt-4o' },
              },
            ],
          },
        ],
      }),
    );
    log(`starting ${GATEWAYS} gateways`);
    const gateways: Gateway[] = [];
    for (let i = 0; i < GATEWAYS; i++) {
      const gw = await spawnGateway([
        '--config-dir',
        mount.configDir,
        '--bundle-dir',
        mount.bundleDir,
        '--key-dir',
        mount.keyDir,
        '--catalog',
        join(root, 'catalog.json'),
        '--port',
        '0',
        '--ops-port',
        '0',
        '--ledger-snapshot',
        join(root, `ledger-${i}.json`),
        '--log-level',
        'info',
        '--status-token-file',
        join(root, 'status-token'),
        '--delivery-stream',
        deliveryUrl,
        '--delivery-stream-token-file',
        join(root, 'token'),
        '--delivery-stream-dir',
        join(root, `stream-${i}`),
      ]);
      children.push(gw.child);
      gateways.push(gw);
      await kc.makeApiClient(DiscoveryV1Api).createNamespacedEndpointSlice({
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
    const status = async (gw: Gateway) =>
      (await (
        await fetch(`${gw.opsUrl}/byok/status`, { headers: { authorization: `Bearer ${statusToken}` } })
      ).json()) as { delivery?: { stream?: string } };
    await until(
      'all on the stream',
      async () => (await Promise.all(gateways.map(status))).every((s) => s.delivery?.stream === 'connected'),
      60_000,
      200,
    );
    // The Account's count (a delivered credential keeps its record while only the pod count moves).
    await until(
      'Delivered to all',
      async () => {
        const d = (await client.request<Cred>('GET', `${cr('accounts')}/account`)).status?.delivery;
        return d?.loaded === GATEWAYS && d.total === GATEWAYS;
      },
      60_000,
      200,
    );
    log(`operator idle, ${GATEWAYS} gateways connected (${IDLE_S} s)`);
    const idleN = await idle();

    const toDelivered: number[] = [];
    const toNewKey: number[] = [];
    let version = (await credential()).status?.delivery?.configVersion;
    const c0 = cpuSeconds(pid);
    log(`${ROTATIONS} rotations`);
    for (let r = 1; r <= ROTATIONS; r++) {
      const key = `sk-bench-delivery-v${r}`;
      await secret(`oa-v${r}`, key);
      const t0 = performance.now();
      await client.request('PATCH', `${cr('byokcredentials')}/oa`, {
        body: { spec: { secretRef: { name: `oa-v${r}` } } },
        contentType: 'application/merge-patch+json',
      });
      const old = version;
      await Promise.all([
        until(`rotation ${r} Delivered`, async () => {
          const s = (await credential()).status;
          const ok =
            s?.delivery?.configVersion !== old &&
            s?.delivery?.loaded === GATEWAYS &&
            (s.conditions ?? []).some((c) => c.type === 'Delivered' && c.status === 'True');
          if (ok) {
            toDelivered.push(performance.now() - t0);
            version = s!.delivery!.configVersion;
          }
          return ok;
        }),
        ...gateways.map((gw) =>
          until(
            `rotation ${r} key upstream`,
            async () => {
              const ok = (await keySent(up, gw)) === key;
              if (ok) toNewKey.push(performance.now() - t0);
              return ok;
            },
            60_000,
            ASK_MS,
          ),
        ),
      ]);
      await sleep(200);
    }
    const rotationCpu = cpuSeconds(pid) - c0;
    process.stdout.write(
      `${JSON.stringify({
        gateways: GATEWAYS,
        rotations: ROTATIONS,
        applyToDeliveredMs: quantiles(toDelivered),
        applyToNewKeyUpstreamMs: quantiles(toNewKey),
        operator: {
          idleNoGateways: idle0,
          idleWithGateways: idleN,
          cpuSecondsPerRotation: +(rotationCpu / ROTATIONS).toFixed(3),
          peakRssMB: +procStatusMB(pid, 'VmHWM').toFixed(1),
        },
        loadAverage1m: +loadavg()[0]!.toFixed(1),
        cores: availableParallelism(),
        notes: `mounts frozen after start: every rotation reached the pods through the stream; Delivered polled every 20 ms, each pod asked every ${ASK_MS} ms; idle CPU is the operator process (user+system) over the idle window`,
      })}\n`,
    );
  } finally {
    for (const c of children.reverse()) c.kill('SIGTERM');
    await sleep(1000);
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    up.server.closeAllConnections();
    up.server.close();
    await cp.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
