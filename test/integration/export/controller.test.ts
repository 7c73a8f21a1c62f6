// The export controller end to end: the real operator (startOperator with `export`, as `--export-target` sets it)
// over accounts with every payload shape, against a kube-apiserver that has the targets' real CRDs. Its objects are
// real applies, so the CRDs' OpenAPI schemas and CEL rules judge every one; the test checks the derived Secrets, the
// Exported condition, that a change rewrites only its account's objects, clean-up on delete, and that no canary key
// reaches an object (but the derived Secret's data), a condition, an Event or a log line.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { stringify } from 'yaml';
import { derivedSecretName, type ExportTarget } from '../../../src/export/index.ts';
import { loadCatalog } from '../../../src/gateway/catalog.ts';
import { ACCOUNT_LABEL } from '../../../src/operator/export/desired.ts';
import { installExportCrds } from '../../support/export-crds.ts';
import { accountManifests, SHAPES } from '../../support/fixtures/export.ts';
import { createTestNamespace, kubectl, testKubeConfig } from '../../support/kube.ts';
import {
  type CapturedOperator,
  cond,
  metricsText,
  metricValue,
  resource,
  startTestOperator,
} from '../../support/operator.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';

const kc = testKubeConfig();
const repo = join(import.meta.dirname, '..', '..', '..');
const gatewayCatalog = loadCatalog(join(repo, 'config', 'catalog', 'catalog.json'));
const catalog = {
  catalog: gatewayCatalog.catalog,
  upstream: (model: string, endpointId: string) => gatewayCatalog.upstream(model, endpointId),
};

const KINDS: Record<ExportTarget, string> = {
  'envoy-ai-gateway':
    'aigatewayroutes.aigateway.envoyproxy.io,aiservicebackends.aigateway.envoyproxy.io,backendsecuritypolicies.aigateway.envoyproxy.io,backends.gateway.envoyproxy.io,backendtrafficpolicies.gateway.envoyproxy.io',
  agentgateway:
    'agentgatewaybackends.agentgateway.dev,agentgatewaypolicies.agentgateway.dev,httproutes.gateway.networking.k8s.io',
};

interface Item {
  kind: string;
  metadata: { name: string; resourceVersion: string; labels?: Record<string, string> };
  data?: Record<string, string>;
}

async function list(kinds: string, ns: string, selector?: string): Promise<Item[]> {
  const out = await kubectl('get', kinds, '-n', ns, ...(selector ? ['-l', selector] : []), '-o', 'json');
  return (JSON.parse(out) as { items: Item[] }).items;
}

async function applyAccount(ns: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'byok-export-ctl-'));
  const docs = accountManifests(ns, 'none').map((d) => ({
    ...d,
    metadata: { ...(d.metadata as object), namespace: ns },
  }));
  writeFileSync(join(dir, 'account.yaml'), docs.map((d) => stringify(d)).join('---\n'));
  await kubectl('apply', '--server-side', '--field-manager=byok-export-test', '-f', join(dir, 'account.yaml'));
}

const CREDENTIALS = [...SHAPES.map((s) => s.name), 'openai-fallback'];

describe.each(['envoy-ai-gateway', 'agentgateway'] as const)('export controller (%s)', (target) => {
  let a = '';
  let b = '';
  let out = '';
  let run: CapturedOperator;
  let start: () => Promise<CapturedOperator>;

  beforeAll(async () => {
    await installExportCrds();
    a = await createAccountNamespace('exp-a');
    b = await createAccountNamespace('exp-b');
    out = await createTestNamespace('exp-out');
    const routing = await createTestNamespace('exp-routing');
    await applyAccount(a);
    await applyAccount(b);
    start = () =>
      startTestOperator(kc, {
        routingNamespace: routing,
        watchNamespaces: [a, b],
        compile: { coalesceMs: 20 },
        export: { target, namespace: out, catalog },
      });
    run = await start();
  }, 240_000);
  afterAll(async () => {
    await run?.op.stop();
  });

  const exported = (ns: string) =>
    until(
      `${ns}: every credential Exported for its generation`,
      async () => {
        const creds = resource('byokcredentials', ns);
        const all = await Promise.all(CREDENTIALS.map((n) => creds.get(n)));
        return all.every((c) => cond(c, 'Exported')?.observedGeneration === c.metadata.generation) ? all : undefined;
      },
      60_000,
    );

  test('objects and derived Secrets appear in the export namespace, applied for real; each credential says what was dropped', async () => {
    const creds = await exported(a);
    await exported(b);
    const objects = await list(KINDS[target], out, `${ACCOUNT_LABEL}=${a}`);
    expect(objects.length).toBeGreaterThan(3);
    // The shared tier and host Backends (Envoy) are labelled as shared and written once.
    if (target === 'envoy-ai-gateway')
      expect(
        (await list('backends.gateway.envoyproxy.io', out, 'export.byok.gateway.dev/shared=true')).length,
      ).toBeGreaterThan(0);
    const secrets = await list('secrets', out, `${ACCOUNT_LABEL}=${a}`);
    // Plain keys: one Secret each, holding the key as the target reads it.
    const plain = secrets.find((s) => s.metadata.name === derivedSecretName(target, a, 'openai-plain'));
    expect(Buffer.from(plain?.data?.apiKey ?? '', 'base64').toString('utf8')).toBe(SHAPES[0]!.payload);
    // Bedrock IAM in the target's own shape.
    const iam = secrets.find((s) => s.metadata.name === derivedSecretName(target, a, 'bedrock-iam'));
    expect(Object.keys(iam?.data ?? {}).sort()).toEqual(
      target === 'envoy-ai-gateway' ? ['credentials'] : ['accessKey', 'secretKey'],
    );
    for (const c of creds) {
      const e = cond(c, 'Exported')!;
      expect(e).toMatchObject({ status: 'True', reason: 'Exported' });
      expect(e.message).toMatch(/dropped: .*fee.*allowance/);
    }
    // Every Secret an Exported message names exists.
    const named = creds.flatMap((c) => [
      ...(cond(c, 'Exported')!.message.match(/byok-[0-9a-f]{32}-(eaig|agw)/g) ?? []),
    ]);
    expect(named.length).toBeGreaterThan(0);
    for (const n of named) expect(secrets.map((s) => s.metadata.name)).toContain(n);
    // Written under the export's own field manager (the reconciler's status writes and these do not fight).
    const one = JSON.parse(
      await kubectl('get', 'byokcredentials', 'openai-plain', '-n', a, '--show-managed-fields', '-o', 'json'),
    ) as { metadata: { managedFields: { manager: string; subresource?: string; fieldsV1: unknown }[] } };
    const mine = one.metadata.managedFields.filter((f) => f.manager === 'byok-operator-export');
    expect(JSON.stringify(mine.map((f) => f.fieldsV1))).toContain('k:{\\"type\\":\\"Exported\\"}');
  }, 120_000);

  test('a credential change rewrites only its account; deleting a credential and an account removes their objects and Secrets', async () => {
    const before = await list(KINDS[target], out, `${ACCOUNT_LABEL}=${b}`);
    const writes = () => metricsText(run.op).then((t) => metricValue(t, 'byok_export_writes_total', {}));
    const writesBefore = await writes();
    const creds = resource('byokcredentials', a);
    await kubectl(
      'patch',
      'byokcredential',
      'groq-plain',
      '-n',
      a,
      '--type=merge',
      '-p',
      '{"spec":{"isRequired":true}}',
    );
    const changed = await until(
      'groq-plain Exported for its new generation',
      async () => {
        const c = await creds.get('groq-plain');
        return cond(c, 'Exported')?.observedGeneration === c.metadata.generation ? c : undefined;
      },
      60_000,
    );
    expect(cond(changed, 'Exported')?.message).toMatch(/dropped/);
    await run.op.waitForIdle();
    const after = await list(KINDS[target], out, `${ACCOUNT_LABEL}=${b}`);
    expect(after.map((o) => `${o.kind}/${o.metadata.name}@${o.metadata.resourceVersion}`).sort()).toEqual(
      before.map((o) => `${o.kind}/${o.metadata.name}@${o.metadata.resourceVersion}`).sort(),
    );
    const perChange = (await writes()) - writesBefore;
    expect(perChange).toBeGreaterThan(0);
    process.stderr.write(`[export ${target}] writes for one credential change: ${perChange}\n`);

    // One credential goes: its Secret goes, the rest of the account stays.
    const gone = derivedSecretName(target, a, 'bedrock-key');
    expect((await list('secrets', out, `${ACCOUNT_LABEL}=${a}`)).map((s) => s.metadata.name)).toContain(gone);
    await kubectl('delete', 'byokcredential', 'bedrock-key', '-n', a);
    await until(
      "the deleted credential's Secret removed",
      async () => !(await list('secrets', out, `${ACCOUNT_LABEL}=${a}`)).some((s) => s.metadata.name === gone),
      60_000,
    );
    expect((await list(KINDS[target], out, `${ACCOUNT_LABEL}=${a}`)).length).toBeGreaterThan(0);

    // The whole account goes: every object and Secret labelled with it goes.
    await kubectl('delete', 'byokcredentials,workspaces,gatewayapikeys', '--all', '-n', b);
    await until(
      "account b's objects removed",
      async () => (await list(`${KINDS[target]},secrets`, out, `${ACCOUNT_LABEL}=${b}`)).length === 0,
      60_000,
    );
  }, 180_000);

  test("no canary key in any exported object but the derived Secrets' data, nor in a condition, an Event or a log line", async () => {
    const objects = await kubectl('get', KINDS[target], '-n', out, '-o', 'json');
    expect(objects).not.toMatch(/canary/i);
    const secrets = JSON.parse(await kubectl('get', 'secrets', '-n', out, '-o', 'json')) as { items: Item[] };
    for (const s of secrets.items) expect(JSON.stringify({ ...s, data: undefined })).not.toMatch(/canary/i);
    expect(await kubectl('get', 'byokcredentials', '-n', a, '-o', 'json')).not.toMatch(/canary/i);
    for (const ns of [a, b, out]) expect(await kubectl('get', 'events', '-n', ns, '-o', 'json')).not.toMatch(/canary/i);
    expect(run.logs.join('\n')).not.toMatch(/canary/i);
    expect(run.logs.join('\n')).toContain('export controller started');
  });

  test('a restarted operator rewrites nothing unchanged, and removes what an account deleted while it was down left', async () => {
    const versions = async () =>
      (await list(`${KINDS[target]},secrets`, out))
        .filter((o) => o.metadata.labels?.['app.kubernetes.io/managed-by'] === 'byok-operator')
        .map((o) => `${o.kind}/${o.metadata.name}@${o.metadata.resourceVersion}`)
        .sort();
    const before = await versions();
    expect(before.length).toBeGreaterThan(3);
    await run.op.stop();
    run = await start();
    await until(
      "the new operator's export started",
      () => run.logs.some((l) => l.includes('export controller started')),
      60_000,
    );
    await run.op.waitForIdle();
    expect(await versions()).toEqual(before);
    // It did export (a drain ran over every account), and found nothing to write.
    const metrics = await metricsText(run.op);
    expect(metricValue(metrics, 'byok_export_duration_seconds_count', {})).toBeGreaterThan(0);
    expect(metricValue(metrics, 'byok_export_writes_total', { kind: 'apply' })).toBe(0);

    await run.op.stop();
    await kubectl('delete', 'byokcredentials,workspaces,gatewayapikeys', '--all', '-n', a);
    run = await start();
    await until(
      "account a's objects removed after the restart",
      async () => (await list(`${KINDS[target]},secrets`, out, `${ACCOUNT_LABEL}=${a}`)).length === 0,
      60_000,
    );
    expect(run.logs.join('\n')).not.toMatch(/canary/i);
  }, 180_000);
});
