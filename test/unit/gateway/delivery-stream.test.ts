// The gateway's stream client (src/gateway/delivery-stream.ts) against a scripted peer speaking the protocol on a real
// socket: it presents the token file's current content, writes what verified into the volume layout, acknowledges
// loaded or refused with the reason, keeps what verified when another object of the batch is forged, says what it
// holds when it reconnects, and never applies an older version.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from '@jest/globals';
import {
  DELIVERY_ACK_PATH,
  type DeliveryAck,
  type DeliveryHello,
  type DeliveryKind,
  filesDigest,
  signSubject,
} from '../../../src/contract/delivery.ts';
import type { Keyring } from '../../../src/contract/envelope.ts';
import { type DeliveryStream, startDeliveryStream } from '../../../src/gateway/delivery-stream.ts';
import { until } from '../../support/until.ts';

const ring: Keyring = { active: 'k1', keys: new Map([['k1', Buffer.alloc(32, 3)]]) };
const forger: Keyring = { active: 'k1', keys: new Map([['k1', Buffer.alloc(32, 4)]]) };

function line(kind: DeliveryKind, name: string, version: string, files: Record<string, string>, signer = ring): string {
  const b64 = Object.fromEntries(Object.entries(files).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
  const digest = filesDigest(b64);
  return `${JSON.stringify({ type: 'object', kind, name, version, digest, files: b64, ...signSubject(signer, { kind, name, version, digest }) })}\n`;
}

async function body(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req as AsyncIterable<Buffer>) text += chunk.toString();
  return JSON.parse(text);
}

describe('delivery stream client', () => {
  const cleanup: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanup.splice(0)) c();
  });

  async function peer(onStream: (hello: DeliveryHello, res: ServerResponse, n: number) => void) {
    const acks: DeliveryAck[] = [];
    const tokens: string[] = [];
    let streams = 0;
    const server: Server = createServer((req, res) => {
      tokens.push(req.headers.authorization ?? '');
      void body(req).then((b) => {
        if (req.url === DELIVERY_ACK_PATH) {
          acks.push(b as DeliveryAck);
          res.writeHead(204).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        onStream(b as DeliveryHello, res, streams++);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => {
      server.closeAllConnections();
      server.close();
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, acks, tokens };
  }

  function client(
    url: string,
    loads: { routingVersion: string | null; problem?: string }[] = [],
  ): { stream: DeliveryStream; dir: string; tokenFile: string } {
    const dir = mkdtempSync(join(tmpdir(), 'byok-stream-client-'));
    const keyDir = join(dir, 'key');
    mkdirSync(keyDir);
    writeFileSync(join(keyDir, 'active'), 'k1');
    writeFileSync(join(keyDir, 'k1'), ring.keys.get('k1')!);
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'token-one\n');
    const stream = startDeliveryStream({
      url,
      tokenFile,
      keyDir,
      dir: join(dir, 'out'),
      instance: 'pod-a',
      backoffMinMs: 20,
      backoffMaxMs: 40,
      load: () => loads.shift() ?? { routingVersion: 'v' },
    });
    cleanup.push(() => {
      stream.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return { stream, dir, tokenFile };
  }

  test('applies a signed batch, writes the volume layout, acknowledges loaded; a forged object is refused with its reason, the rest kept, and the pod reconnects saying what it holds', async () => {
    const hellos: DeliveryHello[] = [];
    const p = await peer((hello, res, n) => {
      hellos.push(hello);
      if (n > 0) return;
      res.write(
        line('ConfigMap', 'byok-routing-index', '10', { 'byok-routing-index.json': '{"i":10}' }) +
          line('Secret', 'byok-bundle-0', '11', { 'cred-a': 'envelope-a' }),
      );
      res.write('{"type":"commit","batch":1}\n');
      res.write(
        line('Secret', 'byok-bundle-0', '12', { 'cred-a': 'forged' }, forger) +
          line('ConfigMap', 'byok-routing-0', '13', { 'byok-routing-0.json': '{"s":0}' }),
      );
      res.write('{"type":"commit","batch":2}\n');
    });
    const { stream, dir } = client(p.url);
    await until('two acks', () => p.acks.length >= 2);
    expect(p.tokens[0]).toBe('Bearer token-one');
    expect(p.acks[0]).toMatchObject({ batch: 1, result: 'loaded', instance: 'pod-a', routingVersion: 'v' });
    expect(p.acks[1]).toMatchObject({ batch: 2, result: 'refused' });
    expect(p.acks[1]!.reason).toMatch(/Secret\/byok-bundle-0: the signature does not verify/);
    expect(readFileSync(join(dir, 'out', 'bundles', 'cred-a'), 'utf8')).toBe('envelope-a');
    expect(readFileSync(join(dir, 'out', 'routing', 'byok-routing-0.json'), 'utf8')).toBe('{"s":0}');
    // The operator counts what it sent as held: after a refusal the pod reconnects, and its hello says what it really
    // holds (the bundle at 11, not the refused 12), so the refused object comes again.
    await until('a second hello', () => hellos.length >= 2);
    expect(hellos[1]!.held).toEqual(
      expect.arrayContaining([
        { kind: 'Secret', name: 'byok-bundle-0', version: '11' },
        { kind: 'ConfigMap', name: 'byok-routing-0', version: '13' },
      ]),
    );
    expect(stream.batches()).toBe(2);
  });

  test('a reconnect presents the rotated token and what the pod holds; an older version from a lagging replica is refused', async () => {
    const hellos: DeliveryHello[] = [];
    const p = await peer((hello, res, n) => {
      hellos.push(hello);
      if (n === 0) {
        res.write(`${line('Secret', 'byok-bundle-0', '20', { 'cred-a': 'new' })}{"type":"commit","batch":1}\n`);
        setTimeout(() => res.destroy(), 50);
      } else {
        res.write(`${line('Secret', 'byok-bundle-0', '19', { 'cred-a': 'old' })}{"type":"commit","batch":1}\n`);
      }
    });
    const { dir, tokenFile } = client(p.url);
    await until('first ack', () => p.acks.length >= 1);
    writeFileSync(tokenFile, 'token-two\n');
    // Each refusal drops the stream and the next connect is refused again, so acks keep coming: a loaded machine may
    // poll past any exact count. Wait for a connect that presented the rotated token and for its refusal.
    await until('a refusal after the rotated token', () => p.acks.length >= 2 && p.tokens.includes('Bearer token-two'));
    expect(hellos[1]!.held).toEqual([{ kind: 'Secret', name: 'byok-bundle-0', version: '20' }]);
    expect(p.acks[1]).toMatchObject({
      result: 'refused',
      reason: expect.stringMatching(/older than the held 20 \(never backwards\)/),
    });
    expect(readFileSync(join(dir, 'out', 'bundles', 'cred-a'), 'utf8')).toBe('new');
  });

  test('a load the SDK refuses is acknowledged refused with its reason', async () => {
    const p = await peer((_hello, res) =>
      res.write(
        `${line('ConfigMap', 'byok-routing-index', '5', { 'byok-routing-index.json': '{}' })}{"type":"commit","batch":1}\n`,
      ),
    );
    client(p.url, [
      {
        routingVersion: null,
        problem: 'the delivered routing config does not load (corrupt): index has an unknown format',
      },
    ]);
    await until('ack', () => p.acks.length >= 1);
    expect(p.acks[0]).toMatchObject({
      result: 'refused',
      reason: expect.stringContaining('does not load (corrupt)'),
      routingVersion: null,
    });
  });
});
