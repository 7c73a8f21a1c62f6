// What the e2e checks on its one-node cluster, in order: the chart installed with ten gateway replicas and the delivery
// stream on; a fresh install's first answer; the chart's NetworkPolicies as kube-router enforces them; new gateway
// keys; twenty rotations on the stream; the gateway's identity (no Secret or ConfigMap access, no watch); the stream
// switched off and five rotations on the kubelet's volume refresh alone; then the upgrade page and uninstall.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify as stringify12 } from 'yaml';
import type { ControlPlane } from '../../src/controlplane/control-plane.ts';
import type { Upstreams } from '../support/upstreams.ts';
import type { Api } from './api.ts';
import { check, sleep, until } from './checks.ts';
import { AuditLog, processCost } from './cost.ts';
import {
  type Chat,
  newGatewayKey,
  type RotationFigure,
  type RotationTarget,
  rotate,
  startLoad,
  summary,
} from './delivery.ts';
import { netnsOf, type PolicyCheck, probe, type Verdict } from './netpol.ts';
import { BRIDGE_ADDRESS, NODE_NAME, PAUSE_IMAGE, type RunningNode } from './node.ts';

const run = promisify(execFile);
// kubectl and helm read YAML 1.1, where a bare `no` is false: quote as 1.1 would.
const stringify = (value: unknown) => stringify12(value, { version: '1.1' });

export interface Cluster {
  cp: ControlPlane;
  node: RunningNode;
  up: Upstreams;
  work: string;
  api: Api;
  auditLog: string;
  repo: string;
  figures: Record<string, unknown>;
  redisImage: string;
  log: (line: string) => void;
}

const NS = 'byok-system';
const ACCT = 'e2e-acme';
const CLIENTS = 'e2e-api-clients';
const GATEWAY_REPLICAS = 10;
const STREAM_ROTATIONS = 20;
const VOLUME_ROTATIONS = 5;
const GATEWAY_SA = `system:serviceaccount:${NS}:byok-gateway`;
const OPERATOR_ARGS = ['operator', `--routing-namespace=${NS}`];
const REDIS_LABELS = { 'app.kubernetes.io/name': 'e2e-ledger-redis' };
const API_CLIENT_LABEL = 'byok-e2e/api-client';

interface Pod {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  spec: { containers: { securityContext?: { readOnlyRootFilesystem?: boolean }; readinessProbe?: unknown }[] };
  status: { podIP?: string; phase?: string; conditions?: { type: string; status: string }[] };
}

function tools(c: Cluster) {
  const env = { ...process.env, KUBECONFIG: c.cp.kubeconfigPath, PATH: `${c.cp.binDir}:${process.env.PATH ?? ''}` };
  const kubectl = async (...args: string[]) =>
    (await run('kubectl', args, { env, encoding: 'utf8', maxBuffer: 64 << 20 })).stdout;
  const helm = async (...args: string[]) =>
    (await run('helm', args, { env, encoding: 'utf8', maxBuffer: 64 << 20 })).stdout;
  const json = async <T>(...args: string[]) => JSON.parse(await kubectl(...args, '-o', 'json')) as T;
  let n = 0;
  const apply = async (yaml: string) => {
    const file = join(c.work, `apply-${++n}.yaml`);
    writeFileSync(file, yaml);
    return kubectl('apply', '-f', file);
  };
  const pods = async (ns: string, selector: string) =>
    (await json<{ items: Pod[] }>('get', 'pods', '-n', ns, '-l', selector)).items;
  const ready = (p: Pod) => p.status.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') === true;
  return { env, kubectl, helm, json, apply, pods, ready };
}
type Tools = ReturnType<typeof tools>;

export async function deliveryChecks(c: Cluster): Promise<void> {
  const t = tools(c);
  await check('the node registers and is Ready on containerd with the CNI bridge', async () => {
    const ready = await until('node Ready', 120_000, async () => {
      const n = await t.json<{
        status: {
          conditions: { type: string; status: string }[];
          nodeInfo: { containerRuntimeVersion: string; kubeletVersion: string };
        };
      }>('get', 'node', NODE_NAME);
      return n.status.conditions.find((x) => x.type === 'Ready')?.status === 'True' ? n.status.nodeInfo : undefined;
    });
    return `${ready.kubeletVersion}, ${ready.containerRuntimeVersion}`;
  });
  if (!(await install(c, t))) return;
  const chat = await tenant(c, t);
  await policyChecks(c, t, 'stream on, apiIngressFrom every namespace', streamOnPolicy);
  await gatewayKeys(c, chat);
  await gatewayIdentity(t);
  const target: RotationTarget = { api: c.api, namespace: ACCT, credential: 'openai', currentSecret: 'openai-1' };
  await rotations(c, chat, target, 'stream', STREAM_ROTATIONS);
  const off = await check(
    'helm upgrade switches the delivery stream off and narrows apiIngressFrom: the gateways roll and serve from their volumes alone',
    async () => {
      await t.helm(
        'upgrade',
        'byok',
        join(c.repo, 'charts', 'byok-operator'),
        '-n',
        NS,
        '--reuse-values',
        '-f',
        valuesFile(c, 'narrowed.yaml', {
          gateway: { deliveryStream: { enabled: false } },
          networkPolicy: { apiIngressFrom: [{ namespaceSelector: { matchLabels: { [API_CLIENT_LABEL]: 'true' } } }] },
        }),
        '--wait',
        '--timeout',
        '420s',
      );
      const gateways = await until('gateways rolled', 300_000, async () => {
        const list = await t.pods(NS, 'app.kubernetes.io/component=gateway');
        const args = await t.json<{ spec: { template: { spec: { containers: { args: string[] }[] } } } }>(
          'get',
          'deployment',
          '-n',
          NS,
          'byok-gateway',
        );
        const streamArgs = args.spec.template.spec.containers[0]!.args.filter((a) => a.startsWith('--delivery-stream'));
        return streamArgs.length === 0 && list.length === GATEWAY_REPLICAS && list.every(t.ready) ? list : undefined;
      });
      return `${gateways.length} gateway pods without --delivery-stream`;
    },
  );
  if (off) {
    await policyChecks(c, t, 'stream off, apiIngressFrom narrowed to one namespace', narrowedPolicy);
    await rotations(c, chat, target, 'volume', VOLUME_ROTATIONS);
  }
  await check(
    'the gateway pods held no watch and made no request on the kube-apiserver during the whole run (audit log)',
    async () => {
      const mine = new AuditLog(c.auditLog).by(GATEWAY_SA);
      c.figures.gatewayWatches = mine.watches;
      c.figures.gatewayRequests = mine.requests;
      if (mine.watches !== 0 || mine.requests !== 0)
        throw new Error(`${GATEWAY_SA}: ${mine.requests} requests, ${mine.watches} watches`);
      return `${GATEWAY_SA}: 0 requests, 0 watches`;
    },
  );
  reportTargets(c);
  await upgradeAndUninstall(c, t);
}

function valuesFile(c: Cluster, name: string, values: unknown): string {
  const file = join(c.work, name);
  writeFileSync(file, stringify(values));
  return file;
}

async function install(c: Cluster, t: Tools): Promise<boolean> {
  // What docs/install.md tells users, with the image this run built and the e2e's own catalog and upstream CA.
  const catalog = JSON.stringify({
    format: 'byok-gateway-catalog/v1',
    models: [
      {
        model: 'openai/gpt-4o',
        name: 'GPT-4o',
        contextLength: 128000,
        maxOutputTokens: 16384,
        endpoints: [
          {
            id: 'openai',
            provider: 'openai',
            zdr: false,
            dataCollection: false,
            pricing: { kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: '10' },
            upstream: { baseUrl: `${c.up.base}/openai/v1`, model: 'gpt-4o' },
          },
        ],
      },
    ],
  });
  for (const ns of [NS, ACCT, CLIENTS]) await t.kubectl('create', 'namespace', ns);
  await t.kubectl('label', 'namespace', CLIENTS, `${API_CLIENT_LABEL}=true`);
  await t.kubectl('create', 'configmap', 'e2e-catalog', '-n', NS, `--from-literal=catalog.json=${catalog}`);
  await t.kubectl('create', 'configmap', 'e2e-upstream-ca', '-n', NS, `--from-literal=ca.crt=${c.up.caPem}`);
  // The shared ledger that several gateway replicas need, as a pod in the release namespace (this machine's
  // redis-server), and a pod in a tenant namespace and in an API-client namespace to probe the policies from.
  await t.apply(
    stringify({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'ledger-redis', namespace: NS },
      spec: {
        replicas: 1,
        selector: { matchLabels: REDIS_LABELS },
        template: {
          metadata: { labels: REDIS_LABELS },
          spec: {
            containers: [
              {
                name: 'redis',
                image: c.redisImage,
                imagePullPolicy: 'Never',
                args: [
                  '--bind',
                  '0.0.0.0',
                  '--port',
                  '6379',
                  '--protected-mode',
                  'no',
                  '--save',
                  '',
                  '--appendonly',
                  'no',
                  '--dir',
                  '/data',
                ],
              },
            ],
          },
        },
      },
    }) +
      '---\n' +
      stringify({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'ledger-redis', namespace: NS },
        spec: { selector: REDIS_LABELS, ports: [{ port: 6379, targetPort: 6379 }] },
      }) +
      [ACCT, CLIENTS]
        .map(
          (ns) =>
            '---\n' +
            stringify({
              apiVersion: 'v1',
              kind: 'Pod',
              metadata: { name: 'probe', namespace: ns },
              spec: { containers: [{ name: 'pause', image: PAUSE_IMAGE, imagePullPolicy: 'Never' }] },
            }),
        )
        .join(''),
  );
  const upstreamPort = Number(new URL(c.up.base).port);
  const values = valuesFile(c, 'values.yaml', {
    image: { repository: 'localhost/byok-operator', tag: 'dev', pullPolicy: 'Never' },
    operator: { replicas: 1 },
    api: { replicas: 1 },
    gateway: {
      enabled: true,
      replicas: GATEWAY_REPLICAS,
      // Ten replicas on a 2-core node: small requests (the default 200m each would not fit).
      resources: { requests: { cpu: '20m', memory: '64Mi' }, limits: { memory: '384Mi' } },
      catalog: { configMap: 'e2e-catalog' },
      upstreamCa: { configMap: 'e2e-upstream-ca' },
      // The delivery stream is on by default.
    },
    ledger: { redisUrl: `redis://ledger-redis.${NS}.svc:6379` },
    networkPolicy: {
      kubeApiServerCidrs: [`${BRIDGE_ADDRESS}/32`],
      ledgerRedisPodLabels: REDIS_LABELS,
      // The e2e's upstream is on a private address; the gateway's egress admits public HTTPS only by default.
      gatewayExtraEgress: [
        { to: [{ ipBlock: { cidr: `${BRIDGE_ADDRESS}/32` } }], ports: [{ port: upstreamPort, protocol: 'TCP' }] },
      ],
    },
  });
  const installed = await check(
    `helm install (as docs/install.md) with ${GATEWAY_REPLICAS} gateway replicas, the Redis ledger and the delivery stream on`,
    async () => {
      const started = Date.now();
      await t.helm('install', 'byok', join(c.repo, 'charts', 'byok-operator'), '-n', NS, '-f', values);
      const took = Date.now() - started;
      const gateway = await t.json<{ spec: { template: { spec: { containers: { args: string[] }[] } } } }>(
        'get',
        'deployment',
        '-n',
        NS,
        'byok-gateway',
      );
      const stream = gateway.spec.template.spec.containers[0]!.args.find((a) => a.startsWith('--delivery-stream='));
      if (!stream) throw new Error('the gateway has no --delivery-stream: the stream is not on by default');
      return `${took} ms; the stream on by default (${stream})`;
    },
  );
  if (!installed) return false;
  c.figures.gatewayReplicas = GATEWAY_REPLICAS;
  const podsReady = await check(
    "operator, API and gateway pods Ready: non-root, read-only root filesystem, probes on the chart's ports",
    async () => {
      const pods = await until('pods Ready', 420_000, async () => {
        const list = await t.pods(NS, 'app.kubernetes.io/instance=byok');
        return list.length >= GATEWAY_REPLICAS + 2 && list.every(t.ready) ? list : undefined;
      });
      for (const p of pods) {
        for (const ctr of p.spec.containers) {
          if (ctr.securityContext?.readOnlyRootFilesystem !== true)
            throw new Error(`${p.metadata.name}: root filesystem not read-only`);
          if (!ctr.readinessProbe) throw new Error(`${p.metadata.name}: no readiness probe`);
        }
      }
      // The processes themselves, seen from the host: uid 10001, not root.
      const uids = c.node
        .ctr('tasks', 'ls')
        .split('\n')
        .slice(1)
        .map((l) => l.trim().split(/\s+/)[1])
        .filter((pid): pid is string => !!pid && /^\d+$/.test(pid))
        .map((pid) => /Uid:\s+(\d+)/.exec(execFileSync('cat', [`/proc/${pid}/status`], { encoding: 'utf8' }))?.[1])
        .filter((u): u is string => !!u);
      if (!uids.includes('10001')) throw new Error(`no container process runs as uid 10001 (uids: ${uids.join(',')})`);
      return `${pods.length} pods (${pods.filter((p) => p.metadata.labels?.['app.kubernetes.io/component'] === 'gateway').length} gateways); container uids ${[...new Set(uids)].join(',')}`;
    },
  );
  await check(
    'the APIService is Available and kubectl get byokkeys reaches the API pod through the aggregator',
    async () => {
      await until('APIService Available', 120_000, async () =>
        (await t.kubectl(
          'get',
          'apiservice',
          'v1.api.byok.gateway.dev',
          '-o',
          'jsonpath={.status.conditions[?(@.type=="Available")].status}',
        )) === 'True'
          ? true
          : undefined,
      );
      const out = await t.kubectl('get', 'byokkeys', '-A');
      return out.trim() === '' || out.includes('No resources')
        ? 'no keys yet (list answered)'
        : (out.split('\n')[0] ?? '');
    },
  );
  return podsReady;
}

/** An account (Account, default Workspace, gateway key, Secret, BYOKCredential) and its first answer. */
async function tenant(c: Cluster, t: Tools): Promise<Chat> {
  const GATEWAY_KEY = 'sk-e2e-gateway-0123456789abcdef';
  const keyHash = createHash('sha256').update(GATEWAY_KEY).digest('hex');
  await t.apply(`apiVersion: byok.gateway.dev/v1alpha1
kind: Account
metadata: { name: acme, namespace: ${ACCT} }
spec: { displayName: Acme, plan: pay-as-you-go }
---
apiVersion: byok.gateway.dev/v1alpha1
kind: Workspace
metadata: { name: default, namespace: ${ACCT} }
spec: { displayName: Default, default: true }
---
apiVersion: byok.gateway.dev/v1alpha1
kind: GatewayAPIKey
metadata: { name: app, namespace: ${ACCT} }
spec: { hash: "${keyHash}" }
---
apiVersion: v1
kind: Secret
metadata: { name: openai-1, namespace: ${ACCT} }
stringData: { key: sk-e2e-first-key-0001 }
---
apiVersion: byok.gateway.dev/v1alpha1
kind: BYOKCredential
metadata: { name: openai, namespace: ${ACCT} }
spec: { provider: openai, secretRef: { name: openai-1 } }
`);
  const svc = await t.json<{ spec: { clusterIP: string; ports: { port: number }[] } }>(
    'get',
    'service',
    '-n',
    NS,
    'byok-gateway',
  );
  const gatewayUrl = `http://${svc.spec.clusterIP}:${svc.spec.ports[0]?.port ?? 80}`;
  const chat: Chat = async (apiKey, content) => {
    const res = await fetch(`${gatewayUrl}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', max_tokens: 16, messages: [{ role: 'user', content }] }),
      signal: AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer();
    return res.status;
  };
  await check(
    'a fresh install answers: credential Ready → the first 200 through the gateway Service, with the decrypted BYOK key upstream',
    async () => {
      await until('credential Ready', 120_000, async () =>
        (await t.kubectl(
          'get',
          'byokcredential',
          'openai',
          '-n',
          ACCT,
          '-o',
          'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
        )) === 'True'
          ? true
          : undefined,
      );
      const started = Date.now();
      let seen = '';
      const listener = (hit: { auth: string }) => void (seen = hit.auth);
      c.up.hitListeners.add(listener);
      try {
        await until('a 200 through the gateway', 240_000, async () =>
          (await chat(GATEWAY_KEY, 'hi')) === 200 ? true : undefined,
        );
      } finally {
        c.up.hitListeners.delete(listener);
      }
      if (seen !== 'sk-e2e-first-key-0001') throw new Error(`the upstream saw ${seen || 'nothing'}`);
      c.figures.firstAnswerAfterReadySeconds = (Date.now() - started) / 1000;
      return `200 via ${gatewayUrl}, upstream saw the BYOK key, ${Date.now() - started} ms after Ready`;
    },
  );
  return (apiKey, content) => chat(apiKey === '' ? GATEWAY_KEY : apiKey, content);
}

interface Peers {
  tenant: { ns: string };
  client: { ns: string };
  gateway: { ns: string; ip: string };
  operator: { ns: string; ip: string };
  api: { ns: string; ip: string };
  redis: { ip: string };
  upstream: { ip: string; port: number };
}
type Row = [from: string, fromNs: string | undefined, to: string, host: string, port: number, expected: Verdict];

/** What the chart promises with the stream on and the default apiIngressFrom (every namespace). */
function streamOnPolicy(p: Peers): Row[] {
  return [
    ['kube-apiserver (host)', undefined, 'api pod: aggregated API port 8443', p.api.ip, 8443, 'admitted'],
    ['tenant pod', p.tenant.ns, 'api pod: aggregated API port 8443', p.api.ip, 8443, 'refused'],
    ['gateway pod', p.gateway.ns, 'api pod: aggregated API port 8443', p.api.ip, 8443, 'refused'],
    ['operator pod', p.operator.ns, 'ledger Redis 6379', p.redis.ip, 6379, 'admitted'],
    ['gateway pod', p.gateway.ns, 'ledger Redis 6379', p.redis.ip, 6379, 'admitted'],
    ['tenant pod', p.tenant.ns, 'ledger Redis 6379', p.redis.ip, 6379, 'refused'],
    [
      'tenant pod',
      p.tenant.ns,
      'api pod: REST port 8080 (apiIngressFrom: every namespace)',
      p.api.ip,
      8080,
      'admitted',
    ],
    [
      'tenant pod',
      p.tenant.ns,
      'operator pod: metrics port 8081 (apiIngressFrom: every namespace)',
      p.operator.ip,
      8081,
      'admitted',
    ],
    ['gateway pod', p.gateway.ns, 'operator pod: delivery stream 8443', p.operator.ip, 8443, 'admitted'],
    ['tenant pod', p.tenant.ns, 'operator pod: delivery stream 8443', p.operator.ip, 8443, 'refused'],
    ['api pod', p.api.ns, 'operator pod: delivery stream 8443', p.operator.ip, 8443, 'refused'],
    ['operator pod', p.operator.ns, 'gateway pod: ops port 8081', p.gateway.ip, 8081, 'admitted'],
    ['tenant pod', p.tenant.ns, 'gateway pod: ops port 8081 (gatewayMetricsFrom empty)', p.gateway.ip, 8081, 'refused'],
    [
      'gateway pod',
      p.gateway.ns,
      `upstream ${p.upstream.ip}:${p.upstream.port} (gatewayExtraEgress)`,
      p.upstream.ip,
      p.upstream.port,
      'admitted',
    ],
    [
      'gateway pod',
      p.gateway.ns,
      'api pod: REST port 8080 (gateway egress: public HTTPS only)',
      p.api.ip,
      8080,
      'refused',
    ],
  ];
}

/** After the upgrade: apiIngressFrom names one namespace; the stream is off. */
function narrowedPolicy(p: Peers): Row[] {
  return [
    [
      'tenant pod',
      p.tenant.ns,
      'api pod: REST port 8080 (apiIngressFrom: the client namespace only)',
      p.api.ip,
      8080,
      'refused',
    ],
    [
      'tenant pod',
      p.tenant.ns,
      'operator pod: metrics port 8081 (apiIngressFrom: the client namespace only)',
      p.operator.ip,
      8081,
      'refused',
    ],
    [
      'client-namespace pod',
      p.client.ns,
      'api pod: REST port 8080 (apiIngressFrom: the client namespace only)',
      p.api.ip,
      8080,
      'admitted',
    ],
    [
      'client-namespace pod',
      p.client.ns,
      'operator pod: metrics port 8081 (apiIngressFrom: the client namespace only)',
      p.operator.ip,
      8081,
      'admitted',
    ],
    ['tenant pod', p.tenant.ns, 'ledger Redis 6379', p.redis.ip, 6379, 'refused'],
    ['gateway pod', p.gateway.ns, 'ledger Redis 6379', p.redis.ip, 6379, 'admitted'],
    [
      'gateway pod',
      p.gateway.ns,
      `upstream ${p.upstream.ip}:${p.upstream.port} (gatewayExtraEgress)`,
      p.upstream.ip,
      p.upstream.port,
      'admitted',
    ],
  ];
}

async function peers(c: Cluster, t: Tools): Promise<Peers> {
  const one = async (ns: string, selector: string) => {
    const pod = (await t.pods(ns, selector)).find((p) => p.status.podIP && t.ready(p));
    if (!pod?.status.podIP) throw new Error(`no ready pod for ${selector} in ${ns}`);
    return { ip: pod.status.podIP, ns: await netnsOf(pod.status.podIP) };
  };
  const probePod = async (ns: string) => {
    const ip = await until(
      `probe pod in ${ns}`,
      60_000,
      async () => (await t.json<Pod>('get', 'pod', 'probe', '-n', ns)).status.podIP,
    );
    return { ns: await netnsOf(ip) };
  };
  return {
    tenant: await probePod(ACCT),
    client: await probePod(CLIENTS),
    gateway: await one(NS, 'app.kubernetes.io/component=gateway'),
    operator: await one(NS, 'app.kubernetes.io/component=operator'),
    api: await one(NS, 'app.kubernetes.io/component=api'),
    redis: await one(NS, 'app.kubernetes.io/name=e2e-ledger-redis'),
    upstream: { ip: BRIDGE_ADDRESS, port: Number(new URL(c.up.base).port) },
  };
}

async function policyChecks(c: Cluster, t: Tools, phase: string, rows: (p: Peers) => Row[]): Promise<void> {
  await check(
    `NetworkPolicy enforced by kube-router (${phase}): each port admits what the chart promises and refuses the rest`,
    async () => {
      let last: PolicyCheck[] = [];
      // kube-router applies a policy change within seconds of the event; retry briefly before judging.
      for (let attempt = 0; attempt < 8; attempt++) {
        const p = await peers(c, t);
        last = await Promise.all(
          rows(p).map(async ([from, ns, to, host, port, expected]) => ({
            from,
            to,
            expected,
            ...(await probe(ns, host, port)),
          })),
        );
        if (last.every((r) => r.observed === r.expected)) break;
        await sleep(5000);
      }
      const table = (c.figures.networkPolicy ??= []) as {
        from: string;
        to: string;
        expected: Verdict;
        observed: Verdict;
      }[];
      table.push(
        ...last.map(({ from, to, expected, observed }) => ({ from, to: `${to} [${phase}]`, expected, observed })),
      );
      const wrong = last.filter((r) => r.observed !== r.expected);
      if (wrong.length > 0)
        throw new Error(
          wrong
            .map((r) => `${r.from} → ${r.to}: expected ${r.expected}, observed ${r.observed} (${r.detail})`)
            .join('; '),
        );
      return last.map((r) => `${r.from} → ${r.to}: ${r.observed}`).join('; ');
    },
  );
}

async function gatewayKeys(c: Cluster, chat: Chat): Promise<void> {
  await check(
    'new gateway keys: Delivered=True, then their first calls (10 at once, across the replicas) all answer 200',
    async () => {
      const statuses: number[] = [];
      const delivered: number[] = [];
      for (let i = 1; i <= 3; i++) {
        const r = await newGatewayKey(c.api, ACCT, `new-key-${i}`, chat, 10, 300_000);
        statuses.push(...r.statuses);
        delivered.push(r.toDeliveredSeconds);
      }
      c.figures.gatewayKeyFirstCallStatuses = statuses;
      c.figures.gatewayKeyToDeliveredSeconds = delivered;
      const bad = statuses.filter((s) => s !== 200);
      if (bad.length > 0) throw new Error(`first calls after Delivered: ${statuses.join(',')}`);
      return `${statuses.length} first calls all 200; created → Delivered in ${delivered.map((d) => `${d.toFixed(2)} s`).join(', ')}`;
    },
  );
}

async function gatewayIdentity(t: Tools): Promise<void> {
  await check(
    "the gateway's ServiceAccount may not get Secrets nor watch ConfigMaps in the routing namespace (kubectl auth can-i: no)",
    async () => {
      const canI = async (verb: string, resource: string) =>
        (
          await t
            .kubectl('auth', 'can-i', verb, resource, '-n', NS, `--as=${GATEWAY_SA}`)
            .catch((e: { stdout?: string }) => e.stdout ?? '')
        ).trim();
      const answers = { getSecrets: await canI('get', 'secrets'), watchConfigmaps: await canI('watch', 'configmaps') };
      if (answers.getSecrets !== 'no' || answers.watchConfigmaps !== 'no') throw new Error(JSON.stringify(answers));
      return `get secrets: ${answers.getSecrets}; watch configmaps: ${answers.watchConfigmaps}`;
    },
  );
}

async function rotations(
  c: Cluster,
  chat: Chat,
  target: RotationTarget,
  mode: 'stream' | 'volume',
  count: number,
): Promise<void> {
  const label = mode === 'stream' ? 'the delivery stream' : "the kubelet's volume refresh alone";
  await check(
    `${count} rotations on ${label} under steady traffic: Delivered=True, the new key upstream, no request after Delivered with the old key, every request 200`,
    async () => {
      const audit = new AuditLog(c.auditLog);
      const load = startLoad(chat, '', c.up, { workers: 2, pauseMs: 60 });
      const figures: RotationFigure[] = [];
      const before = processCost(OPERATOR_ARGS);
      const from = audit.mark();
      const phaseStart = Date.now();
      try {
        for (let i = 1; i <= count; i++) {
          const r = await rotate(target, load, `${mode}-${i}`, mode === 'stream' ? 120_000 : 300_000);
          figures.push({ toDeliveredSeconds: r.toDeliveredSeconds, toNewKeySeconds: r.toNewKeySeconds });
          c.log(
            `${mode} rotation ${i}: Delivered ${r.toDeliveredSeconds.toFixed(3)} s, new key upstream ${r.toNewKeySeconds.toFixed(3)} s (${r.checked} requests after Delivered checked)`,
          );
        }
      } finally {
        await load.stop();
        c.figures[mode === 'stream' ? 'rotations' : 'volumeOnlyRotations'] = figures;
      }
      const requests = audit.requests(from, audit.mark());
      const phaseSeconds = Math.round((Date.now() - phaseStart) / 1000);
      const after = processCost(OPERATOR_ARGS);
      const per = (n: number) => Math.round((n / count) * 10) / 10;
      ((c.figures.requestsPerRotation ??= {}) as Record<string, unknown>)[mode] = {
        phaseSeconds,
        total: per(requests.total),
        byUser: Object.fromEntries(Object.entries(requests.byUser).map(([u, n]) => [u, per(n)])),
      };
      ((c.figures.operatorCost ??= {}) as Record<string, unknown>)[mode] = {
        cpuSecondsPerRotation:
          after.pids.join() === before.pids.join()
            ? Math.round(((after.cpuSeconds - before.cpuSeconds) / count) * 1000) / 1000
            : null,
        rssMiB: after.rssMiB,
      };
      const failures = load.failures();
      if (Object.keys(failures).length > 0)
        throw new Error(`non-200 answers during the rotations: ${JSON.stringify(failures)} of ${load.sent()}`);
      const d = summary(figures.map((f) => f.toDeliveredSeconds));
      const k = summary(figures.map((f) => f.toNewKeySeconds));
      return `to Delivered p50 ${d.p50} s, p99 ${d.p99} s, worst ${d.worst} s; to the new key upstream p50 ${k.p50} s, p99 ${k.p99} s, worst ${k.worst} s; ${load.sent()} requests, ${per(requests.total)} apiserver requests per rotation`;
    },
  );
}

/** The figures' summary, and the targets each is held to, said plainly when missed (timings never fail the run). */
function reportTargets(c: Cluster): void {
  const f = c.figures as {
    rotations?: RotationFigure[];
    volumeOnlyRotations?: RotationFigure[];
    firstAnswerAfterReadySeconds?: number;
    gatewayKeyFirstCallStatuses?: number[];
    gatewayWatches?: number;
  };
  const side = (r: RotationFigure[] | undefined) =>
    r && r.length > 0
      ? {
          toDeliveredSeconds: summary(r.map((x) => x.toDeliveredSeconds)),
          toNewKeySeconds: summary(r.map((x) => x.toNewKeySeconds)),
        }
      : undefined;
  c.figures.summary = { stream: side(f.rotations), volumeOnly: side(f.volumeOnlyRotations) };
  const p99 = f.rotations?.length ? summary(f.rotations.map((x) => x.toNewKeySeconds)).p99 : Number.NaN;
  const targets = [
    { target: 'p99 of toNewKeySeconds (stream) <= 1 s', value: p99, met: p99 <= 1 },
    {
      target: 'firstAnswerAfterReadySeconds <= 10 s',
      value: f.firstAnswerAfterReadySeconds,
      met: (f.firstAnswerAfterReadySeconds ?? Infinity) <= 10,
    },
    {
      target: 'every first call of a delivered gateway key 200',
      value: f.gatewayKeyFirstCallStatuses,
      met: !!f.gatewayKeyFirstCallStatuses?.length && f.gatewayKeyFirstCallStatuses.every((s) => s === 200),
    },
    { target: '0 gateway watches', value: f.gatewayWatches, met: f.gatewayWatches === 0 },
  ];
  c.figures.targets = targets;
  for (const t of targets.filter((x) => !x.met))
    process.stdout.write(`TARGET MISSED ${t.target}: ${JSON.stringify(t.value)}\n`);
}

async function upgradeAndUninstall(c: Cluster, t: Tools): Promise<void> {
  await check(
    "the upgrade page's two commands (CRDs applied, --reset-then-reuse-values keeps the set values), then helm uninstall leaves no pods, APIService or release objects (CRDs stay, as documented)",
    async () => {
      await t.kubectl(
        'apply',
        '--server-side',
        '--force-conflicts',
        '-f',
        join(c.repo, 'charts', 'byok-operator', 'crds'),
      );
      await t.helm(
        'upgrade',
        'byok',
        join(c.repo, 'charts', 'byok-operator'),
        '-n',
        NS,
        '--reset-then-reuse-values',
        '--set',
        'operator.logLevel=debug',
        '--wait',
        '--timeout',
        '420s',
      );
      // The values set at install survive the upgrade; the one set now is added to them.
      const kept = JSON.parse(await t.helm('get', 'values', 'byok', '-n', NS, '-o', 'json')) as {
        image?: { repository?: string };
        operator?: { logLevel?: string };
        gateway?: { enabled?: boolean; replicas?: number };
      };
      if (
        kept.image?.repository !== 'localhost/byok-operator' ||
        kept.gateway?.enabled !== true ||
        kept.gateway.replicas !== GATEWAY_REPLICAS ||
        kept.operator?.logLevel !== 'debug'
      )
        throw new Error(`values after the upgrade: ${JSON.stringify(kept)}`);
      await t.helm('uninstall', 'byok', '-n', NS, '--wait', '--timeout', '240s');
      await until('pods gone', 120_000, async () =>
        (await t.kubectl('get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/instance=byok', '-o', 'name')).trim() === ''
          ? true
          : undefined,
      );
      const left = (
        await t.kubectl(
          'get',
          'all,configmaps,secrets,networkpolicies,serviceaccounts,roles,rolebindings',
          '-n',
          NS,
          '-o',
          'name',
        )
      )
        .split('\n')
        .filter(
          (l) =>
            l &&
            !/configmap\/(kube-root-ca\.crt|e2e-)|serviceaccount\/default|byok-routing|byok-bundle|ledger-redis/.test(
              l,
            ),
        );
      const apiService = await run('kubectl', ['get', 'apiservice', 'v1.api.byok.gateway.dev'], { env: t.env }).then(
        () => 'present',
        () => 'gone',
      );
      const crds = (await t.kubectl('get', 'crd', '-o', 'name'))
        .split('\n')
        .filter((l) => l.includes('byok.gateway.dev')).length;
      if (left.length > 0 || apiService !== 'gone')
        throw new Error(`left behind: ${left.join(' ')} apiservice ${apiService}`);
      return `APIService gone, ${crds} CRDs kept`;
    },
  );
}
