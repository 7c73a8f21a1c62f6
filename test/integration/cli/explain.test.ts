// `byok-operator explain --cluster` on config the real operator compiled: the one catalog by default, the plan,
// the credentials left out of the config with their Ready condition from the cluster, and exit 1 when no
// attempt remains.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { core, createTestNamespace, kubectl, testKubeConfig, testKubeconfigPath } from '../../support/kube.ts';
import { type CapturedOperator, createSecret, resource, startTestOperator } from '../../support/operator.ts';
import { createAccountNamespace } from '../../support/tenant.ts';

const run = promisify(execFile);
const kc = testKubeConfig();
const main = join(import.meta.dirname, '..', '..', '..', 'src', 'cli', 'main.ts');
const GATEWAY_KEY = 'sk-gw-explain-test-key';
const KEY_HASH = createHash('sha256').update(GATEWAY_KEY).digest('hex');

describe('explain against the cluster', () => {
  let ns = '';
  let routing = '';
  let op: CapturedOperator | undefined;
  const configDir = mkdtempSync(join(tmpdir(), 'byok-explain-int-'));

  const explain = (request: object) =>
    run(
      process.execPath,
      [
        main,
        'explain',
        '--config-dir',
        configDir,
        '--request',
        JSON.stringify(request),
        '--cluster',
        '--kubeconfig',
        testKubeconfigPath(),
      ],
      { encoding: 'utf8' },
    ).then(
      (r) => ({ code: 0, stdout: r.stdout }),
      (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
    );

  beforeAll(async () => {
    ns = await createAccountNamespace('explain');
    routing = await createTestNamespace('explain-routing');
    op = await startTestOperator(kc, { routingNamespace: routing, watchNamespaces: [ns] });
    const create = (plural: string, kind: string, name: string, spec: object) =>
      resource(plural, ns).create({ apiVersion: API_VERSION, kind, metadata: { name }, spec });
    await createSecret(kc, ns, 'good-key', 'sk-proj-explainexplainexplain01');
    await create('accounts', 'Account', 'account', { plan: 'enterprise' });
    await create('workspaces', 'Workspace', 'main', { default: true });
    await create('gatewayapikeys', 'GatewayAPIKey', 'gw', { hash: KEY_HASH });
    await create('byokcredentials', 'BYOKCredential', 'good', { provider: 'openai', secretRef: { name: 'good-key' } });
    await create('byokcredentials', 'BYOKCredential', 'nokey', {
      provider: 'openai',
      secretRef: { name: 'missing-key' },
    });
    await resource('byokcredentials', ns).waitReady('good', 'True');
    await resource('byokcredentials', ns).waitReady('nokey', 'False', 'SecretNotFound');
    await op.op.waitForIdle();
    // What kubelet would mount from the routing ConfigMaps.
    const files: Record<string, Buffer> = {};
    for (const cm of (
      await core(kc).listNamespacedConfigMap({ namespace: routing, labelSelector: 'byok.gateway.dev/routing' })
    ).items) {
      for (const [k, v] of Object.entries(cm.data ?? {})) files[k] = Buffer.from(v, 'utf8');
      for (const [k, v] of Object.entries(cm.binaryData ?? {})) files[k] = Buffer.from(v, 'base64');
    }
    kubeletWrite(configDir, files);
  }, 60_000);
  afterAll(async () => {
    await op?.op.stop();
  });

  test('plans with the one catalog and says why a credential is not compiled', async () => {
    const { code, stdout } = await explain({ model: 'openai/gpt-5', apiKeyHash: KEY_HASH });
    expect(code).toBe(0);
    expect(stdout).toContain(`account ${ns}, `);
    // The one catalog, named on the first line (the same file the gateway and the dev stack use by default).
    expect(stdout.split('\n')[0]).toBe(
      `catalog: ${join(import.meta.dirname, '..', '..', '..', 'config', 'catalog', 'catalog.json')}`,
    );
    expect(stdout).toMatch(/1\. credential good \(openai, [^)]+\) via openai \[prioritized\]/);
    expect(stdout).toMatch(/shared azure/);
    expect(stdout).toContain(`not in the routing config (cluster, namespace ${ns}):`);
    expect(stdout).toMatch(/- credential nokey \(openai\): Ready=False SecretNotFound: /);
    expect(stdout).not.toMatch(/- credential good /);
  });

  test('the workspace id explain prints is the ID column of kubectl get byokws -o wide', async () => {
    const { stdout } = await explain({ model: 'openai/gpt-5', apiKeyHash: KEY_HASH });
    const id = /workspace ([0-9a-f-]{36}),/.exec(stdout)?.[1];
    expect(id).toBeDefined();
    // Columns are read by position: an empty Display Name leaves a gap that splitting on spaces would skip.
    const [header, row] = (await kubectl('get', 'byokws', 'main', '-n', ns, '-o', 'wide')).split('\n');
    const at = header!.search(/\bID\b/);
    expect(row!.slice(at, at + 36)).toBe(id);
  });

  test("a bare model name gets the gateway's hint, from the same function", async () => {
    const { code, stdout } = await explain({ model: 'gpt-5', apiKeyHash: KEY_HASH });
    expect(code).toBe(1);
    expect(stdout).toContain(
      'error: model_not_in_catalog: the model has no endpoints in the gateway catalog; did you mean "openai/gpt-5"?',
    );
  });

  test('exits 1 when no attempt remains', async () => {
    const { code, stdout } = await explain({ model: 'openai/gpt-5', apiKeyHash: KEY_HASH, providerOnly: ['groq'] });
    expect(stdout).toContain('(none: the request would fail)');
    expect(code).toBe(1);
  });
});
