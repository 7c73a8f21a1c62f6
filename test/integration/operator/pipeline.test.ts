// The compile pipeline against the real apiserver: real CRs and Secrets in account namespaces, read back into a
// hand-built AccountStateSource (the reconciler's job in production), compiled into the routing namespace.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { shardAccounts } from '../../../src/compiler/shard.ts';
import type { AccountSnapshot } from '../../../src/compiler/snapshot.ts';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import { parseEnvelope } from '../../../src/contract/envelope.ts';
import { INDEX_KEY, INDEX_NAME, type RoutingIndex } from '../../../src/contract/routing.ts';
import { maskLabel } from '../../../src/domain/label.ts';
import { addBundleKey, CompilePipeline, kubeRoutingStore } from '../../../src/operator/compile/pipeline.ts';
import type {
  Account,
  BYOKCredential,
  GatewayAPIKey,
  Guardrail,
  Workspace,
} from '../../../src/schema/generated/types.ts';
import { API_VERSION, GROUP, VERSION } from '../../../src/schema/resources.ts';
import { createCredentialDecryptor, loadRoutingConfig } from '../../../src/sdk/index.ts';
import { crApi, createTestNamespace, customObjects, testKubeConfig } from '../../support/kube.ts';
import { until } from '../../support/until.ts';

const CANARY = `sk-CANARY${randomBytes(8).toString('hex')}`;
const SHARD_OPTS = { targetBytes: 24 * 1024, gzipAboveBytes: 8 * 1024 };
const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);

async function limited<T>(items: T[], n: number, fn: (t: T) => Promise<unknown>) {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) await fn(items[i++]!);
    }),
  );
}

const hashOf = (s: string) => Buffer.from(s).toString('hex').padEnd(64, '0').slice(0, 64);

async function seedAccount(ns: string, credentials: number) {
  const key = hashOf(`key-${ns}`);
  await crApi('accounts', ns).create({
    apiVersion: API_VERSION,
    kind: 'Account',
    metadata: { name: 'account' },
    spec: { plan: 'enterprise' },
  });
  await crApi('workspaces', ns).create({
    apiVersion: API_VERSION,
    kind: 'Workspace',
    metadata: { name: 'main' },
    spec: { default: true, budgets: { monthly: 100 } },
  });
  await crApi('guardrails', ns).create({
    apiVersion: API_VERSION,
    kind: 'Guardrail',
    metadata: { name: 'g' },
    spec: { budget: { limitUsd: 5 } },
  });
  await crApi('gatewayapikeys', ns).create({
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: { name: 'k' },
    spec: { hash: key, guardrail: 'g' },
  });
  const providers = ['openai', 'anthropic', 'mistral', 'groq'];
  await limited(
    Array.from({ length: credentials }, (_, i) => i),
    16,
    async (i) => {
      const name = `cred-${String(i).padStart(3, '0')}`;
      await core.createNamespacedSecret({
        namespace: ns,
        body: { metadata: { name: `${name}-key` }, stringData: { key: `${CANARY}-${ns}-${i}` } },
      });
      await crApi('byokcredentials', ns).create({
        apiVersion: API_VERSION,
        kind: 'BYOKCredential',
        metadata: { name },
        spec: {
          provider: providers[i % 4],
          secretRef: { name: `${name}-key`, key: 'key' },
          sortOrder: i,
          isFallback: i % 9 === 0,
          ...(i % 5 === 0 ? { allowedApiKeyHashes: [key] } : {}),
        },
      });
    },
  );
}

/** What the reconciler's caches would hold: every object of the account, read back from the apiserver. */
class ApiserverSource {
  snaps = new Map<string, AccountSnapshot>();
  now = new Date();
  async refresh(ns: string) {
    const list = async <T>(plural: string) =>
      (
        (await customObjects().listNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural,
        })) as { items: T[] }
      ).items;
    const secrets = new Map(
      (await core.listNamespacedSecret({ namespace: ns })).items.map((s) => [s.metadata!.name!, s]),
    );
    const creds = await list<BYOKCredential>('byokcredentials');
    const accounts = await list<Account>('accounts');
    this.snaps.set(ns, {
      namespace: ns,
      ...(accounts[0] ? { account: accounts[0] } : {}),
      workspaces: await list<Workspace>('workspaces'),
      guardrails: await list<Guardrail>('guardrails'),
      apiKeys: await list<GatewayAPIKey>('gatewayapikeys'),
      credentials: creds.map((c) => {
        const raw = secrets.get(c.spec.secretRef.name)?.data?.[c.spec.secretRef.key ?? 'key'];
        const payload = raw === undefined ? undefined : Buffer.from(raw, 'base64').toString('utf8');
        return {
          resource: c,
          verdict:
            payload === undefined
              ? { valid: false, sortOrder: c.spec.sortOrder ?? 0 }
              : { valid: true, payload, label: maskLabel(c.spec.provider, payload), sortOrder: c.spec.sortOrder ?? 0 },
        };
      }),
      now: this.now,
    });
  }
  accountNamespaces = () => [...this.snaps.keys()];
  snapshot = (ns: string) => this.snaps.get(ns)!;
}

async function routingObjects(ns: string) {
  const cms = (await core.listNamespacedConfigMap({ namespace: ns, labelSelector: 'byok.gateway.dev/routing' })).items;
  const secrets = (await core.listNamespacedSecret({ namespace: ns })).items;
  return { cms, secrets };
}

function cmBytes(cm: V1ConfigMap, key: string): Buffer {
  if (cm.data?.[key] !== undefined) return Buffer.from(cm.data[key], 'utf8');
  return Buffer.from(cm.binaryData![key]!, 'base64');
}

async function writes(registry: Registry): Promise<number> {
  const metric = await registry.getSingleMetric('byok_configmap_writes_total')!.get();
  return metric.values.reduce((s, v) => s + v.value, 0);
}

describe('compile pipeline on a real apiserver', () => {
  let routingNs: string;
  let big: string;
  const small: string[] = [];
  const source = new ApiserverSource();
  const registry = new Registry();
  let pipeline: CompilePipeline;
  const root = mkdtempSync(join(tmpdir(), 'byok-int-compiler-'));

  beforeAll(async () => {
    routingNs = await createTestNamespace('cmp-routing');
    big = await createTestNamespace('cmp-big');
    // Accounts land in buckets by a hash of their (random) namespace name: with three small accounts, all three could
    // share the big one's bucket (a chance of 1/buckets^3 per run; one shard, and the layout under test never split).
    // CI hit it once; with six the chance is 1/buckets^6.
    for (let i = 0; i < 6; i++) small.push(await createTestNamespace('cmp-small'));
    await seedAccount(big, 200);
    for (const ns of small) await seedAccount(ns, 4);
    for (const ns of [big, ...small]) await source.refresh(ns);
    pipeline = new CompilePipeline({
      kubeConfig: kc,
      routingNamespace: routingNs,
      source,
      logger: pino({ level: 'silent' }),
      registry,
      shardOptions: SHARD_OPTS,
    });
    await pipeline.start();
  }, 120_000);

  afterAll(async () => {
    await pipeline?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("writes exactly the compiler's pure output", async () => {
    const expected = shardAccounts(
      [big, ...small].map((ns) => compileAccount(source.snapshot(ns))),
      SHARD_OPTS,
    );
    expect(expected.shards.length).toBeGreaterThan(1);
    const { cms } = await routingObjects(routingNs);
    const byName = new Map(cms.map((c) => [c.metadata!.name!, c]));
    expect([...byName.keys()].sort()).toEqual([INDEX_NAME, ...expected.shards.map((s) => s.name)].sort());
    expect(byName.get(INDEX_NAME)!.data![INDEX_KEY]).toBe(canonicalJson(expected.index));
    for (const s of expected.shards) expect(cmBytes(byName.get(s.name)!, s.key).equals(s.data)).toBe(true);
    const parsed = JSON.parse(byName.get(INDEX_NAME)!.data![INDEX_KEY]!) as RoutingIndex;
    expect(parsed.shards.reduce((n, s) => n + s.accounts, 0)).toBe(1 + small.length);
  });

  it('gateway view: the SDK loads the written objects and decrypts a payload', async () => {
    const { cms, secrets } = await routingObjects(routingNs);
    const files: Record<string, Buffer> = {};
    for (const cm of cms) {
      for (const [k, v] of Object.entries(cm.data ?? {})) files[k] = Buffer.from(v, 'utf8');
      for (const [k, v] of Object.entries(cm.binaryData ?? {})) files[k] = Buffer.from(v, 'base64');
    }
    kubeletWrite(join(root, 'config'), files);
    const bundleFiles: Record<string, Buffer> = {};
    for (const s of secrets.filter(
      (x) => x.metadata!.name!.startsWith('byok-bundle-') && x.metadata!.name !== 'byok-bundle-key',
    )) {
      for (const [k, v] of Object.entries(s.data ?? {})) bundleFiles[k] = Buffer.from(v, 'base64');
    }
    kubeletWrite(join(root, 'bundle'), bundleFiles);
    const keySecret = secrets.find((x) => x.metadata!.name === 'byok-bundle-key')!;
    kubeletWrite(
      join(root, 'keys'),
      Object.fromEntries(Object.entries(keySecret.data!).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
    );

    const config = loadRoutingConfig(join(root, 'config'));
    const account = config.accounts.get(big)!;
    expect(account.credentials).toHaveLength(200);
    const cred = account.credentials.find((c) => c.name === 'cred-042')!;
    const decryptor = createCredentialDecryptor({ bundleDir: join(root, 'bundle'), keyDir: join(root, 'keys') });
    expect(decryptor.decrypt(config, cred.id)).toBe(`${CANARY}-${big}-42`);
  });

  it('one change writes one shard and the index', async () => {
    const before = await writes(registry);
    const cred = (await crApi('byokcredentials', big).get('cred-007')) as BYOKCredential;
    cred.spec.isRequired = true;
    await crApi('byokcredentials', big).replace('cred-007', cred);
    await source.refresh(big);
    pipeline.markDirty(big);
    const result = await pipeline.flush();
    expect(result).toMatchObject({ shardWrites: 1, indexWritten: true, bundleWrites: 0, deleted: 0 });
    expect((await writes(registry)) - before).toBe(2);
    const { cms } = await routingObjects(routingNs);
    const expected = shardAccounts(
      [big, ...small].map((ns) => compileAccount(source.snapshot(ns))),
      SHARD_OPTS,
    );
    expect(cms.find((c) => c.metadata!.name === INDEX_NAME)!.data![INDEX_KEY]).toBe(canonicalJson(expected.index));
  });

  it('nothing in any ConfigMap contains the canary; bundles hold it only encrypted', async () => {
    for (const ns of [routingNs, big, ...small]) {
      const cms = (await core.listNamespacedConfigMap({ namespace: ns })).items;
      for (const cm of cms) {
        expect(JSON.stringify(cm)).not.toContain(CANARY);
        for (const v of Object.values(cm.binaryData ?? {})) {
          const raw = Buffer.from(v, 'base64');
          const text = raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw).toString('utf8') : raw.toString('latin1');
          expect(text).not.toContain(CANARY);
        }
      }
    }
    const { secrets } = await routingObjects(routingNs);
    for (const s of secrets)
      for (const v of Object.values(s.data ?? {}))
        expect(Buffer.from(v, 'base64').toString('latin1')).not.toContain(CANARY);
  });

  it('an activated bundle key reseals every bundle with nothing else happening (by the key reload and a pass)', async () => {
    const bundleKids = async () => {
      const { secrets } = await routingObjects(routingNs);
      return new Set(
        secrets
          .filter((s) => s.metadata!.labels?.['byok.gateway.dev/routing'] === 'bundle')
          .flatMap((s) =>
            Object.values(s.data ?? {}).map((v) => parseEnvelope(Buffer.from(v, 'base64').toString('utf8')).kid),
          ),
      );
    };
    const before = await bundleKids();
    expect(before.size).toBe(1);
    let compiles = 0;
    const off = pipeline.onCompiled(() => compiles++);
    // No markDirty, no flush: only the key Secret changes, as after `byok-operator bundle-key rotate`.
    const t0 = performance.now();
    const kid = await addBundleKey(kubeRoutingStore(kc, routingNs), 'byok-bundle-key', { activate: true });
    expect(before.has(kid)).toBe(false);
    let kids = before;
    while (performance.now() - t0 < 15_000) {
      kids = await bundleKids();
      if (kids.size === 1 && kids.has(kid)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const elapsed = performance.now() - t0;
    process.stderr.write(
      `[rotation measurements] ${JSON.stringify({ activationToResealedMs: Math.round(elapsed) })}\n`,
    );
    // Resealed within the loop's cap (15 s: the key reload period of 10 s and the pass).
    expect([...kids]).toEqual([kid]);
    // By a compile pass: it reports itself after its last write, so the resealed bundles can be read before it does.
    await until('the pass that resealed the bundles reports its compile', () => compiles >= 1, 10_000);
    off();
  }, 30_000);

  it('deletes stale shards after an account goes away', async () => {
    const beforeNames = new Set((await routingObjects(routingNs)).cms.map((c) => c.metadata!.name!));
    source.snaps.delete(big);
    pipeline.markDirty(big);
    const result = await pipeline.flush();
    expect(result!.deleted).toBeGreaterThan(0);
    const { cms, secrets } = await routingObjects(routingNs);
    const expected = shardAccounts(
      small.map((ns) => compileAccount(source.snapshot(ns))),
      SHARD_OPTS,
    );
    expect(cms.map((c) => c.metadata!.name!).sort()).toEqual(
      [INDEX_NAME, ...expected.shards.map((s) => s.name)].sort(),
    );
    expect(cms.length).toBeLessThan(beforeNames.size);
    const bundleIds = secrets
      .filter((s) => s.metadata!.name!.startsWith('byok-bundle-') && s.metadata!.name !== 'byok-bundle-key')
      .flatMap((s) => Object.keys(s.data ?? {}));
    expect(bundleIds).toHaveLength(small.length * 4);
  });
});
