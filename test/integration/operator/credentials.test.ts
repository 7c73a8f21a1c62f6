// The reconciler end to end against a real apiserver: Secret before/after, invalid then fixed, rotation
// latency, API-key hashes that resolve/expire/disable, workspace deletion, conflicts, metrics, and a canary
// secret value that must appear nowhere the operator writes.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { EventsV1Api, type V1Secret } from '@kubernetes/client-node';
import { maskLabel, publicId } from '../../../src/domain/index.ts';
import { CREDENTIAL_SECRET_LABEL } from '../../../src/kube/index.ts';
import type { BYOKCredential } from '../../../src/schema/generated/types.ts';
import {
  account,
  asDefault,
  credential,
  gatewayKey,
  inWorkspace,
  withProvider,
  withSecret,
  withSpec,
  workspace,
} from '../../support/builders.ts';
import { core, createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import {
  type CapturedOperator,
  cond,
  createSecret,
  metricsText,
  metricValue,
  resource,
  setSecret,
  startTestOperator,
} from '../../support/operator.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { sleep, until } from '../../support/until.ts';

const kc = testKubeConfig();
const hash = (c: string) => c.repeat(64);
const CANARY = 'sk-CANARY-7f3a9c1e5b2d4680aa11bb22cc33dd44';

describe('operator reconciler', () => {
  let ns = '';
  let routing = '';
  let run: CapturedOperator;
  let creds: ReturnType<typeof resource>;
  const measured: Record<string, number> = {};

  const create = (c: BYOKCredential) => creds.create(c);

  beforeAll(async () => {
    ns = await createAccountNamespace('op-cred');
    routing = await createTestNamespace('op-routing');
    creds = resource('byokcredentials', ns);
    run = await startTestOperator(kc, { routingNamespace: routing, watchNamespaces: [ns] });
  });
  afterAll(async () => {
    await run?.op.stop();
    process.stderr.write(`[operator measurements] ${JSON.stringify(measured)}\n`);
  });

  test('Secret created before the credential: Ready with id, label, createdAt, sortOrder; the Secret gets labelled', async () => {
    await createSecret(kc, ns, 'anthropic-key', 'sk-ant-api03-abcdefghijklmnopqrstuvwxyz');
    await create(credential('anthropic', withProvider('anthropic'), withSecret('anthropic-key')));
    const c = await creds.waitReady('anthropic', 'True');
    expect(c.status).toMatchObject({
      id: publicId('BYOKCredential', ns, 'anthropic'),
      label: maskLabel('anthropic', 'sk-ant-api03-abcdefghijklmnopqrstuvwxyz'),
      createdAt: c.metadata.creationTimestamp,
      sortOrder: 0,
      observedGeneration: c.metadata.generation,
    });
    expect(typeof c.status?.secretResourceVersion).toBe('string');
    for (const type of ['Ready', 'SecretResolved', 'PayloadValid', 'FiltersValid']) {
      expect(cond(c, type)).toMatchObject({ status: 'True', observedGeneration: c.metadata.generation });
    }
    const secret = await core(kc).readNamespacedSecret({ namespace: ns, name: 'anthropic-key' });
    expect(secret.metadata?.labels?.[CREDENTIAL_SECRET_LABEL]).toBe('true');
    // The operator owns only that label on the Secret.
    const owned = secret.metadata?.managedFields?.filter((f) => f.manager === 'byok-operator') ?? [];
    expect(JSON.stringify(owned.map((f) => f.fieldsV1))).not.toContain('f:data');
  });

  test('Secret created after the credential: SecretNotFound with a Warning event, then Ready within seconds', async () => {
    await create(credential('late', withProvider('mistral'), withSecret('late-key')));
    const pending = await creds.waitReady('late', 'False', 'SecretNotFound');
    expect(cond(pending, 'SecretResolved')).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(cond(pending, 'PayloadValid')).toMatchObject({ status: 'Unknown' });
    const events = kc.makeApiClient(EventsV1Api);
    await until('a SecretNotFound warning event', async () => {
      const list = await events.listNamespacedEvent({ namespace: ns });
      return list.items.some(
        (e) => e.regarding?.name === 'late' && e.type === 'Warning' && e.reason === 'SecretNotFound',
      );
    });
    const t0 = Date.now();
    await createSecret(kc, ns, 'late-key', 'mistral-0123456789abcdef');
    // Through the Secret watch, within a cap of 10 s: the trap waited for the 60 s resync.
    await creds.waitReady('late', 'True', undefined, 10_000);
    measured.secretAppearsToReadyMs = Date.now() - t0;
  });

  test('rotation: a new Secret value updates the label and the bundle through the watch, without restarts', async () => {
    await creds.waitReady('anthropic', 'True');
    let compiledAt = 0;
    const off = run.op.pipeline!.onCompiled((r) => {
      if (r.accounts.includes(ns) && r.bundleWrites > 0) compiledAt ||= Date.now();
    });
    const t0 = Date.now();
    await setSecret(kc, ns, 'anthropic-key', 'sk-ant-api03-ROTATEDzyxwvutsrqponmlkjih');
    const want = maskLabel('anthropic', 'sk-ant-api03-ROTATEDzyxwvutsrqponmlkjih');
    // Label and bundle through the Secret watch, each within a cap of 5 s: the trap waited for the 60 s resync.
    const c = await until(
      'the rotated label',
      async () => {
        const o = await creds.get('anthropic');
        return o.status?.label === want ? o : undefined;
      },
      5000,
      20,
    );
    measured.rotationToLabelMs = Date.now() - t0;
    await until('the bundle re-sealed after rotation', () => compiledAt > 0, 5000, 20);
    off();
    measured.rotationToBundleMs = compiledAt - t0;
    const secret = await core(kc).readNamespacedSecret({ namespace: ns, name: 'anthropic-key' });
    expect(c.status?.secretResourceVersion).toBe(secret.metadata?.resourceVersion);
  });

  test('invalid payload waits for the Secret to change (no hot requeue), then the fix makes it Ready', async () => {
    await createSecret(kc, ns, 'bad-key', '{"api_key": "not-for-a-plain-provider"}');
    await create(credential('bad', withProvider('groq'), withSecret('bad-key')));
    const bad = await creds.waitReady('bad', 'False', 'PayloadInvalid');
    expect(cond(bad, 'SecretResolved')?.status).toBe('True');
    expect(cond(bad, 'PayloadValid')).toMatchObject({ status: 'False', reason: 'PayloadInvalid' });
    expect(bad.status?.label).toBeUndefined();
    await run.op.waitForIdle();
    const before = metricValue(await metricsText(run.op), 'controller_runtime_reconcile_total', {
      controller: 'byokcredential',
    });
    await sleep(1500);
    const after = metricValue(await metricsText(run.op), 'controller_runtime_reconcile_total', {
      controller: 'byokcredential',
    });
    expect(after).toBe(before);
    await setSecret(kc, ns, 'bad-key', 'gsk_0123456789abcdefghij');
    await creds.waitReady('bad', 'True');
  });

  test('a Secret without the referenced key is KeyNotFound', async () => {
    await createSecret(kc, ns, 'wrong-key', 'xai-0123456789abcdef', 'other');
    await create(credential('nokey', withProvider('xai'), withSecret('wrong-key', 'apiKey')));
    const c = await creds.waitReady('nokey', 'False', 'KeyNotFound');
    expect(cond(c, 'SecretResolved')).toMatchObject({ status: 'False', reason: 'KeyNotFound' });
  });

  test('an API-key hash that does not resolve, then becomes live, then is disabled, then expires', async () => {
    const keys = resource('gatewayapikeys', ns);
    await createSecret(kc, ns, 'filtered-key', 'sk-ant-api03-filtered000000000000');
    await create(
      credential(
        'filtered',
        withProvider('anthropic'),
        withSecret('filtered-key'),
        withSpec({ allowedApiKeyHashes: [hash('a')] }),
      ),
    );
    const unresolved = await creds.waitReady('filtered', 'False', 'UnknownApiKeyHash');
    expect(cond(unresolved, 'FiltersValid')?.message).toContain('allowedApiKeyHashes');
    await keys.create(gatewayKey('key-a', hash('a')));
    await creds.waitReady('filtered', 'True');
    await keys.update('key-a', (o) => (o.spec!.disabled = true));
    await creds.waitReady('filtered', 'False', 'UnknownApiKeyHash');
    // This namespace has no default Workspace, so the key is not usable at the gateway: Ready says NoWorkspace.
    const k = await keys.waitReady('key-a', 'False', 'NoWorkspace');
    expect(cond(k, 'Live')).toMatchObject({ status: 'False', reason: 'Disabled' });
    expect(k.status?.live).toBe(false);
    // A key that expires: Ready until expiresAt, then the credential is re-evaluated without any apiserver event.
    const expiresAt = new Date(Date.now() + 3000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    await keys.update('key-a', (o) => {
      o.spec!.disabled = false;
      o.spec!.expiresAt = expiresAt;
    });
    await creds.waitReady('filtered', 'True');
    await creds.waitReady('filtered', 'False', 'UnknownApiKeyHash', 8000);
    const expired = await until('key-a expired', async () => {
      const o = await keys.get('key-a');
      return cond(o, 'Live')?.reason === 'Expired' ? o : undefined;
    });
    expect(expired.status?.live).toBe(false);
  });

  test('workspace scope: WorkspaceNotFound, Ready with workspaceId, and back to WorkspaceNotFound when deleted', async () => {
    const workspaces = resource('workspaces', ns);
    await createSecret(kc, ns, 'ws-key', 'sk-ant-api03-workspace0000000000');
    await create(credential('scoped', withProvider('anthropic'), withSecret('ws-key'), inWorkspace('team')));
    await creds.waitReady('scoped', 'False', 'WorkspaceNotFound');
    await workspaces.create(workspace('team', withSpec({ displayName: 'Team' })));
    const ok = await creds.waitReady('scoped', 'True');
    expect(ok.status?.workspaceId).toBe(publicId('Workspace', ns, 'team'));
    await workspaces.delete('team');
    await creds.waitReady('scoped', 'False', 'WorkspaceNotFound');
  });

  test('effective sortOrder: explicit positions first, then the rest by age', async () => {
    await create(
      credential(
        'anthropic-pinned',
        withProvider('anthropic'),
        withSecret('anthropic-key'),
        withSpec({ sortOrder: 5 }),
      ),
    );
    await until('implicit anthropic credentials placed after the explicit one', async () => {
      const [a, f, s] = await Promise.all(['anthropic', 'filtered', 'scoped'].map((n) => creds.get(n)));
      return a?.status?.sortOrder === 6 && f?.status?.sortOrder === 7 && s?.status?.sortOrder === 8;
    });
    expect((await creds.get('anthropic-pinned')).status?.sortOrder).toBe(5);
  });

  test('exactly one Account and one default Workspace per namespace: the oldest wins, extras are Conflicting', async () => {
    const accounts = resource('accounts', ns);
    const workspaces = resource('workspaces', ns);
    // The namespace's own Account (createAccountNamespace) is the first.
    const first = ns;
    await workspaces.create(workspace('main', asDefault()));
    await sleep(1100); // creationTimestamp has second precision
    await accounts.create(account('second'));
    await workspaces.create(workspace('other', asDefault()));
    await accounts.waitReady(first, 'True');
    await accounts.waitReady('second', 'False', 'Conflicting');
    await workspaces.waitReady('main', 'True');
    await workspaces.waitReady('other', 'False', 'Conflicting');
    await accounts.delete(first);
    await workspaces.delete('main');
    await accounts.waitReady('second', 'True');
    await workspaces.waitReady('other', 'True');
  });

  test('metrics, health and readiness endpoints', async () => {
    expect((await fetch(`${run.op.httpAddress}/healthz`)).status).toBe(200);
    expect((await fetch(`${run.op.httpAddress}/readyz`)).status).toBe(200);
    const text = await metricsText(run.op);
    for (const name of [
      'controller_runtime_reconcile_total',
      'controller_runtime_reconcile_time_seconds',
      'workqueue_depth',
      'workqueue_adds_total',
      'workqueue_retries_total',
      'leader_election_master_status',
    ]) {
      expect(text).toContain(name);
    }
    expect(
      metricValue(text, 'controller_runtime_reconcile_total', { controller: 'byokcredential', result: 'success' }),
    ).toBeGreaterThan(0);
    expect(metricValue(text, 'workqueue_retries_total', { name: 'byokcredential' })).toBeGreaterThanOrEqual(0);
  });

  test('canary: a Secret value appears in no status, no Event, no log line and no ConfigMap', async () => {
    await createSecret(kc, ns, 'canary-key', CANARY);
    await create(credential('canary', withProvider('openai'), withSecret('canary-key')));
    // The same value inside a payload the domain rejects, so the error paths (condition message, Warning event) run too.
    await createSecret(kc, ns, 'canary-bad', `{"api_key": "${CANARY}", "region": "NOT A REGION"}`);
    await create(credential('canary-bad', withProvider('openai'), withSecret('canary-bad')));
    await creds.waitReady('canary', 'True');
    await creds.waitReady('canary-bad', 'False', 'PayloadInvalid');
    await run.op.waitForIdle();
    await sleep(300);
    const needle = CANARY.slice(3, 30);
    const haystacks: [string, string][] = [];
    for (const plural of ['byokcredentials', 'workspaces', 'guardrails', 'gatewayapikeys', 'accounts']) {
      const list = (await kc
        .makeApiClient((await import('@kubernetes/client-node')).CustomObjectsApi)
        .listNamespacedCustomObject({ group: 'byok.gateway.dev', version: 'v1alpha1', namespace: ns, plural })) as {
        items: unknown[];
      };
      haystacks.push([plural, JSON.stringify(list.items)]);
    }
    const events = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: ns });
    haystacks.push(['events', JSON.stringify(events.items)]);
    for (const n of [ns, routing]) {
      const cms = await core(kc).listNamespacedConfigMap({ namespace: n });
      haystacks.push([`configmaps/${n}`, JSON.stringify(cms.items)]);
      // Bundle Secrets carry the payload only encrypted.
      const secrets = await core(kc).listNamespacedSecret({ namespace: routing });
      haystacks.push([
        `routing-secrets`,
        JSON.stringify(
          secrets.items.map((s: V1Secret) => ({
            ...s,
            data: Object.fromEntries(
              Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
            ),
          })),
        ),
      ]);
    }
    haystacks.push(['logs', run.logs.join('\n')]);
    // The compile pipeline ran for this account, so the ConfigMap and bundle checks above looked at real output.
    const routingCms = await core(kc).listNamespacedConfigMap({ namespace: routing });
    expect(routingCms.items.some((c) => c.metadata?.name?.startsWith('byok-routing'))).toBe(true);
    for (const [where, text] of haystacks) {
      expect({
        where,
        leaked: text.includes(needle) || text.includes(Buffer.from(CANARY).toString('base64').slice(4, 30)),
      }).toEqual({ where, leaked: false });
    }
    expect(run.logs.length).toBeGreaterThan(0);
    expect(events.items.some((e) => e.reason === 'PayloadInvalid')).toBe(true);
  });
});
