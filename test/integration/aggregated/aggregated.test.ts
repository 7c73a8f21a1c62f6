// The aggregated API (api.byok.gateway.dev/v1 byokkeys) through the real kube-aggregator: registered with an
// APIService, reached by kubectl and by clients of the kube-apiserver, never by calling the extension server,
// except where the test is about the extension server's own front door (forged headers, direct bearer tokens).
// One file on purpose: an APIService is cluster-wide, so one registration serves all these tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { pino } from 'pino';
import {
  APISERVICE_NAME,
  DEFAULT_SERVICE,
  registerLoopback,
  unregister,
  waitForAvailable,
} from '../../../src/aggregated/register.ts';
import { type AggregatedServer, startAggregatedServer } from '../../../src/aggregated/server.ts';
import { createServingCertificate } from '../../../src/controlplane/pki.ts';
import { publicId } from '../../../src/domain/ids.ts';
import { KubeApiError, kubeClient } from '../../../src/kube/client.ts';
import { type Account, type Harness, one, seedAccount, startHarness } from '../../support/api-harness.ts';
import { CHART_DIR, helm } from '../../support/helm.ts';
import {
  core,
  crApi,
  createTestNamespace,
  customObjects,
  kubeconfigFor,
  kubectlAs,
  kubectlBin,
  testKubeConfig,
  testKubeconfigPath,
} from '../../support/kube.ts';
import { type CapturedOperator, startTestOperator } from '../../support/operator.ts';
import { until } from '../../support/until.ts';

const CANARY = 'sk-CANARY-aggregated-7f3a9c1e5b2d4a6f8e0c';
const CANARY_2 = 'sk-CANARY-rotated-1b2c3d4e5f6a7b8c9d0e';
const GV = 'api.byok.gateway.dev/v1';
const P = `/apis/${GV}`;

let a: Account;
let b: Account;
/** The account of the health tests: the only one an operator reconciles in this file. */
let c: Account;
/** The account the collection-delete tests empty: nothing else keeps state in it. */
let d: Account;
let rest: Harness;
let agg: AggregatedServer;
const aggLog: string[] = [];
/** The worker's kube-apiserver log, and where this file's part of it starts: files before it share the log. */
const apiserverLog = () => join(process.env.BYOK_TEST_WORKDIR ?? '', 'kube-apiserver.log');
let apiserverLogStart = 0;
/** Everything any client saw: checked for the canary at the end. */
const seen: string[] = [];

const admin = () => testKubeconfigPath();
async function k(...args: string[]): Promise<string> {
  const r = await kubectlAs(admin(), ...args);
  seen.push(r.stdout, r.stderr);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}
async function kAs(kubeconfig: string, ...args: string[]) {
  const r = await kubectlAs(kubeconfig, ...args);
  seen.push(r.stdout, r.stderr);
  return r;
}

/** A request through the kube-apiserver (and so the aggregator) as the admin; failures come back as Status. */
async function viaApiserver(
  method: string,
  path: string,
  body?: unknown,
  contentType?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  try {
    const out = await kubeClient(testKubeConfig()).request<Record<string, unknown>>(method, path, {
      ...(body !== undefined ? { body } : {}),
      ...(contentType ? { contentType } : {}),
    });
    seen.push(JSON.stringify(out));
    return { status: 200, body: out };
  } catch (err) {
    if (err instanceof KubeApiError) {
      seen.push(JSON.stringify(err.body));
      return { status: err.status, body: (err.body ?? {}) as Record<string, unknown> };
    }
    throw err;
  }
}

/** A request straight to the extension server (only for its own authentication tests). */
function direct(
  path: string,
  headers: Record<string, string>,
  clientCert?: { cert: string; key: string },
  base = agg.url,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${base}${path}`, { headers, rejectUnauthorized: false, ...clientCert }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        seen.push(text);
        resolve({ status: res.statusCode ?? 0, text });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

type Subject = { kind: 'User'; name: string } | { kind: 'ServiceAccount'; name: string; namespace: string };
/**
 * Grants `verbs` on `resources` of the aggregated group to `subject` in `namespace`: a Role there, or with `cluster`
 * a ClusterRole bound by a RoleBinding there (the way the chart's user roles are used).
 */
async function grant(
  namespace: string,
  name: string,
  resources: string[],
  verbs: string[],
  subject: Subject,
  opts: { cluster?: boolean } = {},
): Promise<void> {
  const client = kubeClient(testKubeConfig());
  const rbac = '/apis/rbac.authorization.k8s.io/v1';
  const role = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    metadata: { name },
    rules: [{ apiGroups: ['api.byok.gateway.dev'], resources, verbs }],
  };
  if (opts.cluster) await client.request('POST', `${rbac}/clusterroles`, { body: { ...role, kind: 'ClusterRole' } });
  else await client.request('POST', `${rbac}/namespaces/${namespace}/roles`, { body: { ...role, kind: 'Role' } });
  await client.request('POST', `${rbac}/namespaces/${namespace}/rolebindings`, {
    body: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: opts.cluster ? 'ClusterRole' : 'Role', name },
      subjects: [subject.kind === 'User' ? { apiGroup: 'rbac.authorization.k8s.io', ...subject } : subject],
    },
  });
}

function newKeyYaml(namespace: string, extra = ''): string {
  return `apiVersion: ${GV}\nkind: BYOKKey\nmetadata:\n  namespace: ${namespace}\n  generateName: openai-\nspec:\n  provider: openai\n  key: ${CANARY}\n  displayName: from kubectl\n${extra}`;
}

async function kubectlCreate(
  namespace: string,
  extra = '',
): Promise<
  Record<string, unknown> & {
    metadata: { name: string };
    spec: Record<string, unknown>;
    status: Record<string, unknown>;
  }
> {
  const child = spawn(kubectlBin(), ['--kubeconfig', admin(), 'create', '-f', '-', '-o', 'json'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let errText = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (errText += d.toString()));
  child.stdin.end(newKeyYaml(namespace, extra));
  const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? 1)));
  seen.push(out, errText);
  if (code !== 0) throw new Error(`kubectl create failed: ${errText}`);
  return JSON.parse(out) as Record<string, unknown> & {
    metadata: { name: string };
    spec: Record<string, unknown>;
    status: Record<string, unknown>;
  };
}

beforeAll(async () => {
  apiserverLogStart = statSync(apiserverLog()).size;
  [a, b, c, d] = await Promise.all([
    seedAccount('agg-a'),
    seedAccount('agg-b'),
    seedAccount('agg-c'),
    seedAccount('agg-d'),
  ]);
  rest = await startHarness([a.namespace, b.namespace, c.namespace, d.namespace]);
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      aggLog.push(chunk.toString('utf8'));
      cb();
    },
  });
  const serving = await createServingCertificate(DEFAULT_SERVICE);
  agg = await startAggregatedServer({
    kubeConfig: testKubeConfig(),
    runtime: rest.server.runtime,
    tls: serving,
    logger: pino({ level: 'trace' }, sink),
    host: '127.0.0.1',
    port: 0,
  });
  await registerLoopback({ kubeConfig: testKubeConfig(), port: agg.port, caPem: serving.caPem });
  await waitForAvailable(testKubeConfig(), 60_000);
}, 120_000);

afterAll(async () => {
  await unregister(testKubeConfig()).catch(() => undefined);
  await agg?.close();
  await rest?.close();
});

describe('registration and discovery', () => {
  test('the APIService is Available=True', async () => {
    const out = await k(
      'get',
      'apiservice',
      APISERVICE_NAME,
      '-o',
      'jsonpath={.status.conditions[?(@.type=="Available")].status}',
    );
    expect(out).toBe('True');
  });

  test('kubectl api-resources lists byokkeys with its short name, namespaced, kind BYOKKey', async () => {
    const out = await k('api-resources', '--api-group=api.byok.gateway.dev');
    expect(out).toMatch(/byokkeys\s+bk\s+api\.byok\.gateway\.dev\/v1\s+true\s+BYOKKey/);
  });

  test('discovery advertises exactly the implemented verbs and the category', async () => {
    const list = await viaApiserver('GET', P);
    const res = (list.body.resources as { name: string; verbs: string[]; categories: string[] }[]).find(
      (r) => r.name === 'byokkeys',
    );
    expect(res?.verbs.sort()).toEqual([
      'create',
      'delete',
      'deletecollection',
      'get',
      'list',
      'patch',
      'update',
      'watch',
    ]);
    // Not in byok-all: the backing BYOKCredential is, and kubectl get byok-all would list each credential twice.
    expect(res?.categories ?? []).not.toContain('byok-all');
  });

  test('kubectl explain shows the field descriptions, including the write-only key', async () => {
    // The aggregator downloads the OpenAPI of a new APIService asynchronously after it becomes Available.
    let r = await kAs(admin(), 'explain', 'byokkeys.spec');
    for (let i = 0; i < 60 && r.code !== 0; i++) {
      await new Promise((res) => setTimeout(res, 500));
      r = await kAs(admin(), 'explain', 'byokkeys.spec');
    }
    const out = r.stdout;
    expect(out).toContain('KIND:       BYOKKey');
    expect(out).toMatch(/key\s+<string>/);
    expect(out).toContain('Write-only');
    expect(out).toMatch(/isByokOnly\s+<boolean>/);
  });
});

test('the kube-apiserver logs no errors about the group (OpenAPI download, discovery, availability)', async () => {
  // Only what was logged since this file began: a file before it in the worker may have served the group too.
  const log = readFileSync(apiserverLog()).subarray(apiserverLogStart).toString('utf8');
  // Any error about the group, except clients hanging up on a watch (kubectl -w being stopped), and the availability
  // controller's own status write losing an optimistic-lock race against its informer cache: it requeues and writes
  // again, and logs the same for built-in groups (kubernetes/kubernetes#81504). Only that controller's conflict is
  // excused; an availability failure ("failed with: failing or missing response", …) still fails this test.
  const selfConflict = (l: string) =>
    /available_controller\.go:\d+\]/.test(l) && /the object has been modified; please apply your changes/.test(l);
  const errors = log
    .split('\n')
    .filter(
      (l) =>
        /^E\d{4}/.test(l) &&
        /api\.byok\.gateway\.dev/.test(l) &&
        !/Timeout or abort while handling/.test(l) &&
        !selfConflict(l),
    );
  expect(errors).toEqual([]);
});

describe('kubectl against byokkeys', () => {
  test('create with a write-only key: the label comes back masked and the key never does', async () => {
    const created = await kubectlCreate(a.namespace, '  allowedModels: ["openai/gpt-4o"]\n');
    expect(created.metadata.name).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.spec.key).toBeUndefined();
    expect(created.status.label).toMatch(/^sk-\.\.\./);
    expect(created.spec.allowedModels).toEqual(['openai/gpt-4o']);
    expect(JSON.stringify(created)).not.toContain(CANARY);
  });

  test('an aggregated create is visible at once through /api/v1/byok, and a REST create at once through kubectl', async () => {
    const created = await kubectlCreate(a.namespace);
    const viaRest = await rest.call('GET', `/byok/${created.metadata.name}`, { key: a.managementKey });
    expect(viaRest.status).toBe(200);
    expect(one(viaRest).label).toBe(created.status.label);
    expect(one(viaRest).name).toBe('from kubectl');

    const r = await rest.call('POST', '/byok', {
      key: a.managementKey,
      body: { provider: 'anthropic', key: `${CANARY}-rest`, name: 'via rest', is_fallback: true },
    });
    expect(r.status).toBe(201);
    const id = one(r).id;
    const got = JSON.parse(await k('get', 'byokkeys', '-n', a.namespace, id, '-o', 'json')) as {
      spec: Record<string, unknown>;
      status: Record<string, unknown>;
    };
    expect(got.spec).toMatchObject({
      provider: 'anthropic',
      displayName: 'via rest',
      isFallback: true,
      workspaceId: a.defaultWorkspaceId,
    });
    expect(got.status.label).toBe(one(r).label);
  });

  test('get -o yaml carries every spec 2.1 field and no key; the Table has the documented columns', async () => {
    const created = await kubectlCreate(a.namespace);
    const yaml = await k('get', 'byokkeys', '-n', a.namespace, created.metadata.name, '-o', 'yaml');
    for (const f of [
      'provider:',
      'workspaceId:',
      'displayName:',
      'disabled:',
      'isFallback:',
      'isRequired:',
      'isByokOnly:',
      'allowedModels:',
      'allowedApiKeyHashes:',
      'allowedUserIds:',
      'sortOrder:',
      'declaredZdr:',
      'label:',
      'createdAt:',
      'id:',
      'resourceVersion:',
      'uid:',
      'creationTimestamp:',
    ]) {
      expect(yaml).toContain(f);
    }
    expect(yaml).not.toMatch(/\bkey: /);
    const table = await k('get', 'bk', '-n', a.namespace);
    expect(table.split('\n')[0]).toMatch(
      /^ID\s+CREDENTIAL\s+PROVIDER\s+LABEL\s+WORKSPACE\s+FALLBACK\s+ORDER\s+DISABLED\s+READY\s+REASON\s+UPSTREAM\s+AGE$/,
    );
    const wide = await k('get', 'bk', '-n', a.namespace, '-o', 'wide');
    expect(wide.split('\n')[0]).toMatch(
      /^ID\s+CREDENTIAL\s+PROVIDER\s+LABEL\s+WORKSPACE\s+FALLBACK\s+ORDER\s+DISABLED\s+READY\s+REASON\s+UPSTREAM\s+AGE\s+LAST USED\s+DELIVERED\s+VERSION$/,
    );
    // No operator reconciles this account: the row says so rather than looking healthy.
    expect(table).toMatch(new RegExp(`^${created.metadata.name}\\s.*\\sUnknown\\s+Reconciling\\s+<none>\\s`, 'm'));
    expect(table).toContain(created.metadata.name);
    // The CREDENTIAL column names the BYOKCredential behind the key, which kubectl get byok lists.
    const backing = (created.metadata as { annotations?: Record<string, string> }).annotations?.[
      'api.byok.gateway.dev/credential'
    ];
    expect(backing).toBeTruthy();
    expect(table).toMatch(new RegExp(`^${created.metadata.name}\\s+${backing}\\s+openai\\s`, 'm'));
    // byok-all lists the BYOKCredential once, and not its BYOKKey view a second time.
    const all = (await k('get', 'byok-all', '-n', a.namespace, '-o', 'name')).trim().split('\n');
    expect(all).toContain(`byokcredential.byok.gateway.dev/${backing}`);
    expect(all.filter((n) => n.startsWith('byokkey.'))).toEqual([]);
  });

  test('label selectors on provider and limit/continue paging', async () => {
    const out = await k(
      'get',
      'bk',
      '-n',
      a.namespace,
      '-l',
      'api.byok.gateway.dev/provider=anthropic',
      '-o',
      'jsonpath={.items[*].spec.provider}',
    );
    expect(out.split(' ').every((p) => p === 'anthropic')).toBe(true);
    const all = (await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys`)).body.items as unknown[];
    const page1 = await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys?limit=1`);
    const meta = page1.body.metadata as { continue?: string; remainingItemCount?: number };
    expect((page1.body.items as unknown[]).length).toBe(1);
    expect(meta.remainingItemCount).toBe(all.length - 1);
    const page2 = await viaApiserver(
      'GET',
      `${P}/namespaces/${a.namespace}/byokkeys?limit=100&continue=${encodeURIComponent(meta.continue ?? '')}`,
    );
    expect((page2.body.items as unknown[]).length).toBe(all.length - 1);
    // kubectl pages with --chunk-size and still shows everything.
    const chunked = await k('get', 'bk', '-n', a.namespace, '--chunk-size=1', '-o', 'name');
    expect(chunked.trim().split('\n')).toHaveLength(all.length);
  });

  test('patch: merge, JSON patch and key rotation; strategic merge is 415 like for CRDs', async () => {
    const created = await kubectlCreate(a.namespace);
    const name = created.metadata.name;
    const merged = JSON.parse(
      await k(
        'patch',
        'byokkey',
        name,
        '-n',
        a.namespace,
        '--type=merge',
        '-p',
        '{"spec":{"isRequired":true}}',
        '-o',
        'json',
      ),
    ) as { spec: Record<string, unknown> };
    expect(merged.spec.isRequired).toBe(true);
    const jsonPatched = JSON.parse(
      await k(
        'patch',
        'byokkey',
        name,
        '-n',
        a.namespace,
        '--type=json',
        '-p',
        '[{"op":"replace","path":"/spec/sortOrder","value":7}]',
        '-o',
        'json',
      ),
    ) as {
      spec: Record<string, unknown>;
    };
    expect(jsonPatched.spec.sortOrder).toBe(7);
    const rotated = JSON.parse(
      await k(
        'patch',
        'byokkey',
        name,
        '-n',
        a.namespace,
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { key: CANARY_2 } }),
        '-o',
        'json',
      ),
    ) as { status: Record<string, unknown> };
    expect(rotated.status.label).toBe('sk-...9d0e');
    const viaRest = one(await rest.call('GET', `/byok/${name}`, { key: a.managementKey }));
    expect(viaRest).toMatchObject({ is_required: true, sort_order: 7, label: 'sk-...9d0e' });

    const strategic = await kAs(
      admin(),
      'patch',
      'byokkey',
      name,
      '-n',
      a.namespace,
      '-p',
      '{"spec":{"isRequired":false}}',
    );
    expect(strategic.code).not.toBe(0);
    expect(strategic.stderr).toContain('strategic-merge-patch');
  });

  test('kubectl apply (client-side) on an existing id; server-side apply is a 415 naming the CRD door; -A lists every namespace', async () => {
    const created = await kubectlCreate(a.namespace);
    const name = created.metadata.name;
    const manifest = (extra: string) =>
      `apiVersion: ${GV}\nkind: BYOKKey\nmetadata:\n  name: ${name}\n  namespace: ${a.namespace}\nspec:\n  provider: openai\n  displayName: applied\n${extra}`;
    const apply = async (...args: string[]) => {
      const child = spawn(kubectlBin(), ['--kubeconfig', admin(), 'apply', '-f', '-', ...args], {
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      child.stdin.end(manifest(args.includes('--server-side') ? '  isRequired: true\n' : '  disabled: true\n'));
      const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? 1)));
      seen.push(out);
      return { code, out };
    };
    const clientSide = await apply();
    expect(clientSide).toMatchObject({ code: 0 });
    // No field ownership is recorded on byokkeys, so server-side apply is refused (docs/aggregated-api.md) and
    // changes nothing; GitOps belongs on the BYOKCredential door.
    const serverSide = await apply('--server-side', '--field-manager=test');
    expect(serverSide.code).not.toBe(0);
    expect(serverSide.out).toContain('Server-side apply not available on the server');
    expect(serverSide.out).toContain('server-side apply is not supported for byokkeys.api.byok.gateway.dev');
    expect(serverSide.out).toContain('BYOKCredential');
    const viaRest = one(await rest.call('GET', `/byok/${name}`, { key: a.managementKey }));
    expect(viaRest).toMatchObject({ name: 'applied', disabled: true, is_required: false });
    // The same answer for a name that does not exist (apply would create it) and for the raw request.
    const raw = await viaApiserver(
      'PATCH',
      `${P}/namespaces/${a.namespace}/byokkeys/${name}?fieldManager=test`,
      { apiVersion: GV, kind: 'BYOKKey', spec: { isRequired: true } },
      'application/apply-patch+yaml',
    );
    expect(raw.status).toBe(415);
    expect(raw.body).toMatchObject({ kind: 'Status', reason: 'UnsupportedMediaType', code: 415 });
    const missing = await viaApiserver(
      'PATCH',
      `${P}/namespaces/${a.namespace}/byokkeys/00000000-0000-4000-8000-000000000000`,
      { apiVersion: GV, kind: 'BYOKKey', spec: { provider: 'openai' } },
      'application/apply-patch+yaml',
    );
    expect(missing.status).toBe(415);
    const all = await k('get', 'bk', '-A', '-o', 'jsonpath={range .items[*]}{.metadata.namespace}{"\\n"}{end}');
    const namespaces = new Set(all.trim().split('\n'));
    expect(namespaces.has(a.namespace)).toBe(true);
    for (const ns of namespaces) expect([a.namespace, b.namespace, c.namespace, d.namespace]).toContain(ns);
  });

  test('update (PUT) with a stale resourceVersion is a Conflict; with the current one it applies', async () => {
    const created = await kubectlCreate(a.namespace);
    const path = `${P}/namespaces/${a.namespace}/byokkeys/${created.metadata.name}`;
    const current = (await viaApiserver('GET', path)).body as {
      metadata: { resourceVersion: string };
      spec: Record<string, unknown>;
    };
    const ok = await viaApiserver('PUT', path, { ...current, spec: { ...current.spec, disabled: true } });
    expect(ok.status).toBe(200);
    expect((ok.body.spec as Record<string, unknown>).disabled).toBe(true);
    const stale = await viaApiserver('PUT', path, { ...current, spec: { ...current.spec, disabled: false } });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ kind: 'Status', reason: 'Conflict', code: 409 });
  });

  test('validation errors are Status Invalid with causes naming the BYOKKey field; nothing is stored', async () => {
    const before = ((await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys`)).body.items as unknown[])
      .length;
    const bad = await viaApiserver('POST', `${P}/namespaces/${a.namespace}/byokkeys`, {
      apiVersion: GV,
      kind: 'BYOKKey',
      metadata: {},
      spec: {
        provider: 'openai',
        key: CANARY,
        allowedApiKeyHashes: ['0'.repeat(64)],
        isFallback: true,
        isByokOnly: true,
      },
    });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ kind: 'Status', reason: 'Invalid', code: 422 });
    const causes = (bad.body.details as { causes: { field: string }[] }).causes.map((c) => c.field);
    expect(causes.some((f) => f.startsWith('spec.'))).toBe(true);
    const unknown = await viaApiserver('POST', `${P}/namespaces/${a.namespace}/byokkeys`, {
      apiVersion: GV,
      kind: 'BYOKKey',
      metadata: {},
      spec: { provider: 'openai', key: CANARY, colour: 'red' },
    });
    expect(unknown.status).toBe(422);
    expect((unknown.body.details as { causes: { field: string }[] }).causes[0]?.field).toBe('spec.colour');
    const payload = await viaApiserver('POST', `${P}/namespaces/${a.namespace}/byokkeys`, {
      apiVersion: GV,
      kind: 'BYOKKey',
      metadata: {},
      spec: { provider: 'amazon-bedrock', key: `{"accessKeyId":"${CANARY}"}` },
    });
    expect(payload.status).toBe(422);
    expect((payload.body.details as { causes: { field: string }[] }).causes[0]?.field).toBe('spec.key');
    const named = await viaApiserver('POST', `${P}/namespaces/${a.namespace}/byokkeys`, {
      apiVersion: GV,
      kind: 'BYOKKey',
      metadata: { name: 'mine' },
      spec: { provider: 'openai', key: CANARY },
    });
    expect(named.status).toBe(422);
    expect((named.body.details as { causes: { field: string }[] }).causes[0]?.field).toBe('metadata.name');
    const after = ((await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys`)).body.items as unknown[])
      .length;
    expect(after).toBe(before);
  });

  test('unknown ids are NotFound; the GitOps guard is a Conflict', async () => {
    const missing = await viaApiserver(
      'GET',
      `${P}/namespaces/${a.namespace}/byokkeys/00000000-0000-4000-8000-000000000000`,
    );
    expect(missing.body).toMatchObject({ kind: 'Status', reason: 'NotFound', code: 404 });
    // A Git-managed credential (created as a CR with its Secret, not through an API door).
    await kubeClient(testKubeConfig()).request('POST', `/api/v1/namespaces/${a.namespace}/secrets`, {
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'git-key' },
        stringData: { key: 'sk-git-0123456789' },
      },
    });
    await kubeClient(testKubeConfig()).request(
      'POST',
      `/apis/byok.gateway.dev/v1alpha1/namespaces/${a.namespace}/byokcredentials`,
      {
        body: {
          apiVersion: 'byok.gateway.dev/v1alpha1',
          kind: 'BYOKCredential',
          metadata: { name: 'from-git' },
          spec: { provider: 'mistral', secretRef: { name: 'git-key' } },
        },
      },
    );
    let id = '';
    for (let i = 0; i < 100 && id === ''; i++) {
      const out = await k(
        'get',
        'bk',
        '-n',
        a.namespace,
        '-l',
        'api.byok.gateway.dev/provider=mistral',
        '-o',
        'jsonpath={.items[0].metadata.name}',
      );
      id = out.trim();
      if (id === '') await new Promise((r) => setTimeout(r, 100));
    }
    expect(id).not.toBe('');
    const guarded = await viaApiserver(
      'PATCH',
      `${P}/namespaces/${a.namespace}/byokkeys/${id}`,
      { spec: { disabled: true } },
      'application/merge-patch+json',
    );
    expect(guarded.body).toMatchObject({ kind: 'Status', reason: 'Conflict', code: 409 });
  });

  test('delete removes the credential from both doors', async () => {
    const created = await kubectlCreate(a.namespace);
    const out = await k('delete', 'byokkey', created.metadata.name, '-n', a.namespace);
    expect(out).toContain('deleted');
    expect((await rest.call('GET', `/byok/${created.metadata.name}`, { key: a.managementKey })).status).toBe(404);
    const again = await kAs(admin(), 'get', 'bk', created.metadata.name, '-n', a.namespace);
    expect(again.stderr).toContain('NotFound');
  });
});

describe('paging and collection deletes (account d)', () => {
  const list = async (query = '') =>
    (await viaApiserver('GET', `${P}/namespaces/${d.namespace}/byokkeys${query}`)).body as {
      metadata: { continue?: string; remainingItemCount?: number };
      items: { metadata: { name: string } }[];
    };
  const names = async () => (await list()).items.map((o) => o.metadata.name);

  test('continue is a cursor: kubectl --chunk-size=2 lists everything once, and a delete between pages skips nothing', async () => {
    for (let i = 0; i < 5; i++) await kubectlCreate(d.namespace);
    const all = await names();
    expect(all).toHaveLength(5);
    const chunked = await k('get', 'byokkeys', '-n', d.namespace, '--chunk-size=2', '-o', 'name');
    expect(
      chunked
        .trim()
        .split('\n')
        .map((l) => l.replace(/^.*\//, '')),
    ).toEqual(all);

    const page1 = await list('?limit=2');
    expect(page1.items.map((o) => o.metadata.name)).toEqual(all.slice(0, 2));
    expect(page1.metadata.remainingItemCount).toBe(3);
    // An object of the first page goes away before the second page is read: the next page still starts at the
    // third object (an offset would have skipped it).
    await k('delete', 'byokkey', all[0] as string, '-n', d.namespace);
    const page2 = await list(`?limit=2&continue=${encodeURIComponent(page1.metadata.continue ?? '')}`);
    expect(page2.items.map((o) => o.metadata.name)).toEqual(all.slice(2, 4));
    const page3 = await list(`?limit=2&continue=${encodeURIComponent(page2.metadata.continue ?? '')}`);
    expect(page3.items.map((o) => o.metadata.name)).toEqual(all.slice(4));
    expect(page3.metadata.continue).toBeUndefined();
    for (const bad of [
      'x',
      Buffer.from('[1,"ns","openai",false,"NaN","t","id"]').toString('base64url'),
      Buffer.from('{"o":1}').toString('base64url'),
      'A'.repeat(2000),
    ]) {
      const r = await viaApiserver('GET', `${P}/namespaces/${d.namespace}/byokkeys?limit=1&continue=${bad}`);
      expect([bad.slice(0, 20), r.status, r.body.message]).toEqual([
        bad.slice(0, 20),
        400,
        'continue: invalid continue token',
      ]);
    }
  }, 60_000);

  test('deletecollection needs its own RBAC verb; dry run, preconditions and a Git-managed key refuse it as a whole; it deletes one namespace only', async () => {
    const collection = `${P}/namespaces/${d.namespace}/byokkeys`;
    const before = await names();
    expect(before.length).toBeGreaterThan(1);
    const otherBefore = ((await viaApiserver('GET', `${P}/namespaces/${b.namespace}/byokkeys`)).body.items as unknown[])
      .length;

    // A user who may list and delete each key, but not deletecollection.
    const user = `cleaner-${d.namespace}`;
    const kc = await kubeconfigFor(user);
    const client = kubeClient(testKubeConfig());
    await grant(d.namespace, 'cleaner', ['byokkeys'], ['get', 'list'], { kind: 'User', name: user });
    const userConfig = new (await import('@kubernetes/client-node')).KubeConfig();
    userConfig.loadFromFile(kc);
    const asUser = async () => {
      try {
        await kubeClient(userConfig).request('DELETE', collection, {});
        return { status: 200, message: '' };
      } catch (err) {
        if (!(err instanceof KubeApiError)) throw err;
        return { status: err.status, message: String((err.body as { message?: unknown } | undefined)?.message ?? '') };
      }
    };
    const denied = await asUser();
    expect(denied.status).toBe(403);
    expect(denied.message).toContain(`User "${user}" cannot deletecollection resource "byokkeys"`);
    expect(await names()).toEqual(before);

    // Dry run (query or DeleteOptions body): the answer lists what would go, and nothing goes.
    const dry = await viaApiserver('DELETE', `${collection}?dryRun=All`);
    expect(dry.status).toBe(200);
    expect((dry.body.items as { metadata: { name: string } }[]).map((o) => o.metadata.name)).toEqual(before);
    const dryBody = await viaApiserver('DELETE', collection, {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      dryRun: ['All'],
    });
    expect(dryBody.status).toBe(200);
    expect(
      (await viaApiserver('DELETE', collection, { kind: 'DeleteOptions', apiVersion: 'v1', dryRun: ['Nope'] })).status,
    ).toBe(400);
    expect(await names()).toEqual(before);

    // A precondition that matches one object at most: the others conflict, so nothing is deleted.
    const stale = await viaApiserver('DELETE', collection, {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      preconditions: { resourceVersion: '1' },
    });
    expect(stale.body).toMatchObject({ kind: 'Status', reason: 'Conflict', code: 409 });
    expect(await names()).toEqual(before);

    // A Git-managed key in the namespace: the whole request is a Conflict that names the way out, and nothing goes.
    await client.request('POST', `/api/v1/namespaces/${d.namespace}/secrets`, {
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'git-key' },
        stringData: { key: 'sk-git-0123456789' },
      },
    });
    await client.request('POST', `/apis/byok.gateway.dev/v1alpha1/namespaces/${d.namespace}/byokcredentials`, {
      body: {
        apiVersion: 'byok.gateway.dev/v1alpha1',
        kind: 'BYOKCredential',
        metadata: { name: 'from-git' },
        spec: { provider: 'mistral', secretRef: { name: 'git-key' } },
      },
    });
    let withGit = await names();
    for (let i = 0; i < 100 && withGit.length === before.length; i++) {
      await new Promise((r) => setTimeout(r, 100));
      withGit = await names();
    }
    expect(withGit).toHaveLength(before.length + 1);
    const guarded = await viaApiserver('DELETE', collection);
    expect(guarded.body).toMatchObject({ kind: 'Status', reason: 'Conflict', code: 409 });
    expect(String(guarded.body.message)).toContain('1 of the');
    expect(String(guarded.body.message)).toContain('-l app.kubernetes.io/managed-by=byok-api');
    expect(await names()).toEqual(withGit);

    // Granted deletecollection, the user deletes the API-managed keys the selector names; the Git one stays.
    await client.request('PATCH', `/apis/rbac.authorization.k8s.io/v1/namespaces/${d.namespace}/roles/cleaner`, {
      body: {
        rules: [
          { apiGroups: ['api.byok.gateway.dev'], resources: ['byokkeys'], verbs: ['get', 'list', 'deletecollection'] },
        ],
      },
      contentType: 'application/merge-patch+json',
    });
    let deleted: { metadata: { name: string } }[] = [];
    for (let i = 0; i < 40 && deleted.length === 0; i++) {
      try {
        const out = await kubeClient(userConfig).request<{ kind: string; items: { metadata: { name: string } }[] }>(
          'DELETE',
          `${collection}?labelSelector=${encodeURIComponent('app.kubernetes.io/managed-by=byok-api')}`,
          {},
        );
        expect(out.kind).toBe('BYOKKeyList');
        deleted = out.items;
      } catch (err) {
        // Authorization decisions are cached briefly: wait until the grant shows.
        if (!(err instanceof KubeApiError && err.status === 403)) throw err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    expect(deleted.map((o) => o.metadata.name).sort()).toEqual([...before].sort());
    const left = await names();
    expect(left).toHaveLength(1);
    expect(left).toEqual(withGit.filter((n) => !before.includes(n)));
    for (const id of before) expect((await rest.call('GET', `/byok/${id}`, { key: d.managementKey })).status).toBe(404);
    // The other account is untouched.
    expect(
      ((await viaApiserver('GET', `${P}/namespaces/${b.namespace}/byokkeys`)).body.items as unknown[]).length,
    ).toBe(otherBefore);
    await client.request(
      'DELETE',
      `/apis/byok.gateway.dev/v1alpha1/namespaces/${d.namespace}/byokcredentials/from-git`,
    );
  }, 90_000);

  test("kubectl delete byokkeys --all -n <ns> deletes that namespace's keys only, and needs delete rights there", async () => {
    for (let i = 0; i < 3; i++) await kubectlCreate(d.namespace);
    const otherBefore = ((await viaApiserver('GET', `${P}/namespaces/${b.namespace}/byokkeys`)).body.items as unknown[])
      .length;
    // kubectl lists and then deletes each object (its --all never sends deletecollection): the cleaner user, who may
    // list and deletecollection but not delete, is refused, and nothing goes.
    const refused = await kAs(
      await kubeconfigFor(`cleaner-${d.namespace}`),
      'delete',
      'byokkeys',
      '--all',
      '-n',
      d.namespace,
    );
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/forbidden/i);
    const present = await names();
    expect(present.length).toBeGreaterThanOrEqual(3);
    const out = await k('delete', 'byokkeys', '--all', '-n', d.namespace);
    for (const id of present) expect(out).toContain(id);
    let left = await names();
    for (let i = 0; i < 50 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = await names();
    }
    expect(left).toEqual([]);
    expect(
      ((await viaApiserver('GET', `${P}/namespaces/${b.namespace}/byokkeys`)).body.items as unknown[]).length,
    ).toBe(otherBefore);
  }, 60_000);
});

describe('health and readiness in byokkeys (an operator reconciles account c)', () => {
  let op: CapturedOperator | undefined;
  const ids = { good: '', bad: '' };
  beforeAll(async () => {
    const routing = await createTestNamespace('agg-c-routing');
    op = await startTestOperator(testKubeConfig(), { routingNamespace: routing, watchNamespaces: [c.namespace] });
    ids.good = (await kubectlCreate(c.namespace)).metadata.name;
    // A Git-managed credential whose Secret holds an invalid payload (two lines for a plain-key provider), the canary in it.
    await core().createNamespacedSecret({
      namespace: c.namespace,
      body: { metadata: { name: 'bad-key' }, stringData: { key: `${CANARY}\nsecond-line` } },
    });
    await crApi('byokcredentials', c.namespace).create({
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'BYOKCredential',
      metadata: { name: 'bad' },
      spec: { provider: 'openai', secretRef: { name: 'bad-key' } },
    });
    ids.bad = publicId('BYOKCredential', c.namespace, 'bad');
  }, 60_000);
  afterAll(async () => {
    if (op) seen.push(...op.logs);
    await op?.op.stop();
  });

  test('kubectl get shows READY False PayloadInvalid for the broken key and True Ready for the good one; status carries the same', async () => {
    const row = (table: string, id: string) => table.split('\n').find((l) => l.startsWith(`${id} `)) ?? '';
    const deadline = Date.now() + 30_000;
    let table = '';
    for (;;) {
      table = await k('get', 'bk', '-n', c.namespace);
      if (
        !row(table, ids.good).includes('Reconciling') &&
        !row(table, ids.bad).includes('Reconciling') &&
        row(table, ids.bad) !== ''
      )
        break;
      if (Date.now() > deadline) throw new Error(`not reconciled in time:\n${table}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(row(table, ids.bad)).toMatch(/\sFalse\s+PayloadInvalid\s+<none>\s+\S+$/);
    expect(row(table, ids.good)).toMatch(/\sTrue\s+Ready\s+<none>\s+\S+$/);
    const obj = JSON.parse(await k('get', 'bk', '-n', c.namespace, ids.bad, '-o', 'json')) as {
      status: Record<string, unknown>;
    };
    expect(obj.status).toMatchObject({
      ready: false,
      reason: 'PayloadInvalid',
      upstream: null,
      lastUsedTime: null,
      label: '',
    });
    expect(String(obj.status.message)).toContain('PayloadValid');
    expect(await k('get', 'bk', '-n', c.namespace, ids.good, '-o', 'jsonpath={.status.ready} {.status.reason}')).toBe(
      'true Ready',
    );
    // The REST door tells the same story, under the same ids.
    const restBad = one(await rest.call('GET', `/byok/${ids.bad}`, { key: c.managementKey }));
    expect(restBad.status).toMatchObject({ ready: false, reason: 'PayloadInvalid', message: obj.status.message });
    // Wide output adds the delivery columns.
    expect(row(await k('get', 'bk', '-n', c.namespace, '-o', 'wide'), ids.bad)).toMatch(
      /\sFalse\s+PayloadInvalid\s+<none>\s+\S+\s+<none>\s+\S+\s+\S+$/,
    );
  }, 60_000);

  test('status sent in a write is ignored, as for any Kubernetes object', async () => {
    const patched = await viaApiserver(
      'PATCH',
      `${P}/namespaces/${c.namespace}/byokkeys/${ids.good}`,
      { status: { ready: false, reason: 'Forged' } },
      'application/merge-patch+json',
    );
    expect(patched.status).toBe(200);
    expect((patched.body.status as Record<string, unknown>).reason).not.toBe('Forged');
    expect(await k('get', 'bk', '-n', c.namespace, ids.good, '-o', 'jsonpath={.status.reason}')).not.toBe('Forged');
  });
});

describe('watch', () => {
  test('kubectl get -w sees ADDED, MODIFIED and DELETED with resourceVersions, and never the key', async () => {
    const child: ChildProcess = spawn(
      kubectlBin(),
      [
        '--kubeconfig',
        admin(),
        'get',
        'bk',
        '-n',
        b.namespace,
        '--watch-only',
        '--output-watch-events',
        '-o',
        'json',
        '-v=6',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    // kubectl watches from the resourceVersion of the list it reads first, so every change made once that list is
    // answered (its request log, -v=6) is in the watch.
    let log = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    try {
      await until(
        'kubectl has read the list it watches from',
        () => /url="[^"]*\/byokkeys\?(?![^"]*watch=true)[^"]*" status="200 OK"/.test(log),
        15_000,
      );
      const created = await kubectlCreate(b.namespace);
      const name = created.metadata.name;
      await k('patch', 'bk', name, '-n', b.namespace, '--type=merge', '-p', '{"spec":{"disabled":true}}');
      await k('delete', 'bk', name, '-n', b.namespace);
      const deadline = Date.now() + 15_000;
      while (!/"type":\s*"DELETED"/.test(out) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    } finally {
      child.kill('SIGTERM');
    }
    seen.push(out, log);
    if (!out.includes('"type"')) throw new Error(`no watch events; kubectl printed: ${out.slice(0, 2000)}${log}`);
    const types = [...out.matchAll(/"type":\s*"(ADDED|MODIFIED|DELETED)"/g)].map((m) => m[1]);
    expect(types[0]).toBe('ADDED');
    expect(types).toContain('MODIFIED');
    expect(types[types.length - 1]).toBe('DELETED');
    const rvs = [...out.matchAll(/"resourceVersion":\s*"(\d+)"/g)].map((m) => Number(m[1]));
    expect(rvs.length).toBeGreaterThanOrEqual(3);
    expect(rvs[rvs.length - 1]).toBeGreaterThan(rvs[0] as number);
    expect(out).not.toContain(CANARY);
    expect(log).not.toContain(CANARY);
  }, 40_000);

  test('a watch from a list resourceVersion replays what happened since', async () => {
    const list = await viaApiserver('GET', `${P}/namespaces/${b.namespace}/byokkeys`);
    const rv = (list.body.metadata as { resourceVersion: string }).resourceVersion;
    const created = await kubectlCreate(b.namespace);
    // The replayed ADDED frame of the new key ends the wait; the server-side timeout only bounds a watch that never
    // replays it.
    const frames = await new Promise<string>((resolve, reject) => {
      let text = '';
      const abort = new AbortController();
      void kubeClient(testKubeConfig())
        .stream(
          `${P}/namespaces/${b.namespace}/byokkeys`,
          { watch: true, resourceVersion: rv, timeoutSeconds: 10 },
          (ev) => {
            text += `${JSON.stringify(ev)}\n`;
            if (text.includes('"type":"ADDED"') && text.includes(created.metadata.name)) {
              abort.abort();
              resolve(text);
            }
          },
          abort.signal,
        )
        .then(
          () => resolve(text),
          (err: unknown) => (abort.signal.aborted ? resolve(text) : reject(err)),
        );
    });
    seen.push(frames);
    expect(frames).toContain('"type":"ADDED"');
    expect(frames).toContain(created.metadata.name);
  }, 20_000);

  test('an idle watch is answered at once, before any event, as the kube-apiserver answers one', async () => {
    // No key carries this label: no event is ever sent, and the server would end the watch only after a minute. The
    // response head must still arrive now (else this test times out).
    const kc = testKubeConfig();
    const url = new URL(
      `${kc.getCurrentCluster()!.server}${P}/namespaces/${b.namespace}/byokkeys?watch=true&timeoutSeconds=60&labelSelector=byok-test%3Dnone`,
    );
    const opts: Parameters<typeof httpsRequest>[1] = { method: 'GET' };
    await kc.applyToHTTPSOptions(opts);
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpsRequest(url, opts, (res) => {
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      req.once('error', reject);
      req.end();
    });
    expect(status).toBe(200);
  }, 20_000);
});

describe('the OpenRouter-shaped surface under the group', () => {
  test('same bodies and status codes as /api/v1/byok', async () => {
    const list = await k('get', '--raw', `${P}/namespaces/${a.namespace}/byok`);
    const parsed = JSON.parse(list) as { data: unknown[]; total_count: number };
    const direct = (await rest.call('GET', '/byok', { key: a.managementKey })).body as {
      data: unknown[];
      total_count: number;
    };
    expect(parsed).toEqual(direct);

    const created = await viaApiserver('POST', `${P}/namespaces/${a.namespace}/byok`, {
      provider: 'openai',
      key: CANARY,
      name: 'raw',
    });
    expect(created.status).toBe(200); // the client reports 2xx as 200; the REST body is {data}
    const id = (created.body.data as { id: string }).id;
    expect(one(await rest.call('GET', `/byok/${id}`, { key: a.managementKey })).name).toBe('raw');

    const bad = await viaApiserver('POST', `${P}/namespaces/${a.namespace}/byok`, {
      provider: 'openai',
      key: CANARY,
      is_fallback: true,
      is_byok_only: true,
    });
    const badRest = await rest.call('POST', '/byok', {
      key: a.managementKey,
      body: { provider: 'openai', key: CANARY, is_fallback: true, is_byok_only: true },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual(badRest.body);
    const missing = await viaApiserver(
      'GET',
      `${P}/namespaces/${a.namespace}/byok/00000000-0000-4000-8000-000000000000`,
    );
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual(
      (await rest.call('GET', '/byok/00000000-0000-4000-8000-000000000000', { key: a.managementKey })).body,
    );
    const deleted = await viaApiserver('DELETE', `${P}/namespaces/${a.namespace}/byok/${id}`);
    expect(deleted.body).toEqual({ deleted: true });
  });
});

describe('delegated authentication and authorization', () => {
  test('a user without RBAC is Forbidden; a RoleBinding grants exactly its namespace and verbs', async () => {
    const user = `viewer-${a.namespace}`;
    const kc = await kubeconfigFor(user, ['byok-testers']);
    const denied = await kAs(kc, 'get', 'bk', '-n', a.namespace);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/forbidden/i);
    expect(denied.stderr).toContain(`User "${user}" cannot list resource "byokkeys"`);

    // byok: the OpenRouter-shaped path, which the kube-apiserver authorizes as its own resource before proxying.
    await grant(
      a.namespace,
      `${user}-byok-keys-viewer`,
      ['byokkeys', 'byok'],
      ['get', 'list', 'watch'],
      { kind: 'User', name: user },
      { cluster: true },
    );
    // Authorization decisions are cached briefly (denials 5 s): wait until the grant shows.
    let allowed = await kAs(kc, 'get', 'bk', '-n', a.namespace, '-o', 'name');
    for (let i = 0; i < 40 && allowed.code !== 0; i++) {
      await new Promise((r) => setTimeout(r, 250));
      allowed = await kAs(kc, 'get', 'bk', '-n', a.namespace, '-o', 'name');
    }
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toContain('byokkey.api.byok.gateway.dev/');
    const otherNs = await kAs(kc, 'get', 'bk', '-n', b.namespace);
    expect(otherNs.stderr).toMatch(/forbidden/i);
    const write = await kAs(kc, 'delete', 'bk', '-n', a.namespace, '--all');
    expect(write.stderr).toMatch(/forbidden/i);
    // The OpenRouter-shaped path is authorized as byokkeys too.
    const rawList = await kAs(kc, 'get', '--raw', `${P}/namespaces/${a.namespace}/byok`);
    expect({ code: rawList.code, stderr: rawList.stderr }).toEqual({ code: 0, stderr: '' });
    const rawOther = await kAs(kc, 'get', '--raw', `${P}/namespaces/${b.namespace}/byok`);
    expect(rawOther.code).not.toBe(0);
  }, 40_000);

  test('a ServiceAccount token sent directly is refused by default, and checked with a TokenReview where accepted', async () => {
    const client = kubeClient(testKubeConfig());
    await client.request('POST', `/api/v1/namespaces/${b.namespace}/serviceaccounts`, {
      body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'robot' } },
    });
    const tr = await client.request<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${b.namespace}/serviceaccounts/robot/token`,
      {
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
      },
    );
    const token = tr.status.token;
    // The default server is reached through the kube-apiserver only: a real token sent to its port is a 401.
    const refused = await direct(`${P}/namespaces/${b.namespace}/byokkeys`, { authorization: `Bearer ${token}` });
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.text)).toMatchObject({ kind: 'Status', reason: 'Unauthorized' });
    // --aggregated-accept-tokens: the token is reviewed, and the review's user is authorized per request.
    const accepting = await startAggregatedServer({
      kubeConfig: testKubeConfig(),
      runtime: rest.server.runtime,
      tls: await createServingCertificate(DEFAULT_SERVICE),
      logger: pino({ level: 'silent' }),
      host: '127.0.0.1',
      port: 0,
      acceptBearerTokens: true,
    });
    const viaToken = (path: string, headers: Record<string, string>) => direct(path, headers, undefined, accepting.url);
    try {
      // Forged identity headers next to a real token change nothing: the token's user is the caller.
      const forbidden = await viaToken(`${P}/namespaces/${b.namespace}/byokkeys`, {
        authorization: `Bearer ${token}`,
        'x-remote-user': 'byok-admin',
        'x-remote-group': 'system:masters',
      });
      expect(forbidden.status).toBe(403);
      expect(forbidden.text).toContain(`system:serviceaccount:${b.namespace}:robot`);
      await grant(b.namespace, 'robot-keys', ['byokkeys'], ['list'], {
        kind: 'ServiceAccount',
        name: 'robot',
        namespace: b.namespace,
      });
      let ok = await viaToken(`${P}/namespaces/${b.namespace}/byokkeys`, { authorization: `Bearer ${token}` });
      for (let i = 0; i < 40 && ok.status !== 200; i++) {
        await new Promise((r) => setTimeout(r, 250));
        ok = await viaToken(`${P}/namespaces/${b.namespace}/byokkeys`, { authorization: `Bearer ${token}` });
      }
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.text)).toMatchObject({ kind: 'BYOKKeyList' });
      // The grant is list in b: an escaped prefix is the same route and the same review, not a way around it.
      for (const path of [
        `/apis/api.byok.gateway.dev/v%31/namespaces/${a.namespace}/byokkeys`,
        `/%61pis/api.byok.gateway.dev/v1/byokkeys`,
        `/apis/api%2ebyok.gateway.dev/v1/namespaces/${a.namespace}/byok`,
      ]) {
        const r = await viaToken(path, { authorization: `Bearer ${token}` });
        expect([path, r.status]).toEqual([path, 403]);
      }
      const bogus = await viaToken(`${P}/namespaces/${b.namespace}/byokkeys`, {
        authorization: 'Bearer not-a-real-token',
      });
      expect(bogus.status).toBe(401);
    } finally {
      await accepting.close();
    }
  }, 30_000);

  test('forged X-Remote-* headers without the front-proxy certificate are rejected', async () => {
    const forged = { 'x-remote-user': 'byok-admin', 'x-remote-group': 'system:masters' };
    const none = await direct(`${P}/namespaces/${a.namespace}/byokkeys`, forged);
    expect(none.status).toBe(401);
    expect(JSON.parse(none.text)).toMatchObject({ kind: 'Status', reason: 'Unauthorized', code: 401 });
    // A client certificate the kube-apiserver trusts, but not from the request-header CA, is not the front proxy.
    const cluster = testKubeConfig().getCurrentUser();
    const cert = Buffer.from(cluster?.certData ?? '', 'base64').toString('utf8');
    const key = Buffer.from(cluster?.keyData ?? '', 'base64').toString('utf8');
    const wrongCa = await direct(`${P}/namespaces/${a.namespace}/byokkeys`, forged, { cert, key });
    expect(wrongCa.status).toBe(401);
    const discovery = await direct(P, {});
    expect(discovery.status).toBe(401);
    expect((await direct('/healthz', {})).status).toBe(200);
  });
});

// what a tenant controls is untrusted at this door too (patch paths, body keys, label keys, path segments,
// DeleteOptions). Each case answers 4xx, changes nothing, and leaves every other tenant's next create working.
describe('hostile tenant', () => {
  const inherited = () => {
    const fresh = {} as Record<string, unknown>;
    return ['x', 'disabled', 'polluted'].filter((k) => fresh[k] !== undefined);
  };

  test("prototype keys in every patch type, create body and label selector pollute nothing; the other tenant's create succeeds", async () => {
    const victim = await kubectlCreate(a.namespace);
    const path = `${P}/namespaces/${a.namespace}/byokkeys/${victim.metadata.name}`;
    const before = JSON.stringify((await viaApiserver('GET', path)).body.spec);
    const attempts: [string, unknown, string][] = [
      ['application/json-patch+json', [{ op: 'add', path: '/__proto__/x', value: 'y' }], 'PATCH'],
      ['application/json-patch+json', [{ op: 'add', path: '/constructor/prototype/polluted', value: true }], 'PATCH'],
      ['application/json-patch+json', [{ op: 'add', path: '/spec/__proto__/disabled', value: true }], 'PATCH'],
      ['application/json-patch+json', [{ op: 'copy', from: '/__proto__', path: '/spec/displayName' }], 'PATCH'],
      ['application/merge-patch+json', JSON.parse('{"__proto__":{"x":"y"}}'), 'PATCH'],
      ['application/merge-patch+json', { spec: { constructor: { prototype: { polluted: true } } } }, 'PATCH'],
      [
        'application/apply-patch+yaml',
        JSON.parse(`{"apiVersion":"${GV}","kind":"BYOKKey","spec":{"__proto__":{"disabled":true}}}`),
        'PATCH',
      ],
    ];
    for (const [contentType, body, method] of attempts) {
      const r = await viaApiserver(method, path, body, contentType);
      // Server-side apply is refused (415) before its body is read.
      const refusedWith = contentType === 'application/apply-patch+yaml' ? [415] : [400, 422];
      expect([contentType, refusedWith.includes(r.status)]).toEqual([contentType, true]);
      expect(inherited()).toEqual([]);
    }
    const created = await viaApiserver(
      'POST',
      `${P}/namespaces/${a.namespace}/byokkeys`,
      JSON.parse(
        `{"apiVersion":"${GV}","kind":"BYOKKey","metadata":{"generateName":"p-"},"spec":{"provider":"openai","key":"sk-proto-0123456789","__proto__":{"disabled":true}}}`,
      ),
    );
    expect(created.status).toBe(400);
    // The REST door under the group and /api/v1/byok refuse the same body.
    const restProto = await rest.call('POST', '/byok', {
      key: a.managementKey,
      rawBody: '{"provider":"openai","key":"sk-proto-0123456789","__proto__":{"disabled":true}}',
    });
    expect(restProto.status).toBe(400);
    expect(inherited()).toEqual([]);
    expect(JSON.stringify((await viaApiserver('GET', path)).body.spec)).toBe(before);
    // Label keys are looked up as own labels only.
    for (const key of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect((await k('get', 'bk', '-n', a.namespace, '-l', key, '-o', 'name')).trim()).toBe('');
      expect(await k('get', 'bk', '-n', a.namespace, '-l', `!${key}`, '-o', 'name')).toContain(victim.metadata.name);
    }
    // The other tenant's next create, at both doors, is unaffected and not disabled.
    const other = await kubectlCreate(b.namespace);
    expect(other.spec.disabled).toBe(false);
    const restCreate = await rest.call('POST', '/byok', {
      key: b.managementKey,
      body: { provider: 'anthropic', key: 'sk-ant-after-proto-0123456789' },
    });
    expect(restCreate.status).toBe(201);
  }, 60_000);

  // A bounded stateful fuzz of this door (schemathesis covers the REST door in .ci/schemathesis.sh):
  // random creates, merge and JSON patches, selectors and paths, built from the names a hostile tenant reaches for.
  // Rule: no 5xx, every error a Status, nothing reaches a prototype.
  test('fuzz: random bodies, patches, selectors and paths never give a 5xx or pollute a prototype', async () => {
    const fc = (await import('fast-check')).default;
    const victim = await kubectlCreate(a.namespace);
    const base = `${P}/namespaces/${a.namespace}/byokkeys`;
    const key = fc.oneof(
      fc.constantFrom(
        '__proto__',
        'constructor',
        'prototype',
        'spec',
        'metadata',
        'provider',
        'key',
        'disabled',
        'sortOrder',
        'allowedModels',
        'toString',
        'x',
      ),
      fc.string({ maxLength: 8 }),
    );
    const value = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: 'small' },
        fc.constant(null),
        fc.boolean(),
        fc.integer(),
        fc.double({ noNaN: true }),
        fc.string({ maxLength: 12 }),
        fc.array(tie('v'), { maxLength: 3 }),
        fc.dictionary(key, tie('v'), { maxKeys: 3 }),
      ),
    })).v;
    const pointer = fc
      .array(key, { minLength: 1, maxLength: 3 })
      .map((ks) => `/${ks.map((k) => k.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`);
    const op = fc.oneof(
      fc.record({ kind: fc.constant('create' as const), body: fc.dictionary(key, value, { maxKeys: 4 }) }),
      fc.record({ kind: fc.constant('merge' as const), body: fc.dictionary(key, value, { maxKeys: 4 }) }),
      fc.record({
        kind: fc.constant('json' as const),
        body: fc.array(
          fc.record({
            op: fc.constantFrom('add', 'remove', 'replace', 'test', 'copy', 'move'),
            path: pointer,
            from: pointer,
            value,
          }),
          { maxLength: 3 },
        ),
      }),
      fc.record({
        kind: fc.constant('select' as const),
        body: fc.array(key, { minLength: 1, maxLength: 2 }).map((ks) => ks.join(',')),
      }),
      fc.record({ kind: fc.constant('path' as const), body: fc.string({ maxLength: 12 }) }),
    );
    let requests = 0;
    await fc.assert(
      fc.asyncProperty(op, async (o) => {
        requests++;
        let r: { status: number; body: Record<string, unknown> };
        if (o.kind === 'create') r = await viaApiserver('POST', base, { apiVersion: GV, kind: 'BYOKKey', ...o.body });
        else if (o.kind === 'merge')
          r = await viaApiserver('PATCH', `${base}/${victim.metadata.name}`, o.body, 'application/merge-patch+json');
        else if (o.kind === 'json')
          r = await viaApiserver('PATCH', `${base}/${victim.metadata.name}`, o.body, 'application/json-patch+json');
        else if (o.kind === 'select')
          r = await viaApiserver('GET', `${base}?labelSelector=${encodeURIComponent(o.body)}`);
        else r = await viaApiserver('GET', `${base}/${encodeURIComponent(o.body) || 'x'}`);
        expect(r.status).toBeLessThan(500);
        if (r.status >= 400) expect(r.body.kind).toBe('Status');
        expect(Object.keys(Object.prototype)).toEqual([]);
        expect(({} as Record<string, unknown>).disabled).toBeUndefined();
      }),
      { numRuns: 150, seed: 24 },
    );
    process.stderr.write(`[aggregated fuzz] ${requests} requests, 0 5xx\n`);
    // The victim's key still works at the other tenant's door afterwards.
    expect((await kubectlCreate(b.namespace)).spec.disabled).toBe(false);
  }, 120_000);

  test('JSON nested past the documented depth is a 400 at both doors, before any work', async () => {
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    const agg = await viaApiserver(
      'POST',
      `${P}/namespaces/${a.namespace}/byokkeys`,
      JSON.parse(`{"spec":{"provider":"openai","key":"k","allowedModels":${'['.repeat(200)}${']'.repeat(200)}}}`),
    );
    expect(agg.status).toBe(400);
    expect(String(agg.body.message)).toContain('nests deeper than 128 levels');
    const restDeep = await rest.call('POST', '/byok', {
      key: a.managementKey,
      rawBody: `{"provider":"openai","key":"k","allowed_models":${deep}}`,
    });
    expect(restDeep.status).toBe(400);
    expect(JSON.stringify(restDeep.body)).toContain('nests deeper than 128 levels');
  });

  test('every route, reached with an identity that has no RBAC, and every malformed path under the group: never a 2xx, nothing written', async () => {
    const nobody = new (await import('@kubernetes/client-node')).KubeConfig();
    nobody.loadFromFile(await kubeconfigFor(`nobody-${a.namespace}`));
    const client = kubeClient(nobody);
    const victim = await kubectlCreate(a.namespace);
    const countBefore = ((await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys`)).body.items as unknown[])
      .length;
    const ns = a.namespace;
    const id = victim.metadata.name;
    const routes: [string, string][] = [
      ['GET', `${P}/byokkeys`],
      ['GET', `${P}/namespaces/${ns}/byokkeys`],
      ['POST', `${P}/namespaces/${ns}/byokkeys`],
      ['GET', `${P}/namespaces/${ns}/byokkeys/${id}`],
      ['PUT', `${P}/namespaces/${ns}/byokkeys/${id}`],
      ['PATCH', `${P}/namespaces/${ns}/byokkeys/${id}`],
      ['DELETE', `${P}/namespaces/${ns}/byokkeys/${id}`],
      ['DELETE', `${P}/namespaces/${ns}/byokkeys`],
      ['GET', `${P}/namespaces/${ns}/byok`],
      ['POST', `${P}/namespaces/${ns}/byok`],
      ['GET', `${P}/namespaces/${ns}/byok/${id}`],
      ['PATCH', `${P}/namespaces/${ns}/byok/${id}`],
      ['DELETE', `${P}/namespaces/${ns}/byok/${id}`],
    ];
    // The table covers what the server registers.
    for (const [method, url] of routes)
      expect([
        method,
        url,
        agg.app.hasRoute({ method: method as 'GET', url: url.replace(ns, ':ns').replace(id, ':name') }),
      ]).toEqual([method, url, true]);
    const malformed = [
      `${P}/namespaces//byokkeys`,
      `${P}/namespaces//byokkeys?watch=true`,
      `${P}/namespaces//byok`,
      `${P}/namespaces/${ns}%2F..%2F${b.namespace}/byokkeys`,
      `${P}/namespaces/%2e%2e/byokkeys`,
      `${P}/namespaces/${ns}/byokkeys/%2F`,
      `${P}/namespaces/UPPER/byokkeys`,
    ];
    const body = {
      apiVersion: GV,
      kind: 'BYOKKey',
      metadata: { generateName: 'n-' },
      spec: { provider: 'openai', key: 'sk-nobody-0123456789' },
    };
    const contentTypeOf = (m: string) => (m === 'PATCH' ? 'application/merge-patch+json' : 'application/json');
    for (const [method, url] of [
      ...routes,
      ...malformed.flatMap(
        (u) =>
          [
            ['GET', u],
            ['POST', u],
            ['DELETE', u],
          ] as [string, string][],
      ),
    ]) {
      let status = 200;
      try {
        await client.request(
          method,
          url,
          method === 'GET' || method === 'DELETE' ? {} : { body, contentType: contentTypeOf(method) },
        );
      } catch (err) {
        status = err instanceof KubeApiError ? err.status : 0;
      }
      expect([method, url, status >= 400 && status < 500]).toEqual([method, url, true]);
    }
    // Malformed paths as the admin, too: refused before any handler (404), never a list or a write.
    // (Not %2e%2e: URL parsing on the client turns it into `..` and the request becomes the cluster-wide list.)
    for (const url of malformed.filter((u) => !u.includes('%2e%2e'))) {
      const status = (await viaApiserver('GET', url)).status;
      expect([url, [400, 403, 404].includes(status)]).toEqual([url, true]);
    }
    expect(
      ((await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys`)).body.items as unknown[]).length,
    ).toBe(countBefore);
  }, 90_000);

  test('delete --dry-run=server validates and answers without deleting anything (body or query form)', async () => {
    const created = await kubectlCreate(a.namespace);
    const out = await k('delete', 'byokkey', created.metadata.name, '-n', a.namespace, '--dry-run=server');
    expect(out).toContain('(server dry run)');
    const still = await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys/${created.metadata.name}`);
    expect(still.status).toBe(200);
    expect((await rest.call('GET', `/byok/${created.metadata.name}`, { key: a.managementKey })).status).toBe(200);
    const query = await viaApiserver(
      'DELETE',
      `${P}/namespaces/${a.namespace}/byokkeys/${created.metadata.name}?dryRun=All`,
    );
    expect(query.status).toBe(200);
    const bogus = await viaApiserver('DELETE', `${P}/namespaces/${a.namespace}/byokkeys/${created.metadata.name}`, {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      dryRun: ['Nope'],
    });
    expect(bogus.status).toBe(400);
    expect((await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys/${created.metadata.name}`)).status).toBe(
      200,
    );
    // A dry run of a missing object is the same NotFound the real delete gives.
    expect(
      (await kAs(admin(), 'delete', 'byokkey', 'no-such-id', '-n', a.namespace, '--dry-run=server')).stderr,
    ).toContain('NotFound');
    // Create, update and patch refuse a dry run with 400 rather than write.
    const before = ((await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys`)).body.items as unknown[])
      .length;
    const createDry = await viaApiserver('POST', `${P}/namespaces/${a.namespace}/byokkeys?dryRun=All`, {
      apiVersion: GV,
      kind: 'BYOKKey',
      metadata: { generateName: 'd-' },
      spec: { provider: 'openai', key: 'sk-dry-0123456789' },
    });
    expect(createDry.status).toBe(400);
    expect(
      ((await viaApiserver('GET', `${P}/namespaces/${a.namespace}/byokkeys`)).body.items as unknown[]).length,
    ).toBe(before);
  }, 60_000);
});

// the door authorized one parse of the URL and routed another. This generates the next such hole instead of
// replaying the last one: every registered route, its path respelled (path-mutations.ts) and its query varied, sent
// with the same identity straight to the aggregated port (as the front proxy sends it) and through the kube-apiserver.
// An identity without RBAC never gets a 2xx; an identity that may read one namespace gets the same allow/deny at both
// doors and never sees the other namespace; and nothing is written anywhere.
describe('path differential: the route that is served is the route that was authorized', () => {
  type Target = { base: string; cert: string; key: string; ca?: string; headers: Record<string, string> };
  const workDir = () => process.env.BYOK_TEST_WORKDIR ?? '';
  /** A raw request: the path is sent byte for byte (no URL parsing on this side, which would resolve dot segments). */
  function raw(
    t: Target,
    method: string,
    path: string,
    body?: { contentType: string; text: string },
  ): Promise<{ status: number; text: string }> {
    const url = new URL(t.base);
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        {
          host: url.hostname,
          port: url.port,
          method,
          path,
          headers: {
            ...t.headers,
            ...(body
              ? { 'content-type': body.contentType, 'content-length': String(Buffer.byteLength(body.text)) }
              : {}),
          },
          cert: t.cert,
          key: t.key,
          ...(t.ca ? { ca: t.ca } : { rejectUnauthorized: false }),
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            seen.push(text);
            resolve({ status: res.statusCode ?? 0, text });
          });
        },
      );
      // Go answers a path it cannot parse with a bare 400 and a body, even to HEAD, which Node's parser refuses: a denial.
      // A watch that was served ends after timeoutSeconds; anything still open after that is a hang, not a verdict.
      req.setTimeout(15_000, () => req.destroy(new Error(`no answer in 15 s: ${method} ${path}`)));
      req.on('error', (err: NodeJS.ErrnoException) =>
        err.code?.startsWith('HPE_') ? resolve({ status: 0, text: '' }) : reject(err),
      );
      req.end(body?.text);
    });
  }
  async function viaApiserverAs(user: string): Promise<Target> {
    const kc = new (await import('@kubernetes/client-node')).KubeConfig();
    kc.loadFromFile(await kubeconfigFor(user));
    const b64 = (v: string | undefined) => Buffer.from(v ?? '', 'base64').toString('utf8');
    return {
      base: kc.getCurrentCluster()?.server ?? '',
      ca: b64(kc.getCurrentCluster()?.caData),
      cert: b64(kc.getCurrentUser()?.certData),
      key: b64(kc.getCurrentUser()?.keyData),
      headers: {},
    };
  }
  /** Straight to the aggregated port, as the kube-aggregator sends it: the front-proxy certificate and X-Remote-*. */
  const directAs = (user: string): Target => ({
    base: agg.url,
    cert: readFileSync(join(workDir(), 'front-proxy-client.crt'), 'utf8'),
    key: readFileSync(join(workDir(), 'front-proxy-client.key'), 'utf8'),
    headers: { 'x-remote-user': user, 'x-remote-group': 'system:authenticated' },
  });

  const G = 'api.byok.gateway.dev';
  type Route = { methods: string[]; segments: (ns: string, id: string) => string[]; resource: 'byokkeys' | 'byok' };
  const ROUTES: Route[] = [
    { resource: 'byokkeys', methods: ['GET', 'HEAD'], segments: () => ['apis', G, 'v1', 'byokkeys'] },
    {
      resource: 'byokkeys',
      methods: ['GET', 'HEAD', 'POST', 'DELETE'],
      segments: (ns) => ['apis', G, 'v1', 'namespaces', ns, 'byokkeys'],
    },
    {
      resource: 'byokkeys',
      methods: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE'],
      segments: (ns, id) => ['apis', G, 'v1', 'namespaces', ns, 'byokkeys', id],
    },
    {
      resource: 'byok',
      methods: ['GET', 'HEAD', 'POST'],
      segments: (ns) => ['apis', G, 'v1', 'namespaces', ns, 'byok'],
    },
    {
      resource: 'byok',
      methods: ['GET', 'HEAD', 'PATCH', 'DELETE'],
      segments: (ns, id) => ['apis', G, 'v1', 'namespaces', ns, 'byok', id],
    },
  ];
  const bodyFor = (
    route: Route,
    method: string,
    ns: string,
    id: string,
  ): { contentType: string; text: string } | undefined => {
    if (method === 'POST') {
      return route.resource === 'byok'
        ? {
            contentType: 'application/json',
            text: JSON.stringify({ provider: 'openai', key: 'sk-diff-0123456789abcdef' }),
          }
        : {
            contentType: 'application/json',
            text: JSON.stringify({
              apiVersion: GV,
              kind: 'BYOKKey',
              metadata: { generateName: 'diff-' },
              spec: { provider: 'openai', key: 'sk-diff-0123456789abcdef' },
            }),
          };
    }
    if (method === 'PATCH')
      return route.resource === 'byok'
        ? { contentType: 'application/json', text: '{"disabled":true}' }
        : { contentType: 'application/merge-patch+json', text: '{"spec":{"disabled":true}}' };
    if (method === 'PUT')
      return {
        contentType: 'application/json',
        text: JSON.stringify({
          apiVersion: GV,
          kind: 'BYOKKey',
          metadata: { name: id, namespace: ns },
          spec: { provider: 'openai', displayName: 'overwritten', disabled: true },
        }),
      };
    return undefined;
  };
  /** Every object of the two accounts, with its resourceVersion: a write anywhere changes this. */
  const stored = async () => {
    const out: string[] = [];
    for (const ns of [a.namespace, b.namespace]) {
      const creds = (await customObjects().listNamespacedCustomObject({
        group: 'byok.gateway.dev',
        version: 'v1alpha1',
        namespace: ns,
        plural: 'byokcredentials',
      })) as { items: unknown[] };
      const secrets = await core().listNamespacedSecret({ namespace: ns });
      for (const o of [
        ...(creds.items as { metadata: { name: string; resourceVersion: string } }[]),
        ...secrets.items.map((x) => ({
          metadata: { name: x.metadata?.name ?? '', resourceVersion: x.metadata?.resourceVersion ?? '' },
        })),
      ])
        out.push(`${ns}/${o.metadata.name}@${o.metadata.resourceVersion}`);
    }
    return out.sort();
  };

  test('generated respellings of every route: no 2xx without RBAC, the same verdict at both doors, nothing written', async () => {
    const fc = (await import('fast-check')).default;
    const { mutationsArb, queryArb, respellAll } = await import('./path-mutations.ts');
    const victimA = await kubectlCreate(a.namespace);
    const victimB = await kubectlCreate(b.namespace);
    const suffix = Math.random().toString(36).slice(2, 8);
    const nobody = `nobody-diff-${suffix}`;
    const reader = `reader-diff-${suffix}`;
    await grant(
      a.namespace,
      `reader-${suffix}`,
      ['byokkeys', 'byok'],
      ['get', 'list', 'watch'],
      { kind: 'User', name: reader },
      { cluster: true },
    );
    const doors = {
      nobody: { direct: directAs(nobody), apiserver: await viaApiserverAs(nobody) },
      reader: { direct: directAs(reader), apiserver: await viaApiserverAs(reader) },
    };
    // The grant is visible at both doors before the run (RBAC is read from an informer; our review cache is cold).
    const own = `/apis/${G}/v1/namespaces/${a.namespace}/byokkeys`;
    for (let i = 0; i < 40 && (await raw(doors.reader.apiserver, 'GET', own)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 250));
    expect((await raw(doors.reader.direct, 'GET', own)).status).toBe(200);
    const before = await stored();

    const caseArb = fc.record({
      who: fc.constantFrom('nobody' as const, 'reader' as const),
      route: fc.nat(ROUTES.length - 1),
      method: fc.nat(4),
      inOwn: fc.boolean(),
      mutations: mutationsArb,
      query: queryArb,
    });
    const verdicts = { cases: 0, allowed: 0, byStatus: new Map<string, number>() };
    // Watches stay open: every generated watch asks for timeoutSeconds=1, so a served one ends and gives its verdict.
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const route = ROUTES[c.route]!;
        const method = route.methods[c.method % route.methods.length]!;
        const [ns, id] = c.inOwn ? [a.namespace, victimA.metadata.name] : [b.namespace, victimB.metadata.name];
        const path = `${respellAll(route.segments(ns, id), c.mutations)}${c.query.replace('watch', 'timeoutSeconds=1&watch')}`;
        const body = bodyFor(route, method, ns, id);
        const [d, viaApi] = await Promise.all([
          raw(doors[c.who].direct, method, path, body),
          raw(doors[c.who].apiserver, method, path, body),
        ]);
        verdicts.cases++;
        const key = `${c.who} ${d.status}/${viaApi.status}`;
        verdicts.byStatus.set(key, (verdicts.byStatus.get(key) ?? 0) + 1);
        const ok = (st: number) => st >= 200 && st < 300;
        if (ok(d.status)) verdicts.allowed++;
        const where = `${c.who} ${method} ${path}`;
        // Never a 5xx at the door itself; the apiserver may say 503 only for a path it could not proxy at all.
        expect([where, d.status < 500]).toEqual([where, true]);
        if (c.who === 'nobody') expect([where, ok(d.status), ok(viaApi.status)]).toEqual([where, false, false]);
        else {
          expect([where, ok(d.status)]).toEqual([where, ok(viaApi.status)]);
          if (ok(d.status)) {
            expect([where, method === 'GET' || method === 'HEAD']).toEqual([where, true]);
            expect([
              where,
              d.text.includes(victimB.metadata.name) || viaApi.text.includes(victimB.metadata.name),
            ]).toEqual([where, false]);
          }
        }
      }),
      { numRuns: Number(process.env.BYOK_PATH_DIFFERENTIAL_RUNS ?? 2500), seed: 32 },
    );
    expect(await stored()).toEqual(before);
    process.stderr.write(
      `[path differential] ${verdicts.cases} cases (seed 32), ${verdicts.allowed} allowed (all the reader's own reads); verdicts direct/apiserver: ${JSON.stringify(Object.fromEntries([...verdicts.byStatus].sort((x, y) => y[1] - x[1])))}\n`,
    );
    // The generator reached both verdicts for the reader: a check that only ever saw denials would prove nothing.
    expect(verdicts.allowed).toBeGreaterThan(50);
  }, 600_000);
});

describe('secrets', () => {
  test("the canary key never appears in any response, log line (ours or the apiserver's), watch frame or Event", async () => {
    const events = await k('get', 'events', '-A', '-o', 'json');
    const apiserverLogText = readFileSync(apiserverLog(), 'utf8');
    const everything = [
      ...seen,
      ...aggLog,
      ...rest.logLines,
      ...rest.exchanges.map((e) => e.text),
      events,
      apiserverLogText,
    ].join('\n');
    expect(everything.length).toBeGreaterThan(1000);
    expect(everything).not.toContain(CANARY);
    expect(everything).not.toContain(CANARY_2);
    expect(everything).not.toContain(CANARY.slice(4, -4));
  });
});

describe('the Helm chart registers and removes the APIService', () => {
  // Last in this file: it replaces the loopback registration above with the chart's (whose pods never run here).
  test('install creates the APIService with a caBundle and the server RBAC; uninstall removes the APIService', async () => {
    await unregister(testKubeConfig());
    const ns = b.namespace;
    const run = (...args: string[]) => helm(args, admin());
    await run('install', 'aggtest', CHART_DIR, '-n', ns, '--skip-crds', '--set', `watchNamespaces[0]=${ns}`);
    try {
      const apiService = JSON.parse(await k('get', 'apiservice', APISERVICE_NAME, '-o', 'json')) as {
        spec: { caBundle?: string; service: { name: string; namespace: string; port: number } };
      };
      expect(Buffer.from(apiService.spec.caBundle ?? '', 'base64').toString()).toContain('BEGIN CERTIFICATE');
      expect(apiService.spec.service).toEqual({ name: 'aggtest-byok-aggregated-api', namespace: ns, port: 443 });
      const secret = JSON.parse(await k('get', 'secret', 'aggtest-byok-aggregated-tls', '-n', ns, '-o', 'json')) as {
        data: Record<string, string>;
      };
      expect(secret.data['ca.crt']).toBe(apiService.spec.caBundle);
      const sa = `--as=system:serviceaccount:${ns}:aggtest-byok-api`;
      const can = async (...args: string[]) => (await kAs(admin(), 'auth', 'can-i', ...args, sa)).stdout.trim();
      expect(await can('create', 'subjectaccessreviews.authorization.k8s.io')).toBe('yes');
      expect(await can('create', 'tokenreviews.authentication.k8s.io')).toBe('yes');
      expect(await can('get', 'configmap/extension-apiserver-authentication', '-n', 'kube-system')).toBe('yes');
      expect(await can('get', 'configmaps', '-n', 'default')).toBe('no');
      const roles = await k(
        'get',
        'clusterroles',
        'byok-keys-viewer',
        'byok-keys-editor',
        '-o',
        'jsonpath={range .items[*]}{.metadata.name}={.metadata.labels}{"\\n"}{end}',
      );
      expect(roles).toMatch(/byok-keys-viewer=.*aggregate-to-view/);
      expect(roles).toMatch(/byok-keys-editor=.*aggregate-to-edit/);
    } finally {
      await run('uninstall', 'aggtest', '-n', ns, '--wait');
    }
    const gone = await kAs(admin(), 'get', 'apiservice', APISERVICE_NAME);
    expect(gone.stderr).toContain('NotFound');
  }, 60_000);
});
