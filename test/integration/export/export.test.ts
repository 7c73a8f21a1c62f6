// The export against the targets' real schemas: the CRDs of Envoy AI Gateway and agentgateway (unmodified, at
// pinned commits: hack/export/fetch-third-party.sh) and of Envoy Gateway and the Gateway API (from their Go modules, hack/export/fetch-crds.sh)
// are installed into the test kube-apiserver, and every object `byok-operator export` writes, for every payload
// shape and every flag combination, is applied with server-side dry run: the OpenAPI schemas and CEL rules of the
// CRDs judge it. The CLI runs as users run it (a child process on the folder).
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { parseAllDocuments, stringify } from 'yaml';
import { installExportCrds } from '../../support/export-crds.ts';
import { accountManifests, allShapesFolder, FLAG_SETS, SHAPES, serviceAccount } from '../../support/fixtures/export.ts';
import { createTestNamespace, kubectl, testKubeconfigPath } from '../../support/kube.ts';
import { createAccount, createAccountNamespace } from '../../support/tenant.ts';

const run = promisify(execFile);
const repo = join(import.meta.dirname, '..', '..', '..');
const main = join(repo, 'src', 'cli', 'main.ts');

const cli = (...args: string[]) =>
  run(process.execPath, [main, 'export', ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });

/** Server-side dry-run apply of a YAML stream; returns kubectl's lines (one per object). */
async function dryRun(yamlText: string): Promise<string[]> {
  const file = join(mkdtempSync(join(tmpdir(), 'byok-export-apply-')), 'objects.yaml');
  writeFileSync(file, yamlText);
  const out = await kubectl(
    'apply',
    '--server-side',
    '--dry-run=server',
    '--field-manager=byok-export-test',
    '-f',
    file,
  );
  return out.trim().split('\n');
}

const kinds = (yamlText: string): string[] =>
  parseAllDocuments(yamlText).map((d) => (d.toJS() as { kind: string }).kind);

describe('byok-operator export against the real CRDs', () => {
  let ns: string;
  let folder: string;
  beforeAll(async () => {
    await installExportCrds();
    ns = await createTestNamespace('export');
    folder = allShapesFolder();
  }, 180_000);

  test.each([
    ['envoy-ai-gateway', 'static'],
    ['agentgateway', 'static'],
    ['envoy-ai-gateway', 'per-request'],
  ])(
    '%s (%s): every object of every payload shape and flag combination passes server-side validation',
    async (target, mode) => {
      const { stdout, stderr } = await cli(
        '--target',
        target,
        ...(mode === 'per-request' ? ['--per-request'] : []),
        '--namespace',
        ns,
        folder,
      );
      const objects = kinds(stdout);
      expect(objects.length).toBeGreaterThan(20);
      const applied = await dryRun(stdout);
      expect(applied).toHaveLength(objects.length);
      for (const line of applied) expect(line).toMatch(/(serverside-applied|created|configured) \(server dry run\)$/);
      // Key material never reaches either stream.
      expect(`${stdout}${stderr}`).not.toMatch(/canary/i);
      // Every credential of every account is in the report, each with its semantics.
      for (const flags of Object.keys(FLAG_SETS)) {
        expect(stderr).toContain(`account flags-${flags}:`);
      }
      for (const s of SHAPES)
        expect(stderr.split(`credential ${s.name} (${s.provider})`).length - 1).toBe(Object.keys(FLAG_SETS).length);
      expect(stderr).toMatch(/(dropped|approximated) +allowed_api_key_hashes/);
      expect(stderr).toMatch(/(dropped|approximated) +allowed_user_ids/);
      expect(stderr).toMatch(/kept +is_byok_only/);
      expect(stderr).toMatch(/kept +is_required/);
    },
    180_000,
  );

  test('each target gets every kind of its object graph, and a bad object is refused by the same check', async () => {
    const { stdout } = await cli('--target', 'envoy-ai-gateway', '--namespace', ns, folder);
    expect(new Set(kinds(stdout))).toEqual(
      new Set(['Backend', 'AIServiceBackend', 'BackendSecurityPolicy', 'AIGatewayRoute', 'BackendTrafficPolicy']),
    );
    const agentgateway = await cli('--target', 'agentgateway', '--namespace', ns, folder);
    expect(new Set(kinds(agentgateway.stdout))).toEqual(
      new Set(['AgentgatewayBackend', 'HTTPRoute', 'AgentgatewayPolicy']),
    );
    // The dry run is a real check: a security policy of type APIKey without its apiKey block is refused by CEL.
    const broken = stdout.replace(/type: APIKey\n {2}apiKey:\n {4}secretRef:\n {6}name: [^\n]+\n/, 'type: APIKey\n');
    expect(broken).not.toBe(stdout);
    await expect(dryRun(broken)).rejects.toThrow(/apiKey|Invalid value/);
  }, 120_000);

  test('--cluster reads the same account from the apiserver (resources and Secrets) and exports the same objects', async () => {
    const account = await createAccountNamespace('export-src');
    const manifests = accountManifests(account, 'required')
      .map((d) => stringify(d))
      .join('---\n');
    const dir = mkdtempSync(join(tmpdir(), 'byok-export-cluster-'));
    writeFileSync(join(dir, 'account.yaml'), manifests);
    await kubectl('apply', '--server-side', '--field-manager=byok-export-test', '-f', join(dir, 'account.yaml'));
    const fromFolder = await cli('--target', 'envoy-ai-gateway', '--namespace', ns, dir);
    const fromCluster = await cli(
      '--target',
      'envoy-ai-gateway',
      '--namespace',
      ns,
      '--cluster',
      '--kubeconfig',
      testKubeconfigPath(),
      '--account',
      account,
    );
    expect(fromCluster.stdout).toBe(fromFolder.stdout);
    expect(fromCluster.stderr).toContain(`kubeconfig: ${testKubeconfigPath()} (--kubeconfig)`);
    expect(fromCluster.stderr).toContain(`account ${account}:`);
    expect(`${fromCluster.stdout}${fromCluster.stderr}`).not.toMatch(/canary/i);
    expect((await dryRun(fromCluster.stdout)).length).toBe(kinds(fromCluster.stdout).length);
  }, 120_000);

  test('--cluster follows the Account gate: a namespace without an Account exports nothing and each credential says AccountMissing', async () => {
    const bare = await createTestNamespace('export-no-account');
    const dir = mkdtempSync(join(tmpdir(), 'byok-export-gate-'));
    const docs = accountManifests(bare, 'required');
    writeFileSync(join(dir, 'account.yaml'), docs.map((d) => stringify(d)).join('---\n'));
    await kubectl('apply', '--server-side', '--field-manager=byok-export-test', '-f', join(dir, 'account.yaml'));
    const args = [
      '--target',
      'envoy-ai-gateway',
      '--namespace',
      ns,
      '--cluster',
      '--kubeconfig',
      testKubeconfigPath(),
      '--account',
      bare,
    ];
    const refused = await cli(...args).then(
      () => undefined,
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused!.stderr).toContain(`no account with a credential to export (namespace ${bare})`);
    const credentials = docs
      .filter((d) => d.kind === 'BYOKCredential')
      .map((d) => (d.metadata as { name: string }).name);
    expect(credentials.length).toBeGreaterThan(0);
    for (const name of credentials) expect(refused!.stderr).toContain(`${bare}/${name} `);
    expect(refused!.stderr.match(/: AccountMissing: namespace \S+ has no Account: .*create an Account/g)).toHaveLength(
      credentials.length,
    );
    // The folder it came from is read as it is; with the Account in the cluster the same objects come out.
    await createAccount(bare);
    const fromCluster = await cli(...args);
    expect(fromCluster.stdout).toBe((await cli('--target', 'envoy-ai-gateway', '--namespace', ns, dir)).stdout);
  }, 120_000);

  test('a model with no attempt left keeps its rule with no backend, and both targets accept it', async () => {
    // is_byok_only on a Vertex key limited to Claude: gemini-2.5-pro has only Vertex endpoints, so nothing remains.
    const account = 'no-attempt';
    const docs = [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'vertex', namespace: account },
        stringData: { key: JSON.stringify(serviceAccount('team-x')) },
      },
      {
        apiVersion: 'byok.gateway.dev/v1alpha1',
        kind: 'BYOKCredential',
        metadata: { name: 'vertex', namespace: account },
        spec: {
          provider: 'google-vertex',
          secretRef: { name: 'vertex' },
          isByokOnly: true,
          allowedModels: ['anthropic/claude-sonnet-4.5'],
        },
      },
    ];
    const dir = mkdtempSync(join(tmpdir(), 'byok-export-none-'));
    writeFileSync(join(dir, 'account.yaml'), docs.map((d) => stringify(d)).join('---\n'));
    for (const target of ['envoy-ai-gateway', 'agentgateway']) {
      const { stdout, stderr } = await cli('--target', target, '--namespace', ns, dir);
      expect(stderr).toContain('google/gemini-2.5-pro: no attempt remains');
      expect(stdout).toContain('value: google/gemini-2.5-pro');
      expect((await dryRun(stdout)).length).toBe(kinds(stdout).length);
    }
  }, 120_000);
});
