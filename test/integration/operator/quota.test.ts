// The per-account credential quota at the Git door: credentials beyond Account spec.limits.maxCredentials (or
// the operator default) are Ready=False with reason QuotaExceeded and are not compiled; the oldest win; a freed
// place goes to the next oldest; raising the limit admits the rest.

import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { publicId } from '../../../src/domain/index.ts';
import { account, credential, withMaxCredentials, withProvider } from '../../support/builders.ts';
import { core, createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, cond, createSecret, resource, startTestOperator } from '../../support/operator.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { sleep, until } from '../../support/until.ts';

const kc = testKubeConfig();

/** Every routing ConfigMap's content as text (gzip parts decompressed; parts of one shard concatenated first). */
async function routingText(ns: string): Promise<string> {
  const cms = (await core(kc).listNamespacedConfigMap({ namespace: ns })).items as V1ConfigMap[];
  let out = '';
  for (const cm of cms) {
    for (const v of Object.values(cm.data ?? {})) out += v;
    const parts = Object.entries(cm.binaryData ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
    if (parts.length > 0) {
      try {
        out += gunzipSync(Buffer.concat(parts.map(([, v]) => Buffer.from(v, 'base64')))).toString('utf8');
      } catch {
        // A shard split across ConfigMaps: its other parts are elsewhere; the test's shards are small.
      }
    }
  }
  return out;
}

describe('per-account credential quota (operator)', () => {
  let ns = '';
  let other = '';
  let routing = '';
  let run: CapturedOperator;
  let creds: ReturnType<typeof resource>;
  let otherCreds: ReturnType<typeof resource>;
  const id = (n: string, name: string) => publicId('BYOKCredential', n, name);

  beforeAll(async () => {
    [ns, other, routing] = await Promise.all([
      createTestNamespace('op-quota'),
      createAccountNamespace('op-quota-default'),
      createTestNamespace('op-quota-routing'),
    ]);
    creds = resource('byokcredentials', ns);
    otherCreds = resource('byokcredentials', other);
    await resource('accounts', ns).create(account('account', withMaxCredentials(2)));
    run = await startTestOperator(kc, {
      routingNamespace: routing,
      watchNamespaces: [ns, other],
      defaultMaxCredentials: 1,
    });
  });
  afterAll(async () => {
    await run?.op.stop();
  });

  test('beyond the Account limit the newest are QuotaExceeded and not compiled; the oldest win', async () => {
    for (const [i, name] of ['first', 'second', 'third'].entries()) {
      await createSecret(kc, ns, `${name}-key`, `gsk_quota_${name}_00000000000${i}`);
      await creds.create(credential(name, withProvider('groq')));
      // Distinct creation seconds, so "oldest" is unambiguous.
      if (i < 2) await sleep(1100);
    }
    await creds.waitReady('first', 'True');
    await creds.waitReady('second', 'True');
    const third = await creds.waitReady('third', 'False', 'QuotaExceeded');
    expect(cond(third, 'WithinQuota')).toMatchObject({ status: 'False', reason: 'QuotaExceeded' });
    expect(cond(third, 'WithinQuota')?.message).toContain('limit is 2');
    await run.op.waitForIdle();
    await until('the two oldest compiled', async () => {
      const text = await routingText(routing);
      return text.includes(id(ns, 'first')) && text.includes(id(ns, 'second'));
    });
    expect(await routingText(routing)).not.toContain(id(ns, 'third'));
  });

  test('deleting a credential frees its place for the next oldest', async () => {
    await creds.delete('first');
    await creds.waitReady('third', 'True');
    expect(cond(await creds.get('third'), 'WithinQuota')).toBeUndefined();
    await until('the freed place compiled', async () => (await routingText(routing)).includes(id(ns, 'third')));
  });

  test('an Account without a limit: the operator default applies; raising the limit admits the rest', async () => {
    for (const name of ['a', 'b']) {
      await createSecret(kc, other, `${name}-key`, `gsk_default_quota_${name}_0000000`);
      await otherCreds.create(credential(name, withProvider('groq')));
      await sleep(1100);
    }
    await otherCreds.waitReady('a', 'True');
    await otherCreds.waitReady('b', 'False', 'QuotaExceeded');
    await resource('accounts', other).update(other, (a) => void (a.spec = { limits: { maxCredentials: 5 } }));
    await otherCreds.waitReady('b', 'True');
  });
});
