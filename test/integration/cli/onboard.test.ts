// docs/guide/onboard-a-team.md, as written, against a real `npm run dev` stack: every `<!-- snippet: run -->` block
// of the page runs in order with bash (-euo pipefail), the way test/integration/docs/snippets.test.ts runs the
// README's (same environment: HOME empty, KUBECONFIG unset, `.dev/` read as the stack's own directory). Then what
// the page promises is checked beyond exit 0: the key reached the Secret and only its hash the cluster, the first
// call went to the team's own credential, and `gpt-5` got its did-you-mean. A key without a usable workspace is
// Ready=False NoWorkspace, the gateway answers it 403, and a default Workspace made later makes it Ready.
import { type ChildProcess, execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { DevConnection } from '../../../src/cli/dev.ts';
import { readerEnv, repoRoot, startDevStack, stopDevStack, waitFor } from '../../support/dev-stack.ts';

const run = promisify(execFile);
const PAGE = 'docs/guide/onboard-a-team.md';

interface Snippet {
  line: number;
  text: string;
  expect: string | undefined;
}

/** The page's marked shell blocks, in order (the marker grammar of the docs-snippet test). */
function snippets(): Snippet[] {
  const lines = readFileSync(join(repoRoot, PAGE), 'utf8').split('\n');
  const out: Snippet[] = [];
  for (let i = 1; i < lines.length; i++) {
    const m = /^<!-- snippet: run(.*?)-->$/.exec(lines[i - 1]!.trim());
    if (!m || !lines[i]!.startsWith('```')) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    out.push({ line: i + 1, text: lines.slice(i + 1, end).join('\n'), expect: /expect="([^"]*)"/.exec(m[1]!)?.[1] });
  }
  return out;
}

describe(`${PAGE} against the dev stack`, () => {
  let child: ChildProcess;
  let devDir: string;
  let connection: DevConnection;
  let env: NodeJS.ProcessEnv;
  const outputs: string[] = [];
  const kubectl = async (...args: string[]) =>
    (await run('kubectl', ['--kubeconfig', connection.kubeconfig, ...args], { env, encoding: 'utf8' })).stdout;
  const getJson = async <T>(...args: string[]) => JSON.parse(await kubectl('get', ...args, '-o', 'json')) as T;

  /** The no-workspace case, start to end, asserting each step as it comes (run beside the page's blocks). */
  const noWorkspaceCase = async (): Promise<void> => {
    const ns = 'team-noworkspace';
    await run(
      'bash',
      [
        '-euo',
        'pipefail',
        '-c',
        `kubectl create namespace ${ns} && kubectl apply -n ${ns} -f - <<'EOF'
apiVersion: byok.gateway.dev/v1alpha1
kind: Account
metadata: { name: ${ns} }
spec: { plan: pay-as-you-go }
EOF`,
      ],
      { env: { ...env, KUBECONFIG: connection.kubeconfig }, encoding: 'utf8' },
    );
    const created = await run(
      process.execPath,
      [
        join(repoRoot, 'src', 'cli', 'main.ts'),
        'gateway-key',
        'create',
        '--namespace',
        ns,
        '--name',
        'orphan',
        '--kubeconfig',
        connection.kubeconfig,
      ],
      { env, encoding: 'utf8' },
    );
    const key = created.stdout.trim();
    expect(created.stderr).toMatch(/warning: namespace team-noworkspace has no default Workspace/);
    const ready = async () =>
      (
        await getJson<{
          status?: { conditions?: { type: string; status: string; reason: string; message: string }[] };
        }>('gatewayapikey', 'orphan', '-n', ns)
      ).status?.conditions?.find((c) => c.type === 'Ready');
    const refused = await waitFor(
      'NoWorkspace',
      async () => ((await ready())?.reason === 'NoWorkspace' ? ready() : undefined),
      30_000,
    );
    expect(refused).toMatchObject({ status: 'False', reason: 'NoWorkspace' });
    expect(refused!.message).toContain('spec.default: true');

    const call = () =>
      fetch(`${connection.gatewayBaseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-5', messages: [{ role: 'user', content: 'hi' }] }),
      });
    // The gateway has the key once the routing config with it is delivered: then it refuses it for the workspace.
    const status = await waitFor(
      'a 403 for the key',
      async () => ((await call()).status === 403 ? 403 : undefined),
      30_000,
    );
    expect(status).toBe(403);

    await run(
      'bash',
      [
        '-euo',
        'pipefail',
        '-c',
        `kubectl apply -n ${ns} -f - <<'EOF'
apiVersion: byok.gateway.dev/v1alpha1
kind: Workspace
metadata: { name: default }
spec: { default: true }
EOF`,
      ],
      { env: { ...env, KUBECONFIG: connection.kubeconfig }, encoding: 'utf8' },
    );
    await waitFor('Ready=True', async () => ((await ready())?.status === 'True' ? true : undefined), 30_000);
    await waitFor(
      'the gateway to take the key',
      async () => ((await call()).status !== 403 ? true : undefined),
      30_000,
    );
  };
  let noWorkspace: Promise<void>;

  beforeAll(async () => {
    ({ child, devDir, connection } = await startDevStack('byok-onboard-dev-'));
    env = readerEnv({ devDir, connection }, mkdtempSync(join(tmpdir(), 'byok-onboard-home-')));
    noWorkspace = noWorkspaceCase();
    // Its test awaits it and reports its failure; this only keeps an early failure from counting as unhandled.
    noWorkspace.catch(() => undefined);
  }, 90_000);

  afterAll(async () => {
    await stopDevStack(child);
  }, 30_000);

  test('every marked block runs as printed, in order, and exits 0', async () => {
    const blocks = snippets();
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    for (const s of blocks) {
      const script = s.text.replaceAll('.dev/connection.json', join(devDir, 'connection.json'));
      try {
        const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], {
          cwd: repoRoot,
          env,
          encoding: 'utf8',
          timeout: 90_000,
          maxBuffer: 16 << 20,
        });
        outputs.push(stdout);
        if (s.expect !== undefined) expect(`${PAGE}:${s.line}\n${stdout}`).toContain(s.expect);
      } catch (err) {
        const e = err as { code?: number; stdout?: string; stderr?: string };
        throw new Error(
          `${PAGE}:${s.line}: exit ${e.code ?? '?'}\n--- stdout\n${e.stdout ?? ''}\n--- stderr\n${e.stderr ?? ''}`,
        );
      }
    }
  }, 300_000);

  test('what the page promises: only the hash in the cluster, the team credential first, a did-you-mean for gpt-5', async () => {
    const secret = await getJson<{ data: Record<string, string> }>(
      'secret',
      'checkout-gateway-key',
      '-n',
      'team-checkout',
    );
    const key = Buffer.from(secret.data.OPENAI_API_KEY!, 'base64').toString('utf8').trim();
    expect(key).toMatch(/^sk-byok-gw-v1-[0-9a-f]{64}$/);
    const gwkey = await getJson<{ spec: { hash: string; workspace?: string } }>(
      'gatewayapikey',
      'checkout-app',
      '-n',
      'team-checkout',
    );
    expect(gwkey.spec.hash).toBe(createHash('sha256').update(key).digest('hex'));
    expect(gwkey.spec.workspace).toBeUndefined();
    for (const out of outputs) expect(out).not.toContain(key);

    const first = outputs.find((o) => o.includes('provider_responses'))!;
    // The block waits for the key's Delivered first (kubectl prints "condition met"), then the answer's JSON.
    const answer = JSON.parse(first.slice(first.indexOf('{'))) as { provider_responses: { credential: string }[] };
    // The team's own credential, not the gateway's shared capacity.
    expect(answer.provider_responses[0]!.credential).not.toBe('shared');

    const wrong = JSON.parse(outputs.find((o) => o.includes('did you mean'))!) as {
      error: { code: number; message: string };
    };
    expect(wrong.error.code).toBe(400);
    expect(wrong.error.message).toMatch(/^model_not_in_catalog: .*; did you mean "openai\/gpt-5"\?$/);
  }, 60_000);

  test('a key with no usable workspace is Ready=False NoWorkspace and refused 403; a default Workspace made later fixes both', async () => {
    await noWorkspace;
  }, 120_000);
});
