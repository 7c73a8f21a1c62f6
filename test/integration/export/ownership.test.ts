// What a tenant names is scoped by its owner, on the exported data plane (docs/export.md, "Names, hosts and shared objects are owned"), against a real
// kube-apiserver with the targets' real CRDs and the real operator (`--export-target envoy-ai-gateway`):
//   - an Azure deployment host crafted so that its Backend had the name of bedrock-runtime.eu-central-1's under the
//     old 24-bit names no longer touches the shared Bedrock Backend, and removing it leaves that Backend as it was;
//   - a host the URL check accepts but the Backend CRD refuses (`a_b.example.com`) fails its own credential only (a
//     NotExported condition), while other accounts are written and a stale shared object is still deleted;
//   - a DNS-name tenant host (`localtest.me`, which resolves to loopback) is not exported without
//     `--export-allow-tenant-hosts` / `--allow-tenant-hosts`, and the condition and the report say why;
//   - an object already holding a shared object's name that is not this export's copy is never overwritten: the
//     credential that needs it is NotExported, with a Warning Event.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { stringify } from 'yaml';
import { tenantName } from '../../../src/export/index.ts';
import { loadCatalog } from '../../../src/gateway/catalog.ts';
import { SHARED_LABEL } from '../../../src/operator/export/desired.ts';
import { installExportCrds } from '../../support/export-crds.ts';
import { createTestNamespace, kubectl, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, cond, resource, startTestOperator } from '../../support/operator.ts';
import { until } from '../../support/until.ts';

const kc = testKubeConfig();
const repo = join(import.meta.dirname, '..', '..', '..');
const gatewayCatalog = loadCatalog(join(repo, 'config', 'catalog', 'catalog.json'));
const catalog = {
  catalog: gatewayCatalog.catalog,
  upstream: (model: string, endpointId: string) => gatewayCatalog.upstream(model, endpointId),
};
const run = promisify(execFile);

const BEDROCK = 'bedrock-runtime.eu-central-1.amazonaws.com';
/** Found by a search against the old names: its Backend was `byok-host-bedrock-runtime-eu-central-1-amazonaws-com-dc2436`, like Bedrock's. */
const TWIN = 'bedrock--runtime-------------eu-----central----------------1.amazonaws---------------com.';
const OLD_BEDROCK_NAME = 'byok-host-bedrock-runtime-eu-central-1-amazonaws-com-dc2436';

interface Backend {
  metadata: { name: string; resourceVersion: string };
  spec: { endpoints: { fqdn: { hostname: string } }[]; tls: { sni: string } };
}

const azure = (host: string) =>
  JSON.stringify([
    {
      api_key: 'azcanary-ownership-0001',
      model_slug: 'openai/gpt-5',
      endpoint_url: `https://${host}/openai/deployments/d/chat/completions?api-version=2024-10-21`,
      model_id: 'd',
    },
  ]);
const bedrockIam = JSON.stringify({
  accessKeyId: 'AKIACANARY0000000041',
  secretAccessKey: 'canarySecretAccessKey0000000000000041',
  region: 'eu-central-1',
});

function manifests(ns: string, provider: string, payload: string, allowedModels: string[]): Record<string, unknown>[] {
  return [
    {
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'Account',
      metadata: { name: 'account', namespace: ns },
      spec: {},
    },
    {
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'Workspace',
      metadata: { name: 'default', namespace: ns },
      spec: { default: true },
    },
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'key', namespace: ns }, stringData: { key: payload } },
    {
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'BYOKCredential',
      metadata: { name: 'key', namespace: ns },
      spec: { provider, secretRef: { name: 'key' }, allowedModels },
    },
  ];
}

function folderOf(docs: Record<string, unknown>[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'byok-export-own-'));
  writeFileSync(join(dir, 'account.yaml'), docs.map((d) => stringify(d)).join('---\n'));
  return dir;
}

async function apply(docs: Record<string, unknown>[]): Promise<void> {
  await kubectl(
    'apply',
    '--server-side',
    '--field-manager=byok-export-test',
    '-f',
    join(folderOf(docs), 'account.yaml'),
  );
}

async function backends(ns: string): Promise<Backend[]> {
  return (
    JSON.parse(
      await kubectl('get', 'backends.gateway.envoyproxy.io', '-n', ns, '-l', `${SHARED_LABEL}=true`, '-o', 'json'),
    ) as { items: Backend[] }
  ).items;
}

const exported = (ns: string) =>
  until(
    `${ns}: Exported for its generation`,
    async () => {
      const c = await resource('byokcredentials', ns).get('key');
      const e = cond(c, 'Exported');
      return e && e.observedGeneration === c.metadata.generation ? e : undefined;
    },
    60_000,
  );

describe('export ownership against the real CRDs (envoy-ai-gateway)', () => {
  let out = '';
  let routing = '';
  let victim = '';
  let tenant = '';
  let refused = '';
  let dns = '';
  let op: CapturedOperator | undefined;
  const start = (allowTenantHosts: boolean) =>
    startTestOperator(kc, {
      routingNamespace: routing,
      watchNamespaces: [victim, tenant, refused, dns],
      compile: { coalesceMs: 20 },
      export: {
        target: 'envoy-ai-gateway',
        namespace: out,
        catalog,
        ...(allowTenantHosts ? { allowTenantHosts } : {}),
      },
    });

  beforeAll(async () => {
    await installExportCrds();
    const names = await Promise.all(
      ['own-out', 'own-routing', 'own-bedrock', 'own-twin', 'own-refused', 'own-dns'].map((n) =>
        createTestNamespace(n),
      ),
    );
    [out, routing, victim, tenant, refused, dns] = names as [string, string, string, string, string, string];
    await apply(manifests(victim, 'amazon-bedrock', bedrockIam, ['anthropic/claude-sonnet-4.5']));
    await apply(manifests(tenant, 'azure', azure(TWIN), ['openai/gpt-5']));
    await apply(manifests(refused, 'azure', azure('a_b.example.com'), ['openai/gpt-5']));
    await apply(manifests(dns, 'azure', azure('localtest.me'), ['openai/gpt-5']));
  }, 240_000);
  afterAll(async () => {
    await op?.op.stop();
    writeFileSync(join(tmpdir(), 'export-ownership.log'), op?.logs.join('\n') ?? '');
  });

  test("with tenant hosts allowed: the colliding host gets its own Backend, Bedrock's stays; a_b.example.com fails its credential only; a stale Backend is deleted", async () => {
    op = await start(true);
    for (const ns of [victim, tenant])
      expect({ ns, ...(await exported(ns)) }).toMatchObject({ ns, status: 'True', reason: 'Exported' });
    await exported(refused);
    await op.op.waitForIdle();

    const all = await backends(out);
    const bedrock = all.filter((b) => b.spec.endpoints[0]!.fqdn.hostname === BEDROCK);
    const twin = all.filter((b) => b.spec.endpoints[0]!.fqdn.hostname === TWIN.replace(/\.+$/, ''));
    expect(bedrock).toHaveLength(1);
    expect(twin).toHaveLength(1);
    expect(twin[0]!.metadata.name).not.toBe(bedrock[0]!.metadata.name);
    expect(bedrock[0]!.spec.tls.sni).toBe(BEDROCK);
    expect(all.map((b) => b.metadata.name)).not.toContain(OLD_BEDROCK_NAME);
    // No Backend holds two hosts' names, and the refused host was never written.
    expect(new Set(all.map((b) => b.metadata.name)).size).toBe(all.length);
    expect(JSON.stringify(all)).not.toContain('a_b');
    const bad = await exported(refused);
    expect(bad).toMatchObject({ status: 'False', reason: 'NotExported' });
    expect(bad.message).toContain('a_b.example.com is not an RFC 1123 host name');

    // The tenant's credential goes: its Backend is deleted although a_b.example.com's account still cannot be
    // exported, and Bedrock's Backend is untouched (same resourceVersion).
    await kubectl('delete', 'byokcredential', 'key', '-n', tenant);
    await until(
      "the twin host's Backend deleted",
      async () => !(await backends(out)).some((b) => b.spec.endpoints[0]!.fqdn.hostname === TWIN.replace(/\.+$/, '')),
      60_000,
    );
    const after = (await backends(out)).find((b) => b.spec.endpoints[0]!.fqdn.hostname === BEDROCK);
    expect(after?.metadata).toMatchObject({
      name: bedrock[0]!.metadata.name,
      resourceVersion: bedrock[0]!.metadata.resourceVersion,
    });
    expect(cond(await resource('byokcredentials', refused).get('key'), 'Exported')).toMatchObject({
      status: 'False',
      reason: 'NotExported',
    });
    expect(op.logs.join('\n')).not.toMatch(/canary/i);
  }, 180_000);

  test('without the allow setting: a DNS-name tenant host is not exported, and the condition and the report say why', async () => {
    await op?.op.stop();
    op = await start(false);
    const e = await until(
      'own-dns NotExported',
      async () => {
        const c = cond(await resource('byokcredentials', dns).get('key'), 'Exported');
        return c?.status === 'False' ? c : undefined;
      },
      60_000,
    );
    expect(e).toMatchObject({ reason: 'NotExported' });
    expect(e.message).toContain("the deployment host localtest.me is the tenant's own name");
    expect(e.message).toContain('--export-allow-tenant-hosts');
    await op.op.waitForIdle();
    expect(JSON.stringify(await backends(out))).not.toContain('localtest.me');

    // The command says the same in its report, and with --allow-tenant-hosts writes the host, which the CRD accepts.
    const folder = folderOf(manifests('own-dns', 'azure', azure('localtest.me'), ['openai/gpt-5']));
    const cli = (...args: string[]) =>
      run(
        process.execPath,
        [
          join(repo, 'src', 'cli', 'main.ts'),
          'export',
          '--target',
          'envoy-ai-gateway',
          '--namespace',
          out,
          ...args,
          folder,
        ],
        { encoding: 'utf8' },
      );
    const plain = await cli();
    expect(plain.stdout).not.toContain('localtest.me');
    expect(plain.stderr).toMatch(
      /dropped +host: the deployment host localtest\.me is the tenant's own name.*--allow-tenant-hosts/,
    );
    const allowed = await cli('--allow-tenant-hosts');
    expect(allowed.stdout).toContain('hostname: localtest.me');
    expect(allowed.stderr).toMatch(/approximated +egress: the tenant's host localtest\.me is exported/);
    const file = join(mkdtempSync(join(tmpdir(), 'byok-export-own-apply-')), 'objects.yaml');
    writeFileSync(file, allowed.stdout);
    await kubectl('apply', '--server-side', '--dry-run=server', '--field-manager=byok-export-test', '-f', file);
  }, 180_000);

  test("an existing object with a shared name that is not the export's copy is refused, not overwritten, and the credential says so", async () => {
    await op?.op.stop();
    const other = await createTestNamespace('own-out2');
    // Someone else's Backend, under the name the export gives Bedrock's host.
    const name = tenantName('byok-host', BEDROCK);
    await apply([
      {
        apiVersion: 'gateway.envoyproxy.io/v1alpha1',
        kind: 'Backend',
        metadata: { name, namespace: other },
        spec: { endpoints: [{ fqdn: { hostname: 'platform-owned.example.com', port: 443 } }] },
      },
    ]);
    const planted = JSON.parse(
      await kubectl('get', 'backends.gateway.envoyproxy.io', name, '-n', other, '-o', 'json'),
    ) as Backend;
    op = await startTestOperator(kc, {
      routingNamespace: routing,
      watchNamespaces: [victim],
      compile: { coalesceMs: 20 },
      export: { target: 'envoy-ai-gateway', namespace: other, catalog },
    });
    const e = await until(
      'own-bedrock NotExported',
      async () => {
        const c = cond(await resource('byokcredentials', victim).get('key'), 'Exported');
        return c?.status === 'False' ? c : undefined;
      },
      60_000,
    );
    expect(e.message).toContain(
      `the shared Backend ${name} it uses: an object of that name exists and is not this export's copy of it`,
    );
    await op.op.waitForIdle();
    const after = JSON.parse(
      await kubectl('get', 'backends.gateway.envoyproxy.io', name, '-n', other, '-o', 'json'),
    ) as Backend;
    expect(after.metadata.resourceVersion).toBe(planted.metadata.resourceVersion);
    expect(after.spec.endpoints[0]!.fqdn.hostname).toBe('platform-owned.example.com');
    // The rest of the account is written (its route, its backend, its Secret), and the refusal is an Event on it.
    expect(
      JSON.parse(await kubectl('get', 'aigatewayroutes.aigateway.envoyproxy.io', '-n', other, '-o', 'json')).items
        .length,
    ).toBeGreaterThan(0);
    await until(
      'a Warning Event on the credential',
      async () => {
        const events = JSON.parse(await kubectl('get', 'events.events.k8s.io', '-n', victim, '-o', 'json')) as {
          items: { reason: string; type: string; regarding: { name: string } }[];
        };
        return (
          events.items.some((x) => x.reason === 'NotExported' && x.type === 'Warning' && x.regarding.name === 'key') ||
          undefined
        );
      },
      30_000,
    );
  }, 180_000);
});
