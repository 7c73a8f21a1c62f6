// The credential reconcile's own bookkeeping around the pure checks, over in-memory caches (no cluster): the
// missing-Secret backoff, the verdict the compile pipeline reads, the quota waiting list, API-key expiry requeues.
import { describe, expect, test } from '@jest/globals';
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import type { Applier } from '../../../../src/kube/apply.ts';
import { KubeApiError, type KubeClient } from '../../../../src/kube/client.ts';
import { INDEX, type ResourceInformers } from '../../../../src/kube/resources.ts';
import { CredentialReconciler } from '../../../../src/operator/reconcile/credential.ts';
import type { StatusWriter } from '../../../../src/operator/reconcile/status-writer.ts';
import { VerdictStore } from '../../../../src/operator/verdicts.ts';
import type { Account, BYOKCredential, GatewayAPIKey } from '../../../../src/schema/generated/types.ts';
import { account, credential, gatewayKey, inNamespace, withMetadata, withSpec } from '../../../support/builders.ts';

/** A cache with the informer's read methods; byIndex only knows the API-key hash index. */
function cache<T extends KubernetesObject>(items: T[] = []) {
  const key = (o: KubernetesObject) => `${o.metadata?.namespace}/${o.metadata?.name}`;
  const map = new Map(items.map((o) => [key(o), o]));
  return {
    get: (ns: string, name: string) => map.get(`${ns}/${name}`),
    list: (ns?: string) => [...map.values()].filter((o) => ns === undefined || o.metadata?.namespace === ns),
    byIndex: (index: string, value: string) =>
      index === INDEX.apiKeyHash
        ? [...map.values()].filter(
            (o) => `${o.metadata?.namespace}/${(o as unknown as GatewayAPIKey).spec.hash}` === value,
          )
        : [],
    observe: (o: T) => void map.set(key(o), o),
    remove: (o: T) => void map.delete(key(o)),
  };
}

const HASH = 'b'.repeat(64);
const cred = (name: string, created: string, spec: Partial<BYOKCredential['spec']> = {}): BYOKCredential =>
  credential(
    name,
    inNamespace('team'),
    withMetadata({ generation: 1, creationTimestamp: created as unknown as Date }),
    withSpec(spec),
  );
const secret = (name: string, value: string): V1Secret => ({
  metadata: { name, namespace: 'team', resourceVersion: '7' },
  data: { key: Buffer.from(value).toString('base64') },
});

const teamAccount = (spec: Account['spec'] = {}): Account =>
  account(
    'acc',
    inNamespace('team'),
    withMetadata({ creationTimestamp: '2024-01-01T00:00:00Z' as unknown as Date }),
    withSpec(spec),
  );

/** The namespace holds an Account unless `accounts` says otherwise (the gate). */
function harness(opts: {
  creds: BYOKCredential[];
  secrets?: V1Secret[];
  apiKeys?: GatewayAPIKey[];
  accounts?: Account[];
}) {
  const informers = {
    credentials: cache(opts.creds),
    secrets: cache(opts.secrets),
    apiKeys: cache(opts.apiKeys),
    workspaces: cache(),
    guardrails: cache(),
    accounts: cache(opts.accounts ?? [teamAccount()]),
  };
  const writes: { name: string; status: Record<string, unknown> }[] = [];
  const warnings: { reason: string; secrets: string[] }[] = [];
  const writer = {
    async write(_kind: string, obj: KubernetesObject, status: Record<string, unknown>) {
      writes.push({ name: obj.metadata?.name ?? '', status });
    },
    warn(_obj: KubernetesObject, reason: string, _message: string, secrets: string[] = []) {
      warnings.push({ reason, secrets });
    },
  } as unknown as StatusWriter;
  let gets = 0;
  const client = {
    async request() {
      gets++;
      throw new KubeApiError(404, { reason: 'NotFound' } as never, 'get');
    },
  } as unknown as KubeClient;
  const dirty: string[] = [];
  const verdicts = new VerdictStore();
  const lookups: string[] = [];
  const reconciler = new CredentialReconciler({
    informers: informers as unknown as ResourceInformers,
    client,
    applier: {} as Applier,
    metrics: { secretLookups: { inc: (l: { result: string }) => void lookups.push(l.result) } } as never,
    verdicts,
    markDirty: (ns) => void dirty.push(ns),
    writer,
    missingSecretMaxDelayMs: 3000,
  });
  return { reconciler, informers, writes, warnings, dirty, verdicts, lookups, gets: () => gets };
}

describe('CredentialReconciler', () => {
  test('a missing Secret: looked up directly, requeued with a doubling backoff capped by missingSecretMaxDelayMs', async () => {
    const h = harness({ creds: [cred('c', '2024-01-01T00:00:00Z')] });
    const delays: (number | undefined)[] = [];
    for (let i = 0; i < 6; i++) delays.push((await h.reconciler.reconcile('team/c'))?.requeueAfterMs);
    expect(delays).toEqual([250, 500, 1000, 2000, 3000, 3000]);
    expect(h.lookups).toEqual(Array(6).fill('not_found'));
    expect(h.warnings.map((w) => w.reason)).toEqual(Array(6).fill('SecretNotFound'));
    expect(h.verdicts.get('team', 'c')).toMatchObject({ valid: false, payloadSecret: undefined });
    // Forgetting the credential restarts the backoff.
    h.reconciler.forget(cred('c', '2024-01-01T00:00:00Z'));
    expect((await h.reconciler.reconcile('team/c'))?.requeueAfterMs).toBe(250);
  });

  test('a valid credential: a verdict pointing at the cached Secret, the account marked dirty once, no requeue, no warning', async () => {
    const s = secret('c-key', 'sk-test-1234567890');
    const h = harness({ creds: [cred('c', '2024-01-01T00:00:00Z')], secrets: [s] });
    expect(await h.reconciler.reconcile('team/c')).toBeUndefined();
    expect(h.verdicts.get('team', 'c')).toMatchObject({
      valid: true,
      payloadSecret: s,
      payloadKey: 'key',
      secretResourceVersion: '7',
      sortOrder: 0,
    });
    expect(h.writes[0]?.status).toMatchObject({
      secretResourceVersion: '7',
      workspaceScope: 'GLOBAL',
      sortOrder: 0,
      label: expect.any(String),
    });
    await h.reconciler.reconcile('team/c');
    expect(h.dirty).toEqual(['team']);
    expect(h.warnings).toEqual([]);
    expect(h.gets()).toBe(0);
  });

  test('a namespace without an Account: AccountMissing, no valid verdict; its Account arriving makes it valid and dirty', async () => {
    const h = harness({
      creds: [cred('c', '2024-01-01T00:00:00Z')],
      secrets: [secret('c-key', 'sk-test-1234567890')],
      accounts: [],
    });
    await h.reconciler.reconcile('team/c');
    expect(h.warnings).toEqual([{ reason: 'AccountMissing', secrets: ['sk-test-1234567890'] }]);
    expect(h.writes[0]?.status).toMatchObject({
      conditions: [
        expect.objectContaining({ type: 'Ready', status: 'False', reason: 'AccountMissing' }),
        expect.anything(),
        expect.anything(),
        expect.anything(),
      ],
    });
    expect(h.verdicts.get('team', 'c')).toMatchObject({ valid: false, payloadSecret: undefined });
    h.informers.accounts.observe(teamAccount());
    await h.reconciler.reconcile('team/c');
    expect(h.verdicts.get('team', 'c')).toMatchObject({ valid: true });
    expect(h.dirty).toEqual(['team', 'team']);
  });

  test('a malformed payload is not requeued, and the warning names the payload for redaction', async () => {
    const h = harness({ creds: [cred('c', '2024-01-01T00:00:00Z')], secrets: [secret('c-key', 'sk\u0001bad')] });
    expect(await h.reconciler.reconcile('team/c')).toBeUndefined();
    expect(h.warnings).toEqual([{ reason: 'PayloadInvalid', secrets: ['sk\u0001bad'] }]);
  });

  test('beyond the quota: kept on the waiting list until forgotten; a deleted sibling frees the place', async () => {
    const older = cred('older', '2024-01-01T00:00:00Z');
    const newer = cred('newer', '2024-01-02T00:00:00Z');
    const account = teamAccount({ limits: { maxCredentials: 1 } });
    const h = harness({
      creds: [older, newer],
      secrets: [secret('older-key', 'sk-a-1234567890'), secret('newer-key', 'sk-b-1234567890')],
      accounts: [account],
    });
    await h.reconciler.reconcile('team/older');
    await h.reconciler.reconcile('team/newer');
    expect(h.warnings.map((w) => w.reason)).toEqual(['QuotaExceeded']);
    expect(h.verdicts.get('team', 'newer')?.valid).toBe(false);
    h.informers.credentials.remove(older);
    expect(h.reconciler.forget(older)).toEqual(['team/newer']);
    await h.reconciler.reconcile('team/newer');
    expect(h.verdicts.get('team', 'newer')?.valid).toBe(true);
    expect(h.reconciler.forget(newer)).toEqual([]);
  });

  test('a credential that depends on an expiring API key is looked at again just after the expiry', async () => {
    const key = gatewayKey(
      'k',
      HASH,
      inNamespace('team'),
      withSpec({ expiresAt: new Date(Date.now() + 60_000).toISOString() }),
    );
    const h = harness({
      creds: [cred('c', '2024-01-01T00:00:00Z', { allowedApiKeyHashes: [HASH] })],
      secrets: [secret('c-key', 'sk-test-1234567890')],
      apiKeys: [key],
    });
    const r = await h.reconciler.reconcile('team/c');
    expect(r?.requeueAfterMs).toBeGreaterThan(59_000);
    expect(r?.requeueAfterMs).toBeLessThanOrEqual(60_050);
    expect(h.verdicts.get('team', 'c')?.valid).toBe(true);
  });

  test('a deleted credential drops its verdict and marks the account dirty', async () => {
    const c = cred('c', '2024-01-01T00:00:00Z');
    const h = harness({ creds: [c], secrets: [secret('c-key', 'sk-test-1234567890')] });
    await h.reconciler.reconcile('team/c');
    h.informers.credentials.remove(c);
    await h.reconciler.reconcile('team/c');
    expect(h.verdicts.get('team', 'c')).toBeUndefined();
    expect(h.dirty).toEqual(['team', 'team']);
  });
});
