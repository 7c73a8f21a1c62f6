// Shared pieces of the integrity tests: the hostile value table, reading the compiled routing straight from the
// routing ConfigMaps (what a gateway mounts), and the cluster-wide health checks run after each hostile value.

import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { CoreV1Api, EventsV1Api, type KubeConfig } from '@kubernetes/client-node';
import { INDEX_KEY, INDEX_NAME, type RoutingIndex, type ShardDocument } from '../../../src/contract/routing.ts';
import type { CompiledAccount } from '../../../src/domain/compiled.ts';
import { kubectl } from '../../support/kube.ts';

/** A hostile text value: `text` for JSON-capable doors, or raw bytes (invalid UTF-8) where only bytes can carry it. */
export interface HostileValue {
  label: string;
  /** The value as a JS string (undefined: only expressible as bytes). */
  text?: string;
  /** Raw UTF-8-invalid bytes to splice into a body or a Secret. */
  bytes?: Buffer;
  /** A value longer than any limit: refused for its size, possibly before any text rule (413 at REST). */
  oversize?: boolean;
}

export const HOSTILE: readonly HostileValue[] = [
  { label: 'C0 ESC (terminal escape)', text: 'pre\u001b[31mred' },
  { label: 'C0 BEL', text: 'ring\u0007bell' },
  { label: 'NUL', text: 'nul\u0000byte' },
  { label: 'DEL', text: 'del\u007fete' },
  { label: 'C1 U+0096', text: 'c1\u0096ctl' },
  { label: 'C1 NEL U+0085', text: 'nel\u0085line' },
  { label: 'U+2028 line separator', text: 'ls\u2028sep' },
  { label: 'U+2029 paragraph separator', text: 'ps\u2029sep' },
  { label: 'noncharacter U+FFFE', text: 'non\ufffechar' },
  { label: 'lone surrogate (JSON \\ud800 escape)', text: 'lone\ud800half' },
  { label: 'invalid UTF-8 bytes', bytes: Buffer.from([0x62, 0x61, 0x64, 0xff, 0xfe, 0x75, 0x74, 0x66]) },
  { label: '1 MB string', text: 'x'.repeat(1024 * 1024), oversize: true },
];

/** The compiled accounts currently in the routing ConfigMaps (index, then every shard part), by namespace. */
export async function readRouting(kc: KubeConfig, routingNs: string): Promise<Map<string, CompiledAccount>> {
  const core = kc.makeApiClient(CoreV1Api);
  const cms = await core.listNamespacedConfigMap({ namespace: routingNs });
  const byName = new Map(cms.items.map((c) => [c.metadata?.name ?? '', c]));
  const indexText = byName.get(INDEX_NAME)?.data?.[INDEX_KEY];
  const out = new Map<string, CompiledAccount>();
  if (!indexText) return out;
  const index = JSON.parse(indexText) as RoutingIndex;
  for (const shard of index.shards) {
    const parts = shard.parts.map((p) => {
      const cm = byName.get(p.name);
      const text = cm?.data?.[p.key];
      if (text !== undefined) return Buffer.from(text, 'utf8');
      const b64 = cm?.binaryData?.[p.key];
      if (b64 === undefined) throw new Error(`routing part ${p.name} missing`);
      return Buffer.from(b64, 'base64');
    });
    const payload = Buffer.concat(parts);
    const doc = JSON.parse(
      (shard.encoding === 'gzip' ? gunzipSync(payload) : payload).toString('utf8'),
    ) as ShardDocument;
    for (const a of doc.accounts) out.set(a.namespace, a);
  }
  return out;
}

/** Credential names of one account in the compiled routing. */
export async function routedCredentials(kc: KubeConfig, routingNs: string, ns: string): Promise<string[]> {
  const a = (await readRouting(kc, routingNs)).get(ns);
  return (a?.credentials ?? []).map((c) => c.name).sort();
}

/** `kubectl get <what> -A -o yaml` must keep working for the whole cluster whatever a tenant sent. */
export async function kubectlYamlWorks(): Promise<string> {
  return kubectl('get', 'byok-all', '-A', '-o', 'yaml');
}

/** Every Warning/Normal Event note and reason in some namespaces, for canary checks. */
export async function eventTexts(kc: KubeConfig, namespaces: readonly string[]): Promise<string> {
  const api = kc.makeApiClient(EventsV1Api);
  const parts: string[] = [];
  for (const ns of namespaces) {
    const list = await api.listNamespacedEvent({ namespace: ns });
    for (const e of list.items) parts.push(`${e.reason ?? ''} ${e.note ?? ''}`);
  }
  return parts.join('\n');
}

/** Sends raw bytes to the apiserver with kubectl (the only way to put invalid UTF-8 on the wire as-is). */
export async function kubectlCreateRaw(path: string, body: Buffer): Promise<{ ok: boolean; output: string }> {
  const file = join(tmpdir(), `byok-raw-${randomBytes(4).toString('hex')}.json`);
  await writeFile(file, body);
  try {
    return { ok: true, output: await kubectl('create', '--raw', path, '-f', file) };
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message?: string };
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}${e.message ?? ''}` };
  }
}

/** A JSON document with the marker string "@@" replaced by raw bytes. */
export function jsonWithBytes(doc: unknown, bytes: Buffer): Buffer {
  const [before, after] = JSON.stringify(doc).split('@@');
  return Buffer.concat([Buffer.from(before ?? '', 'utf8'), bytes, Buffer.from(after ?? '', 'utf8')]);
}
