// What a gateway pod reports back to the operator (docs/gateway.md, "Status endpoint"): per-credential upstream
// outcome counters with the last success and failure times, and what it has loaded (routing index version, bundle
// key id, the version of every credential envelope it holds). Counters and digests only, never key material.
// The report's format is src/contract/gateway-status.ts; this file keeps the counting.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type {
  CredentialCounters,
  GatewayStatusReport,
  HealthOutcome,
  ProbeResult,
} from '../contract/gateway-status.ts';
import { envelopeVersion, readKeyring, resolveGeneration } from '../sdk/index.ts';

export type { CredentialCounters, GatewayStatusReport, HealthOutcome, ProbeResult };

/** The health class of an attempt outcome; null for outcomes that say nothing about the key (bad request, client gone). */
export function healthOutcome(status: number | null, outcome: string): HealthOutcome | null {
  if (outcome === 'ok') return 'ok';
  if (status === 401 || status === 403) return 'unauthorized';
  if (status === 429 || outcome === 'rate_limited') return 'rateLimited';
  if (
    outcome === 'upstream_error' ||
    outcome === 'timeout' ||
    outcome === 'transport_error' ||
    outcome === 'stream_broken'
  )
    return 'upstreamError';
  return null;
}

export class CredentialHealth {
  private readonly byId = new Map<string, CredentialCounters>();
  private readonly probes = new Map<string, ProbeResult>();

  recordProbe(credentialId: string, result: ProbeResult): void {
    this.probes.set(credentialId, result);
  }

  probeSnapshot(): Record<string, ProbeResult> {
    return Object.fromEntries(this.probes);
  }

  record(credentialId: string, outcome: HealthOutcome, at = Date.now()): void {
    let c = this.byId.get(credentialId);
    if (!c) this.byId.set(credentialId, (c = { ok: 0, unauthorized: 0, rateLimited: 0, upstreamError: 0 }));
    c[outcome]++;
    if (outcome === 'ok') c.lastSuccess = at;
    else c.lastFailure = at;
  }

  /** Forget credentials no longer in the loaded config (bounded memory as credentials come and go). */
  retain(keep: (credentialId: string) => boolean): void {
    for (const id of this.byId.keys()) if (!keep(id)) this.byId.delete(id);
    for (const id of this.probes.keys()) if (!keep(id)) this.probes.delete(id);
  }

  snapshot(): Record<string, CredentialCounters> {
    return Object.fromEntries(this.byId);
  }
}

/** The versions of the envelopes in the mounted bundle volume, recomputed only when kubelet swaps a new generation. */
export function bundleInventory(
  bundleDir: string,
  keyDir: string,
  generationOf: () => string = () => resolveGeneration(bundleDir),
): () => GatewayStatusReport['bundle'] {
  let cached: { gen: string; keyGen: string; value: GatewayStatusReport['bundle'] } | undefined;
  return () => {
    // The generation requests see from now on (the gateway's decryptor caches it for ~100 ms): never a newer one.
    const gen = generationOf();
    const keyGen = resolveGeneration(keyDir);
    // A plain directory (no kubelet `..data`) has no generation to compare: always re-read.
    if (cached && cached.gen === gen && cached.keyGen === keyGen && gen !== bundleDir) return cached.value;
    const credentials: Record<string, string> = {};
    try {
      for (const name of readdirSync(gen)) {
        if (name.startsWith('..')) continue;
        credentials[name] = envelopeVersion(readFileSync(join(gen, name)));
      }
    } catch {
      // No bundle volume yet: report none.
    }
    let keyId: string | null = null;
    try {
      keyId = readKeyring(keyDir).active;
    } catch {
      keyId = null;
    }
    const value = { keyId, generation: gen === bundleDir ? '' : gen.slice(gen.lastIndexOf('/') + 1), credentials };
    cached = { gen, keyGen, value };
    return value;
  };
}
