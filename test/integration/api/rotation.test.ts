// Concurrent key rotations against the real apiserver: the credential patch (resourceVersion precondition) is
// the commit point, so a refused rotation never changes the stored key and a 200 describes what is stored.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { maskLabel } from '../../../src/domain/label.ts';
import {
  type Account,
  credentialObject,
  expectContract,
  type Harness,
  one,
  seedAccount,
  startHarness,
} from '../../support/api-harness.ts';
import { core } from '../../support/kube.ts';
import { until } from '../../support/until.ts';

async function storedKey(
  ns: string,
  id: string,
): Promise<{ key: string; secret: string; name: string | undefined; label: string | undefined }> {
  const cr = await credentialObject(ns, id);
  const secret = cr?.spec.secretRef.name ?? '';
  const s = await core().readNamespacedSecret({ namespace: ns, name: secret });
  return {
    key: Buffer.from(s.data?.key ?? '', 'base64').toString('utf8'),
    secret,
    name: cr?.spec.displayName,
    label: cr?.metadata.annotations?.['byok.gateway.dev/label'],
  };
}

describe('concurrent key rotation', () => {
  let a: Account;
  let h: Harness;
  let h2: Harness;
  beforeAll(async () => {
    a = await seedAccount('api-rotate');
    // Two API replicas over the same apiserver: writers are split between them.
    [h, h2] = await Promise.all([startHarness([a.namespace]), startHarness([a.namespace])]);
  });
  afterAll(async () => {
    await Promise.all([h?.close(), h2?.close()]);
  });

  const summary: Record<string, number> = {};

  async function round(writers: number, r: number): Promise<void> {
    const initial = `sk-rot-${writers}-${r}-initial-000000000000`;
    const k = one(
      await h.call('POST', '/byok', {
        key: a.managementKey,
        body: { provider: 'openai', key: initial, name: 'initial' },
      }),
    );
    // Read-your-writes holds on the replica that took the write; the other learns of it from its watch.
    await until(
      'the second server to read the credential',
      async () => (await h2.call('GET', `/byok/${k.id}`, { key: a.managementKey })).status === 200,
    );
    const keys = Array.from(
      { length: writers },
      (_, i) => `sk-rot-${writers}-${r}-writer-${String(i).padStart(3, '0')}-xxxxxxxx`,
    );
    const replies = await Promise.all(
      keys.map((key, i) =>
        (i % 2 === 0 ? h : h2).call('PATCH', `/byok/${k.id}`, {
          key: a.managementKey,
          body: { key, name: `writer-${i}` },
        }),
      ),
    );
    const stored = await storedKey(a.namespace, k.id);
    const ok = replies.map((rep, i) => ({ rep, i })).filter((x) => x.rep.status === 200);
    for (const rep of replies) {
      summary[String(rep.status)] = (summary[String(rep.status)] ?? 0) + 1;
      expect([200, 409]).toContain(rep.status);
    }
    for (const { rep, i } of ok) {
      // Each 200 describes the write it made: its own label and name.
      expect(one(rep).label).toBe(maskLabel('openai', keys[i] as string));
      expect(one(rep).name).toBe(`writer-${i}`);
    }
    if (ok.length === 0) {
      // Every writer refused: nothing changed.
      expect(stored.key).toBe(initial);
      expect(stored.name).toBe('initial');
    } else {
      // The stored key is one a 200 answered for, with that writer's label and name; never a refused writer's.
      const winner = keys.indexOf(stored.key);
      expect(ok.map((x) => x.i)).toContain(winner);
      expect(stored.name).toBe(`writer-${winner}`);
      expect(stored.label).toBe(maskLabel('openai', stored.key));
      const got = one(await h.call('GET', `/byok/${k.id}`, { key: a.managementKey }));
      expect(got.label).toBe(maskLabel('openai', stored.key));
    }
    // A refused writer's key is gone from the cluster by the time it is answered: every Secret of this
    // credential holds the initial key or the key of a writer answered 200 (replaced ones go after a delay).
    const crName = (await credentialObject(a.namespace, k.id))?.metadata.name ?? '';
    const allowed = new Set([initial, ...ok.map((x) => keys[x.i] as string)]);
    const list = await core().listNamespacedSecret({
      namespace: a.namespace,
      labelSelector: 'app.kubernetes.io/managed-by=byok-api',
    });
    const mine = list.items.filter((s) => s.metadata?.name?.startsWith(`${crName}-key-`));
    for (const s of mine) expect(allowed.has(Buffer.from(s.data?.key ?? '', 'base64').toString('utf8'))).toBe(true);
    created.push({ crName, secret: stored.secret });
  }

  const created: { crName: string; secret: string }[] = [];
  /** Eventually each credential has exactly one key Secret left: the referenced one. */
  async function onlyReferencedSecretsRemain(): Promise<void> {
    await until(
      'only the referenced key Secrets',
      async () => {
        const list = await core().listNamespacedSecret({
          namespace: a.namespace,
          labelSelector: 'app.kubernetes.io/managed-by=byok-api',
        });
        return created.every(({ crName, secret }) => {
          const mine = list.items.filter((s) => s.metadata?.name?.startsWith(`${crName}-key-`));
          return mine.length === 1 && mine[0]?.metadata?.name === secret;
        });
      },
      30_000,
    );
  }

  test('2 concurrent rotations, 8 rounds: a refused one never changes the key; a 200 describes what is stored', async () => {
    for (let r = 0; r < 8; r++) await round(2, r);
    await onlyReferencedSecretsRemain();
  });

  test('50 concurrent rotations over two replicas, 3 rounds', async () => {
    for (let r = 0; r < 3; r++) await round(50, r);
    await onlyReferencedSecretsRemain();
    // The test must have exercised refusals, or it proves nothing about them.
    expect(summary['409'] ?? 0).toBeGreaterThan(0);
    expect(summary['200'] ?? 0).toBeGreaterThan(0);
    process.stdout.write(`rotation replies by status: ${JSON.stringify(summary)}\n`);
  }, 120_000);

  test('every response matches the OpenAPI document', async () => {
    await expectContract(h);
    await expectContract(h2);
  });
});
