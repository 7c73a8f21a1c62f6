// The delivery stream's server (docs/operator.md, "Delivery stream"): every operator replica, leader or not, keeps
// the routing ConfigMaps and bundle Secrets of the routing namespace in an informer cache and pushes them to the
// gateway pods connected to it, as signed deltas over a long-lived HTTP/1.1 response of newline-delimited JSON.
// A pod sends what it holds when it connects and receives only what it lacks; a change is pushed 10 ms after the
// last event of a burst, at most 1 s after the first. Pods acknowledge each batch (POST /delivery/v1/ack).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import {
  DEFAULT_DELIVERY_AUDIENCE,
  DELIVERY_ACK_PATH,
  DELIVERY_FORMAT,
  DELIVERY_STREAM_PATH,
  type DeliveryAck,
  type DeliveryKind,
  deltaFor,
  filesDigest,
  isDeliveryFileName,
  MAX_DELIVERY_REQUEST_BYTES,
  objectKey,
  signSubject,
} from '../../contract/delivery.ts';
import { DEFAULT_BUNDLE_KEY_SECRET, type Keyring, keyringFromEntries } from '../../contract/envelope.ts';
import { ROUTING_LABEL } from '../../contract/routing.ts';
import { parseUntrustedJson } from '../../domain/json.ts';
import { kubeClient } from '../../kube/client.ts';
import { createInformer, type SupervisedInformer, stripBulkyMetadata } from '../../kube/informer.ts';
import type { KubeAccess } from '../../kube/kubeconfig.ts';
import { listen } from '../http.ts';
import type { Component } from '../manager.ts';
import { createStreamAuth, type StreamIdentity } from './auth.ts';

export interface DeliveryStreamConfig {
  /** 0 = any free port. */
  port: number;
  host?: string;
  /** Audience of the gateway's projected token (default byok-delivery). */
  audience?: string;
  /** `<namespace>/<name>` of the gateway ServiceAccounts served; nobody else is. */
  serviceAccounts: string[];
  /** Quiet time after the last change of a burst before it is pushed (default 10 ms). */
  debounceMs?: number;
  /** The longest a change waits while a burst goes on (default 1000 ms). */
  maxDelayMs?: number;
  /** A ping line this often, so a pod notices a dead stream (default 15 s). */
  pingMs?: number;
  bundleKeySecretName?: string;
}

export interface DeliveryAckRecord {
  who: StreamIdentity;
  batch: number;
  result: DeliveryAck['result'];
  reason: string | undefined;
  routingVersion: string | null;
  at: number;
}

interface Wire extends KubernetesObject {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

interface Served {
  kind: DeliveryKind;
  name: string;
  version: string;
  digest: string;
  files: Record<string, string>;
  /** The signed line, for the keyring it was signed under. */
  line?: { ring: Keyring; text: string };
}

interface Conn {
  res: ServerResponse;
  who: StreamIdentity;
  instance: string;
  held: Map<string, string>;
  batch: number;
}

const TOMBSTONES_KEPT = 4096;
/** A pod that reads slower than this much unsent data is dropped; it reconnects and receives one fresh delta. */
const MAX_UNSENT_BYTES = 64 * 1024 * 1024;
const ACKS_KEPT = 10_000;

/** A ConfigMap's or Secret's files as a projected volume shows them, base64. */
function filesOf(kind: DeliveryKind, o: Wire): Record<string, string> {
  const files: Record<string, string> = {};
  const take = (entries: Record<string, string> | undefined, encode: boolean) => {
    for (const [k, v] of Object.entries(entries ?? {}))
      if (isDeliveryFileName(k)) files[k] = encode ? Buffer.from(v, 'utf8').toString('base64') : v;
  };
  take(o.data, kind === 'ConfigMap');
  if (kind === 'ConfigMap') take(o.binaryData, false);
  return files;
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_DELIVERY_REQUEST_BYTES) throw Object.assign(new Error('request body too large'), { status: 413 });
    chunks.push(chunk);
  }
  try {
    return parseUntrustedJson(Buffer.concat(chunks));
  } catch {
    throw Object.assign(new Error('request body is not JSON'), { status: 400 });
  }
}

const isVersion = (v: unknown): v is string => typeof v === 'string' && /^[1-9][0-9]{0,39}$/.test(v);

/** The hello's held list as key -> version; throws on anything malformed. */
function heldOf(body: unknown): { instance: string; held: Map<string, string> } {
  const b = body as { format?: unknown; instance?: unknown; held?: unknown } | null;
  if (
    !b ||
    b.format !== DELIVERY_FORMAT ||
    typeof b.instance !== 'string' ||
    !/^[-A-Za-z0-9]{1,64}$/.test(b.instance) ||
    !Array.isArray(b.held)
  ) {
    throw Object.assign(new Error(`expected a ${DELIVERY_FORMAT} hello`), { status: 400 });
  }
  const held = new Map<string, string>();
  for (const h of b.held as { kind?: unknown; name?: unknown; version?: unknown }[]) {
    if (
      !h ||
      (h.kind !== 'ConfigMap' && h.kind !== 'Secret') ||
      typeof h.name !== 'string' ||
      h.name.length > 253 ||
      !isVersion(h.version)
    ) {
      throw Object.assign(new Error('a held entry is malformed'), { status: 400 });
    }
    held.set(objectKey(h.kind, h.name), h.version);
  }
  return { instance: b.instance, held };
}

function ackOf(body: unknown): DeliveryAck {
  const a = body as Partial<DeliveryAck> | null;
  if (
    !a ||
    a.format !== DELIVERY_FORMAT ||
    typeof a.instance !== 'string' ||
    a.instance.length > 64 ||
    !Number.isSafeInteger(a.batch) ||
    (a.result !== 'loaded' && a.result !== 'refused') ||
    (a.reason !== undefined && typeof a.reason !== 'string') ||
    (a.routingVersion !== null && typeof a.routingVersion !== 'string')
  ) {
    throw Object.assign(new Error(`expected a ${DELIVERY_FORMAT} acknowledgement`), { status: 400 });
  }
  return {
    format: DELIVERY_FORMAT,
    instance: a.instance,
    batch: a.batch!,
    result: a.result,
    ...(a.reason !== undefined ? { reason: a.reason.slice(0, 512) } : {}),
    routingVersion: a.routingVersion ?? null,
  };
}

function streamMetrics(registry: Registry) {
  const registers = [registry];
  return {
    connections: new Gauge({
      name: 'byok_delivery_stream_connections',
      help: "Gateway pods connected to this replica's delivery stream.",
      registers,
    }),
    batches: new Counter({
      name: 'byok_delivery_stream_batches_total',
      help: 'Batches pushed to gateway pods.',
      registers,
    }),
    objects: new Counter({
      name: 'byok_delivery_stream_objects_sent_total',
      help: 'Routing ConfigMaps and bundle Secrets pushed, by kind.',
      labelNames: ['kind'],
      registers,
    }),
    acks: new Counter({
      name: 'byok_delivery_stream_acks_total',
      help: 'Acknowledgements from gateway pods, by result (loaded, refused).',
      labelNames: ['result'],
      registers,
    }),
    refused: new Counter({
      name: 'byok_delivery_stream_requests_refused_total',
      help: 'Stream and ack requests refused (authentication, authorization, malformed, not ready), by HTTP status.',
      labelNames: ['status'],
      registers,
    }),
  };
}

/** The routing objects as served: kept from the informers' events, each signed once per keyring. */
class ServedObjects {
  readonly objects = new Map<string, Served>();
  readonly tombstones = new Map<string, string>();
  ring: Keyring | undefined;
  private readonly keySecret: string;

  constructor(keySecret: string) {
    this.keySecret = keySecret;
  }

  observe(kind: DeliveryKind, o: Wire, deleted: boolean): boolean {
    const name = o.metadata?.name ?? '';
    if (kind === 'Secret' && name === this.keySecret) {
      if (deleted) return false;
      try {
        this.ring = keyringFromEntries(
          new Map(Object.entries(o.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
        );
      } catch {
        // A half-written key Secret: keep signing with the last good keyring.
      }
      return false;
    }
    const key = objectKey(kind, name);
    const version = o.metadata?.resourceVersion ?? '';
    if (!isVersion(version)) return false;
    if (deleted) {
      this.objects.delete(key);
      this.tombstones.delete(key);
      this.tombstones.set(key, version);
      if (this.tombstones.size > TOMBSTONES_KEPT) this.tombstones.delete(this.tombstones.keys().next().value!);
      return true;
    }
    const files = filesOf(kind, o);
    this.objects.set(key, { kind, name, version, digest: filesDigest(files), files });
    this.tombstones.delete(key);
    return true;
  }

  line(key: string): string {
    const s = this.objects.get(key)!;
    const ring = this.ring!;
    if (s.line?.ring !== ring) {
      const { kid, sig } = signSubject(ring, s);
      s.line = {
        ring,
        text: `${JSON.stringify({ type: 'object', kind: s.kind, name: s.name, version: s.version, digest: s.digest, files: s.files, kid, sig })}\n`,
      };
    }
    return s.line.text;
  }

  removal(key: string): string {
    const [kind, name] = key.split('/') as [DeliveryKind, string];
    const version = this.tombstones.get(key)!;
    const { kid, sig } = signSubject(this.ring!, { kind, name, version, digest: '' });
    return `${JSON.stringify({ type: 'removed', kind, name, version, kid, sig })}\n`;
  }
}

/**
 * The delivery stream server, a component of every replica: from its own informer cache of the routing namespace, it
 * streams each connected gateway pod the routing objects it lacks, and records their acknowledgements.
 */
export class DeliveryStreamServer implements Component {
  readonly name = 'delivery stream';
  readonly everyReplica = true;
  private readonly cfg: DeliveryStreamConfig;
  private readonly log: Logger;
  private readonly m: ReturnType<typeof streamMetrics>;
  private readonly served: ServedObjects;
  private readonly auth: ReturnType<typeof createStreamAuth>;
  private readonly conns = new Set<Conn>();
  private readonly ackRecords = new Map<string, DeliveryAckRecord>();
  private readonly informers: SupervisedInformer<Wire>[];
  private readonly server: Server;
  private listening: { url: string; close(): Promise<void> } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private firstAt: number | undefined;

  constructor(
    cfg: DeliveryStreamConfig,
    deps: { kubeConfig: KubeAccess; routingNamespace: string; logger: Logger; registry: Registry },
  ) {
    this.cfg = cfg;
    this.log = deps.logger;
    this.m = streamMetrics(deps.registry);
    this.served = new ServedObjects(cfg.bundleKeySecretName ?? DEFAULT_BUNDLE_KEY_SECRET);
    this.auth = createStreamAuth({
      client: kubeClient(deps.kubeConfig),
      audience: cfg.audience ?? DEFAULT_DELIVERY_AUDIENCE,
      serviceAccounts: cfg.serviceAccounts,
    });
    const informer = (kind: DeliveryKind, labels: string): SupervisedInformer<Wire> => {
      const inf = createInformer<Wire>({
        kubeConfig: deps.kubeConfig,
        path: kind === 'ConfigMap' ? '/api/v1/configmaps' : '/api/v1/secrets',
        namespaces: [deps.routingNamespace],
        labelSelector: `${ROUTING_LABEL} in (${labels})`,
        name: `delivery-${kind.toLowerCase()}s`,
        logger: this.log,
        transform: stripBulkyMetadata,
      });
      const changed = (o: Wire, deleted: boolean) => {
        if (this.served.observe(kind, o, deleted)) this.schedule();
      };
      inf.on('add', (o) => changed(o, false));
      inf.on('update', (o) => changed(o, false));
      inf.on('delete', (o) => changed(o, true));
      return inf;
    };
    this.informers = [informer('ConfigMap', 'index,shard'), informer('Secret', 'bundle,bundle-key')];
    this.server = createServer((req, res) => this.handle(req, res));
  }

  /** Syncs the informers, then listens. */
  async start(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.start()));
    this.listening = await listen(this.server, this.cfg.port, this.cfg.host);
  }

  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    await this.listening?.close();
    await Promise.all(this.informers.map((i) => i.stop()));
  }

  /** Where it listens, once started. */
  get url(): string {
    return this.listening?.url ?? '';
  }

  /** Pods connected now. */
  connections(): number {
    return this.conns.size;
  }

  /** The last acknowledgement of each gateway process (by its instance id). */
  acks(): ReadonlyMap<string, DeliveryAckRecord> {
    return this.ackRecords;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/healthz') return void res.end('ok\n');
    if (req.method !== 'POST' || (path !== DELIVERY_STREAM_PATH && path !== DELIVERY_ACK_PATH))
      return this.refuse(res, 404, 'not found');
    this.auth
      .check(req.headers.authorization)
      .then(async (a) => {
        if (!a.ok) return this.refuse(res, a.status, a.reason);
        await (path === DELIVERY_STREAM_PATH ? this.openStream(req, res, a.who) : this.recordAck(req, res, a.who));
      })
      .catch((err: unknown) => {
        const status = (err as { status?: number }).status ?? 503;
        if (!res.headersSent)
          this.refuse(res, status, status === 503 ? 'the token could not be reviewed; retry' : (err as Error).message);
        else res.destroy();
      });
  }

  private push(c: Conn): void {
    const { served, m } = this;
    if (c.res.writableLength > MAX_UNSENT_BYTES) {
      this.log.warn(
        { instance: c.instance, pod: c.who.pod },
        'a gateway pod reads the delivery stream too slowly; dropping it (it reconnects)',
      );
      c.res.destroy();
      return;
    }
    const { send, remove } = deltaFor(c.held, served.objects, served.tombstones);
    if (send.length === 0 && remove.length === 0 && c.batch > 0) return;
    let text = '';
    for (const key of send) {
      text += served.line(key);
      c.held.set(key, served.objects.get(key)!.version);
      m.objects.inc({ kind: served.objects.get(key)!.kind });
    }
    for (const key of remove) {
      text += served.removal(key);
      c.held.delete(key);
    }
    c.batch++;
    text += `${JSON.stringify({ type: 'commit', batch: c.batch })}\n`;
    c.res.write(text);
    m.batches.inc();
  }

  // Debounce: debounceMs after the last change of a burst, at most maxDelayMs after its first.
  private schedule(): void {
    if (!this.informers.every((i) => i.hasSynced())) return;
    const now = Date.now();
    this.firstAt ??= now;
    if (this.timer) clearTimeout(this.timer);
    const delay = Math.min(this.cfg.debounceMs ?? 10, this.firstAt + (this.cfg.maxDelayMs ?? 1000) - now);
    this.timer = setTimeout(() => this.flush(), Math.max(0, delay));
  }

  private flush(): void {
    this.timer = undefined;
    this.firstAt = undefined;
    if (!this.served.ring) return;
    for (const c of this.conns) this.push(c);
  }

  private refuse(res: ServerResponse, status: number, reason: string): void {
    this.m.refused.inc({ status: String(status) });
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(`${JSON.stringify({ error: { code: status, message: reason } })}\n`);
  }

  private async openStream(req: IncomingMessage, res: ServerResponse, who: StreamIdentity): Promise<void> {
    const { instance, held } = heldOf(await readBody(req));
    if (!this.informers.every((i) => i.hasSynced()) || !this.served.ring)
      return this.refuse(res, 503, 'the delivery cache is not ready yet; retry');
    res.writeHead(200, { 'Content-Type': 'application/x-ndjson', 'Cache-Control': 'no-store' });
    res.socket?.setNoDelay(true);
    const c: Conn = { res, who, instance, held, batch: 0 };
    this.conns.add(c);
    this.m.connections.set(this.conns.size);
    const ping = setInterval(() => res.write('{"type":"ping"}\n'), this.cfg.pingMs ?? 15_000);
    res.on('close', () => {
      clearInterval(ping);
      this.conns.delete(c);
      this.m.connections.set(this.conns.size);
    });
    this.log.info(
      { instance, pod: who.pod, serviceAccount: who.username, held: held.size },
      'gateway pod connected to the delivery stream',
    );
    this.push(c);
  }

  private async recordAck(req: IncomingMessage, res: ServerResponse, who: StreamIdentity): Promise<void> {
    const ack = ackOf(await readBody(req));
    this.m.acks.inc({ result: ack.result });
    const acks = this.ackRecords;
    acks.delete(ack.instance);
    const { batch, result, reason, routingVersion } = ack;
    acks.set(ack.instance, { who, batch, result, reason, routingVersion, at: Date.now() });
    if (acks.size > ACKS_KEPT) acks.delete(acks.keys().next().value!);
    if (ack.result === 'refused')
      this.log.warn(
        { instance: ack.instance, pod: who.pod, batch: ack.batch, reason: ack.reason },
        'a gateway pod refused a delivery batch',
      );
    res.writeHead(204);
    res.end();
  }
}
