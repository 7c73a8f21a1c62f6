// Where the operator's heap goes, per structure, measured inside the operator process (bench/lib/operator-child.ts
// with BENCH_MEMORY=1; needs --expose-gc). Each structure is measured as the heap growth, after a full GC, of
// building one more copy of it with the operator's own code from the live caches (cached objects: parsed from
// JSON and passed through the informers' cache transform, as a watch event is; verdicts, compiled/serialized accounts, sealed bundles, shards: rebuilt with the functions the operator
// uses). Retained sizes from a heap snapshot would be the exact figure; this is within a few percent and costs
// seconds instead of a snapshot of the whole heap.
import { getHeapStatistics } from 'node:v8';
import type { KubernetesObject } from '@kubernetes/client-node';
import { sealAccount, shardBundles } from '../../src/bundle/bundle.ts';
import { compileAccount } from '../../src/compiler/compile.ts';
import { type EncodedBucket, serializeAccount, shardSerialized } from '../../src/compiler/shard.ts';
import { ACTIVE_KEY_ENTRY, keyringFromEntries, newDataKey, newKeyId } from '../../src/contract/envelope.ts';
import { secretRefKey } from '../../src/domain/secret-ref.ts';
import { compactForCache } from '../../src/kube/informer.ts';
import type { ResourceInformers } from '../../src/kube/resources.ts';
import type { AccountSnapshot } from '../../src/operator/compile/pipeline.ts';
import { createAccountStateSource, VerdictStore, verdictFromStatus } from '../../src/operator/verdicts.ts';

const gc = (globalThis as { gc?: () => void }).gc;

function heapUsed(): number {
  gc?.();
  gc?.();
  return getHeapStatistics().used_heap_size;
}

const mb = (n: number) => +(n / 1048576).toFixed(1);

/** Heap growth (MB) of keeping what `build` returns; the value is held until after the measurement. */
function measure<T>(build: () => T): { mb: number; value: T } {
  const before = heapUsed();
  const value = build();
  const after = heapUsed();
  return { mb: mb(after - before), value };
}

export function memoryBreakdown(informers: ResourceInformers): Record<string, number | string> {
  if (!gc) return { error: 'run with --expose-gc' };
  const out: Record<string, number | string> = { heapUsedAfterGcMB: mb(heapUsed()) };
  const cached = (list: KubernetesObject[]) => {
    const json = list.map((o) => JSON.stringify(o));
    return measure(() => json.map((j) => compactForCache(JSON.parse(j) as KubernetesObject))).mb;
  };
  out.cachedCredentialsMB = cached(informers.credentials.list());
  out.cachedOtherCrsMB = cached(
    [informers.accounts, informers.workspaces, informers.guardrails, informers.apiKeys].flatMap(
      (i): KubernetesObject[] => i.list(),
    ),
  );
  out.cachedSecretsMB = cached(informers.secrets.list());
  out.cachedObjects = informers.credentials.list().length + informers.secrets.list().length;

  // Verdicts as the reconciler stores them (the payload by reference to its Secret), derived from the statuses it wrote.
  const verdicts = new VerdictStore();
  out.verdictsMB = measure(() => {
    for (const c of informers.credentials.list()) {
      const secret = informers.secrets.get(c.metadata.namespace ?? '', c.spec.secretRef.name);
      const v = verdictFromStatus(c, secret);
      const withPayload = v.payload !== undefined && secret !== undefined;
      verdicts.set(c.metadata.namespace ?? '', c.metadata.name ?? '', {
        valid: v.valid,
        sortOrder: v.sortOrder,
        label: v.label,
        payloadSecret: withPayload ? secret : undefined,
        payloadKey: withPayload ? secretRefKey(c.spec.secretRef) : undefined,
        generation: c.metadata.generation,
        secretResourceVersion: c.status?.secretResourceVersion,
      });
    }
    return verdicts;
  }).mb;

  const source = createAccountStateSource(informers, verdicts);
  const namespaces = source.accountNamespaces();
  const snapshots = new Map<string, AccountSnapshot>(namespaces.map((ns) => [ns, source.snapshot(ns)]));
  const compiled = measure(() => namespaces.map((ns) => compileAccount(snapshots.get(ns)!)));
  out.compiledAccountsMB = compiled.mb;
  const serialized = measure(() => compiled.value.map((c) => serializeAccount(c)));
  out.serializedAccountsMB = serialized.mb;
  const kid = newKeyId();
  const ring = keyringFromEntries(
    new Map([
      [ACTIVE_KEY_ENTRY, Buffer.from(kid)],
      [kid, newDataKey()],
    ]),
  );
  const sealed = measure(() =>
    compiled.value.map((c) => {
      const payloads = new Map(
        snapshots.get(c.namespace)!.credentials.map((s) => [s.resource.metadata.name ?? '', s.verdict.payload ?? '']),
      );
      return sealAccount(
        ring,
        c.namespace,
        c.credentials.map((x) => ({ id: x.id, payload: payloads.get(x.name) ?? '' })),
      );
    }),
  );
  out.sealedBundlesMB = sealed.mb;
  const cache = new Map<string, EncodedBucket>();
  const shards = measure(() => shardSerialized(serialized.value, { cache }));
  out.shardsAndShardCacheMB = shards.mb;
  out.shardBytesMB = mb(shards.value.shards.reduce((s, x) => s + x.bytes, 0));
  out.bundleObjectsTransientMB = measure(() => shardBundles(sealed.value).objects.map((o) => o.entries())).mb;
  out.accounts = namespaces.length;
  return out;
}
