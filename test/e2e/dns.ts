// The e2e cluster's DNS: Service names (`<name>.<namespace>.svc[.cluster.local]`) answered with their ClusterIP, as a
// cluster's DNS add-on answers them, everything else NXDOMAIN. The chart names Services by DNS (the gateway reaches
// the operator's delivery stream as `<release>-delivery.<namespace>.svc`); this one-node cluster has no DNS add-on.
// UDP only, A records only (AAAA and other types get an empty answer), which is all a pod's resolver needs here.
import { createSocket, type Socket } from 'node:dgram';

export interface ClusterDns {
  /** Names asked for, in order (for the log when a pod cannot resolve something). */
  readonly asked: string[];
  close(): Promise<void>;
}

const TYPE_A = 1;
const CLASS_IN = 1;
const SERVICE_NAME = /^([a-z0-9-]+)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?$/;

interface Question {
  name: string;
  type: number;
  /** Where the question section ends (the answer follows it). */
  end: number;
}

function parseQuestion(msg: Buffer): Question | undefined {
  if (msg.length < 12 || msg.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let at = 12;
  while (at < msg.length) {
    const len = msg[at]!;
    if (len === 0) break;
    if (len > 63 || at + 1 + len > msg.length) return undefined;
    labels.push(
      msg
        .subarray(at + 1, at + 1 + len)
        .toString('latin1')
        .toLowerCase(),
    );
    at += 1 + len;
  }
  if (at + 5 > msg.length) return undefined;
  return { name: labels.join('.'), type: msg.readUInt16BE(at + 1), end: at + 5 };
}

function answer(query: Buffer, q: Question, ip: string | undefined, nxdomain: boolean): Buffer {
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  // QR, opcode 0, AA, RD copied, RA; RCODE 3 for a name that does not exist.
  header.writeUInt16BE(0x8400 | (query.readUInt16BE(2) & 0x0100) | 0x0080 | (nxdomain ? 3 : 0), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(ip ? 1 : 0, 6);
  const question = query.subarray(12, q.end);
  if (!ip) return Buffer.concat([header, question]);
  const rr = Buffer.alloc(16);
  rr.writeUInt16BE(0xc00c, 0);
  rr.writeUInt16BE(TYPE_A, 2);
  rr.writeUInt16BE(CLASS_IN, 4);
  rr.writeUInt32BE(5, 6);
  rr.writeUInt16BE(4, 10);
  ip.split('.').forEach((octet, i) => rr.writeUInt8(Number(octet), 12 + i));
  return Buffer.concat([header, question, rr]);
}

/** `clusterIpOf(name, namespace)`: the Service's ClusterIP, or undefined when there is no such Service. */
export async function startClusterDns(
  address: string,
  clusterIpOf: (name: string, namespace: string) => Promise<string | undefined>,
): Promise<ClusterDns> {
  const socket: Socket = createSocket('udp4');
  const asked: string[] = [];
  socket.on('message', (msg, from) => {
    const q = parseQuestion(msg);
    if (!q) return;
    asked.push(q.name);
    const service = SERVICE_NAME.exec(q.name);
    const reply = (ip: string | undefined, nxdomain: boolean) =>
      socket.send(answer(msg, q, ip, nxdomain), from.port, from.address);
    if (!service) return reply(undefined, true);
    void clusterIpOf(service[1]!, service[2]!).then(
      (ip) => reply(ip && q.type === TYPE_A ? ip : undefined, ip === undefined),
      () => reply(undefined, true),
    );
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(53, address, () => resolve());
  });
  return { asked, close: () => new Promise<void>((r) => socket.close(() => r())) };
}
