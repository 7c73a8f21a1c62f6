// What wakes which reconciler: each reconciler declares its watches beside it
// (src/operator/reconcile/<kind>-controller.ts), and the compile pipeline its own (compile/watches.ts). The
// informers are the operator's own (createResourceInformers, with their indexes), never started: observe() and
// observeDeleted() hand them the events a watch would.
import { beforeEach, describe, expect, test } from '@jest/globals';
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import pino from 'pino';
import { createApplier } from '../../../../src/kube/apply.ts';
import { kubeClient } from '../../../../src/kube/client.ts';
import { createEventRecorder } from '../../../../src/kube/events.ts';
import type { KubeAccess } from '../../../../src/kube/kubeconfig.ts';
import { createResourceInformers, type ResourceInformers } from '../../../../src/kube/resources.ts';
import { watchForCompile } from '../../../../src/operator/compile/watches.ts';
import { createOperatorMetrics } from '../../../../src/operator/metrics.ts';
import { AccountReconciler } from '../../../../src/operator/reconcile/account.ts';
import { accountController } from '../../../../src/operator/reconcile/account-controller.ts';
import type { ReconciledKind } from '../../../../src/operator/reconcile/controller.ts';
import { CredentialReconciler } from '../../../../src/operator/reconcile/credential.ts';
import { credentialController } from '../../../../src/operator/reconcile/credential-controller.ts';
import { apiKeyController } from '../../../../src/operator/reconcile/gateway-api-key-controller.ts';
import { guardrailController } from '../../../../src/operator/reconcile/guardrail-controller.ts';
import { StatusWriter } from '../../../../src/operator/reconcile/status-writer.ts';
import { workspaceController } from '../../../../src/operator/reconcile/workspace-controller.ts';
import { VerdictStore } from '../../../../src/operator/verdicts.ts';
import type {
  Account,
  BYOKCredential,
  GatewayAPIKey,
  Guardrail,
  Workspace,
} from '../../../../src/schema/generated/types.ts';

// Nothing listens here: the informers are never started and nothing is written.
const access: KubeAccess = {
  getCurrentCluster: () => ({ name: 'none', server: 'http://127.0.0.1:9', skipTLSVerify: true }),
  applyToHTTPSOptions: async () => undefined,
};
const log = pino({ level: 'silent' });

let rv = 0;
/** An object as a watch would deliver it: every delivery a newer resourceVersion. */
function obj<T extends KubernetesObject>(
  kind: string,
  name: string,
  spec: object,
  meta: { namespace?: string; generation?: number } = {},
): T {
  return {
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind,
    metadata: {
      name,
      namespace: meta.namespace ?? 'team',
      generation: meta.generation ?? 1,
      resourceVersion: String(++rv),
      creationTimestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, rv)),
    },
    spec,
  } as unknown as T;
}
const cred = (
  name: string,
  spec: Partial<BYOKCredential['spec']> = {},
  meta?: { namespace?: string; generation?: number },
) =>
  obj<BYOKCredential>(
    'BYOKCredential',
    name,
    { provider: 'openai', secretRef: { name: `${name}-key` }, ...spec },
    meta,
  );
const workspace = (name: string, spec: Partial<Workspace['spec']> = {}, meta?: { generation?: number }) =>
  obj<Workspace>('Workspace', name, spec, meta);
const apiKey = (name: string, spec: Partial<GatewayAPIKey['spec']> = {}, meta?: { generation?: number }) =>
  obj<GatewayAPIKey>('GatewayAPIKey', name, { hash: 'a'.repeat(64), ...spec }, meta);
const guardrail = (name: string, meta?: { namespace?: string; generation?: number }) =>
  obj<Guardrail>('Guardrail', name, {}, meta);
const account = (name: string, meta?: { namespace?: string; generation?: number }) =>
  obj<Account>('Account', name, {}, meta);
const secret = (name: string): V1Secret => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace: 'team', resourceVersion: String(++rv) },
  data: { key: 'c2stMQ==' },
});

interface World {
  informers: ResourceInformers;
  verdicts: VerdictStore;
  /** Keys each reconciler was woken for, in order. */
  woken: Record<ReconciledKind, string[]>;
  /** Namespaces the compile pipeline was told are dirty. */
  dirty: string[];
  clear(): void;
}

function world(): World {
  const informers = createResourceInformers({ kubeConfig: access, logger: log });
  const applier = createApplier(access, { canWrite: () => false });
  const writer = new StatusWriter({
    applier,
    events: createEventRecorder({
      kubeConfig: access,
      controller: 'test',
      instance: 'test',
      logger: log,
      canWrite: () => false,
    }),
    log,
  });
  const verdicts = new VerdictStore();
  const woken: World['woken'] = { credentials: [], workspaces: [], guardrails: [], apiKeys: [], accounts: [] };
  const dirty: string[] = [];
  const markDirty = (ns: string) => dirty.push(ns);
  const credentials = new CredentialReconciler({
    informers,
    client: kubeClient(access),
    applier,
    metrics: createOperatorMetrics(undefined, { defaultMetrics: false }),
    verdicts,
    markDirty,
    writer,
  });
  const accounts = new AccountReconciler({ informers, writer, enqueueAccount: (k) => woken.accounts.push(k) });
  const controllers = [
    credentialController(credentials),
    workspaceController({ informers, writer }),
    guardrailController({ informers, writer }),
    apiKeyController({ informers, writer, markDirty, enqueueCredential: (k) => woken.credentials.push(k) }),
    accountController(accounts),
  ];
  for (const c of controllers) c.watch(informers, (key) => woken[c.for].push(key));
  watchForCompile(informers, markDirty);
  const clear = () => {
    for (const keys of Object.values(woken)) keys.length = 0;
    dirty.length = 0;
  };
  return { informers, verdicts, woken, dirty, clear };
}

/** The same object, changed as the apiserver would: a new resourceVersion, and a new generation when the spec moves. */
function next<T extends KubernetesObject & { spec: object }>(o: T, spec: Partial<T['spec']> | undefined): T {
  const generation = (o.metadata?.generation ?? 1) + (spec ? 1 : 0);
  return { ...o, metadata: { ...o.metadata, generation, resourceVersion: String(++rv) }, spec: { ...o.spec, ...spec } };
}

describe('what wakes which reconciler', () => {
  let w: World;
  beforeEach(() => {
    w = world();
  });

  test('a status-only update wakes nobody; a spec change wakes the object and marks its account dirty', () => {
    const c = cred('c1', { sortOrder: 0 });
    w.informers.credentials.observe(c);
    expect(w.woken.credentials).toEqual(['team/c1']);
    expect(w.dirty).toEqual(['team']);
    w.clear();
    w.informers.credentials.observe(next(c, undefined));
    expect(w.woken).toEqual({ credentials: [], workspaces: [], guardrails: [], apiKeys: [], accounts: [] });
    expect(w.dirty).toEqual([]);
  });

  test('a credential without sortOrder moves its implicit siblings of the same provider and section', () => {
    const a = cred('a');
    w.informers.credentials.observe(a);
    w.informers.credentials.observe(cred('b'));
    w.informers.credentials.observe(cred('pinned', { sortOrder: 3 }));
    w.informers.credentials.observe(cred('other', { provider: 'anthropic' }));
    w.informers.credentials.observe(cred('fallback', { isFallback: true }));
    w.clear();
    w.informers.credentials.observe(next(a, { isFallback: true }));
    // Both its old section (b) and its new one (fallback) move.
    expect(w.woken.credentials).toEqual(['team/a', 'team/b', 'team/fallback']);
    w.clear();
    // A change that moves no order (a new workspace) wakes it alone.
    w.informers.credentials.observe(next(w.informers.credentials.get('team', 'a')!, { workspace: 'w' }));
    expect(w.woken.credentials).toEqual(['team/a']);
  });

  test('a deleted credential loses its verdict at once and moves its siblings', () => {
    w.informers.credentials.observe(cred('a'));
    w.informers.credentials.observe(cred('b'));
    w.verdicts.set('team', 'a', {
      valid: true,
      sortOrder: 0,
      label: undefined,
      payloadSecret: undefined,
      payloadKey: undefined,
      generation: 1,
      secretResourceVersion: undefined,
    });
    w.clear();
    w.informers.credentials.observeDeleted('team', 'a');
    expect(w.verdicts.get('team', 'a')).toBeUndefined();
    expect(w.woken.credentials).toEqual(['team/b']);
    expect(w.dirty).toEqual(['team']);
  });

  test('a Secret wakes the credentials that reference it, on every new version', () => {
    w.informers.credentials.observe(cred('a', { secretRef: { name: 'shared' } }));
    w.informers.credentials.observe(cred('b', { secretRef: { name: 'shared' } }));
    w.informers.credentials.observe(cred('c'));
    w.clear();
    const s = secret('shared');
    w.informers.secrets.observe(s);
    w.informers.secrets.observe({ ...s, metadata: { ...s.metadata, resourceVersion: String(++rv) } });
    w.informers.secrets.observeDeleted('team', 'shared');
    expect(w.woken.credentials).toEqual(['team/a', 'team/b', 'team/a', 'team/b', 'team/a', 'team/b']);
    // Secrets are not compiled from: the credential's verdict is.
    expect(w.dirty).toEqual([]);
  });

  test('an API key wakes itself and the credentials that allow its old and new hash', () => {
    const [h1, h2] = ['1'.repeat(64), '2'.repeat(64)];
    w.informers.credentials.observe(cred('allows-1', { allowedApiKeyHashes: [h1] }));
    w.informers.credentials.observe(cred('allows-2', { allowedApiKeyHashes: [h2] }));
    w.informers.credentials.observe(cred('open'));
    const k = apiKey('k', { hash: h1 });
    w.informers.apiKeys.observe(k);
    w.clear();
    w.informers.apiKeys.observe(next(k, { hash: h2 }));
    expect(w.woken.apiKeys).toEqual(['team/k']);
    expect(w.woken.credentials).toEqual(['team/allows-2', 'team/allows-1']);
    expect(w.dirty).toEqual(['team']);
  });

  test('a key arriving or leaving wakes every key naming its hash, their accounts and their filters, in any namespace', () => {
    const h = '3'.repeat(64);
    const held = apiKey('held', { hash: h });
    w.informers.apiKeys.observe(held);
    w.informers.apiKeys.observe(apiKey('unrelated', { hash: '4'.repeat(64) }));
    w.informers.credentials.observe(cred('victim-filter', { allowedApiKeyHashes: [h] }));
    w.informers.credentials.observe(cred('copier-filter', { allowedApiKeyHashes: [h] }, { namespace: 'copier' }));
    w.clear();
    // The copy arrives in another account (upper case, as if a door had let it through: the same hash).
    const copy = obj<GatewayAPIKey>('GatewayAPIKey', 'copy', { hash: h.toUpperCase() }, { namespace: 'copier' });
    w.informers.apiKeys.observe(copy);
    expect(w.woken.apiKeys).toEqual(['copier/copy', 'team/held']);
    expect(new Set(w.dirty)).toEqual(new Set(['copier', 'team']));
    w.clear();
    // The holder leaves: the copy may now hold the hash.
    w.informers.apiKeys.observeDeleted('team', 'held');
    expect(w.woken.apiKeys).toEqual(['team/held', 'copier/copy']);
    expect(new Set(w.dirty)).toEqual(new Set(['copier', 'team']));
    expect(new Set(w.woken.credentials)).toEqual(new Set(['team/victim-filter', 'copier/copier-filter']));
  });

  test("a Workspace's default flag wakes the other defaults, its credentials and keys, and the keys that name none", () => {
    const ws = workspace('w');
    w.informers.workspaces.observe(ws);
    w.informers.workspaces.observe(workspace('old-default', { default: true }));
    w.informers.workspaces.observe(workspace('plain'));
    w.informers.credentials.observe(cred('in-w', { workspace: 'w' }));
    w.informers.credentials.observe(cred('global'));
    w.informers.apiKeys.observe(apiKey('k-w', { workspace: 'w' }));
    w.informers.apiKeys.observe(apiKey('k-none'));
    w.informers.apiKeys.observe(apiKey('k-plain', { workspace: 'plain' }));
    w.clear();
    w.informers.workspaces.observe(next(ws, { default: true }));
    // Itself, then every default of the namespace (itself included, now one).
    expect(w.woken.workspaces).toEqual(['team/w', 'team/w', 'team/old-default']);
    expect(w.woken.credentials).toEqual(['team/in-w']);
    expect(w.woken.apiKeys).toEqual(['team/k-w', 'team/k-none']);
    w.clear();
    // A change that leaves it non-default wakes neither the other defaults nor the keys that name none.
    w.informers.workspaces.observe(next(w.informers.workspaces.get('team', 'plain')!, { defaultGuardrail: 'g' }));
    expect(w.woken).toEqual({
      credentials: [],
      workspaces: ['team/plain'],
      guardrails: [],
      apiKeys: ['team/k-plain'],
      accounts: [],
    });
  });

  test("a Guardrail wakes itself, its namespace's Workspaces and the keys that name a guardrail", () => {
    w.informers.workspaces.observe(workspace('w1'));
    w.informers.workspaces.observe(workspace('w2'));
    w.informers.apiKeys.observe(apiKey('guarded', { guardrail: 'g' }));
    w.informers.apiKeys.observe(apiKey('free'));
    w.informers.workspaces.observe(obj<Workspace>('Workspace', 'elsewhere', {}, { namespace: 'other' }));
    w.clear();
    w.informers.guardrails.observe(guardrail('g'));
    w.informers.guardrails.observeDeleted('team', 'g');
    expect(w.woken).toEqual({
      credentials: [],
      workspaces: ['team/w1', 'team/w2', 'team/w1', 'team/w2'],
      guardrails: ['team/g', 'team/g'],
      apiKeys: ['team/guarded', 'team/guarded'],
      accounts: [],
    });
    expect(w.dirty).toEqual(['team', 'team']);
  });

  test('an Account wakes every Account and credential of its namespace (the election, the quota)', () => {
    w.informers.accounts.observe(account('first'));
    w.informers.credentials.observe(cred('a'));
    w.informers.credentials.observe(cred('b'));
    w.informers.credentials.observe(cred('elsewhere', {}, { namespace: 'other' }));
    w.clear();
    w.informers.accounts.observe(account('second'));
    expect(w.woken.accounts).toEqual(['team/first', 'team/second', 'team/second']);
    expect(w.woken.credentials).toEqual(['team/a', 'team/b']);
    expect(w.dirty).toEqual(['team']);
  });
});
