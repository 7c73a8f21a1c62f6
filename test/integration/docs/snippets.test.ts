// The docs, as written, against the dev stack: every shell snippet in README.md, docs/*.md and docs/guide/*.md marked
// `<!-- snippet: run -->` runs with bash (-euo pipefail) against a real `npm run dev` stack and must exit 0 (and print
// `expect="..."` when the marker declares it); every console sample marked `<!-- snippet: columns -->` has the
// column headers the real `kubectl get` prints today (`columns rows` also compares each sample row's values, except
// those that change with time or traffic). Unmarked shell and console blocks must be listed below with the reason they
// cannot run here, so a new snippet is either tested or knowingly left out.
//
// How snippets run: cwd is the repository root, PATH has Node 24, node_modules/.bin and the Go-built kubectl and helm;
// HOME is an empty directory (no ~/.kube) and KUBECONFIG is unset, so a snippet reaches the cluster only the way a
// reader would, through `.dev/connection.json`. The dev stack writes that file into a directory of its own
// (BYOK_DEV_DIR, as test/integration/dev/dev.test.ts does), so `.dev/` in a snippet is read as that directory.
//
// Pages run in that order (the guide's in file-name order), all on one stack: a page that changes the sample account
// `acme` (the guide's rotation and budget pages do) runs after the README's and the reference pages' snippets, and
// after the kubectl samples have been compared with the stack as `npm run dev` left it.
// Snippets that neither change nor read the sample account (server-side dry runs of the chart, the listing of what an
// uninstall leaves, offline validation) run alongside that chain, in their own order (listed in ALONGSIDE with the
// reason; a stale entry fails): the chain waits for the operator's health and delivery passes, and these need not
// wait behind it.
// docs/guide/onboard-a-team.md runs on the same stack in a lane of its own, in order, from the moment the stack is up:
// it works in a namespace of its own (team-checkout) and never reads or changes `acme`. Then what the page promises is
// checked beyond exit 0: the key reached the Secret and only its hash the cluster, the first call went to the team's
// own credential, and `gpt-5` got its did-you-mean. A key without a usable workspace is Ready=False NoWorkspace, the
// gateway answers it 403, and a default Workspace made later makes it Ready; that case, in a namespace of its own
// too (team-noworkspace), also runs from the start, asserting each step as it comes, and its test waits for it.
//
// Not run here (listed in UNRUNNABLE):
// - README.md `npm run dev` / `npm test`: the first is the stack this test starts, the second the whole suite.
// - docs/gateway.md `byok-operator gateway` synopsis: a usage line with [optional] arguments, not a command.
// - docs/guide/quickstart.md `npm run dev` and `helm upgrade --install`: the stack this test starts; a real cluster.
// - docs/guide/upgrade-and-uninstall.md install (`helm upgrade --install`, `hack/kind-up.sh`: Docker and kind),
//   upgrade, uninstall and removal: they change a real cluster (the page has marked dry runs of the install and the
//   upgrade and a marked listing of what stays, which run here).
// - docs/install.md: building and pushing the image, installing on a real cluster, and the e2e run that does both
//   (test/e2e/run.ts runs that page's commands on a one-node cluster with a real kubelet).
import { type ChildProcess, execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { DevConnection } from '../../../src/cli/dev.ts';
import { readerEnv, repoRoot, startDevStack, stopDevStack } from '../../support/dev-stack.ts';
import { until } from '../../support/until.ts';

const run = promisify(execFile);
const markdownIn = (dir: string) =>
  readdirSync(join(repoRoot, dir))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `${dir}/${f}`);
/** Run in a lane of its own, with its own checks of what its blocks did (below). */
const ONBOARD = 'docs/guide/onboard-a-team.md';
const DOCS = ['README.md', ...markdownIn('docs'), ...markdownIn('docs/guide').filter((f) => f !== ONBOARD)];
const SHELL_INFO = new Set(['sh', 'bash', 'shell', 'console']);

/** Unmarked shell/console blocks that cannot run here: file and the block's first line. */
const UNRUNNABLE: readonly { file: string; firstLine: string; why: string }[] = [
  {
    file: 'README.md',
    firstLine: 'npm run dev     # local control plane',
    why: 'the stack this test starts; npm test is the whole suite',
  },
  { file: 'docs/gateway.md', firstLine: 'byok-operator gateway \\', why: 'a usage synopsis' },
  { file: 'docs/install.md', firstLine: 'docker build', why: 'an image build and a registry' },
  { file: 'docs/install.md', firstLine: 'hack/image/build.sh', why: 'an image build (podman) and a containerd node' },
  { file: 'docs/install.md', firstLine: 'podman build', why: 'an image build (podman) and a kind cluster' },
  {
    file: 'docs/install.md',
    firstLine: 'kubectl create namespace byok-system',
    why: 'a real cluster that runs the image (test/e2e/run.ts)',
  },
  {
    file: 'docs/install.md',
    firstLine: 'kubectl rollout status -n byok-system',
    why: 'a real cluster that runs the image (test/e2e/run.ts)',
  },
  { file: 'docs/install.md', firstLine: 'npm run e2e', why: 'the end-to-end run: a node from parts, a real kubelet' },
  { file: 'docs/guide/quickstart.md', firstLine: 'npm run dev', why: 'the stack this test starts' },
  {
    file: 'docs/guide/quickstart.md',
    firstLine: 'helm upgrade --install byok charts/byok-operator',
    why: 'a real cluster that runs the image',
  },
  {
    file: 'docs/guide/upgrade-and-uninstall.md',
    firstLine: 'helm upgrade --install byok charts/byok-operator',
    why: 'a real cluster that runs the image',
  },
  { file: 'docs/guide/upgrade-and-uninstall.md', firstLine: 'hack/kind-up.sh', why: 'Docker and kind' },
  {
    file: 'docs/guide/upgrade-and-uninstall.md',
    firstLine: 'kubectl apply --server-side --force-conflicts -f charts/byok-operator/crds/',
    why: "upgrades a real release (the page's marked rehearsal runs its dry run)",
  },
  { file: 'docs/guide/upgrade-and-uninstall.md', firstLine: 'helm uninstall byok', why: 'removes a real release' },
  {
    file: 'docs/guide/upgrade-and-uninstall.md',
    firstLine: 'kubectl delete configmaps,secrets -n byok-system',
    why: 'deletes the routing config and the CRDs the stack runs on',
  },
];

/**
 * Marked snippets that run alongside the chain of the others: they change nothing a later snippet of the chain reads
 * (the APIService's Helm metadata is read only by the next snippet of its own page and by dry runs that leave the
 * APIService out) and read nothing the chain changes. File and the block's first line.
 */
const ALONGSIDE: readonly { file: string; opening: string; why: string }[] = [
  {
    file: 'docs/aggregated-api.md',
    opening: 'export KUBECONFIG=$(jq -r .kubeconfig .dev/connection.json)   # here',
    why: 'a server-side dry run of the chart',
  },
  {
    file: 'docs/aggregated-api.md',
    opening: 'export KUBECONFIG=$(jq -r .kubeconfig .dev/connection.json)\nkubectl annotate apiservice',
    why: "the APIService's Helm metadata, then a server-side dry run",
  },
  {
    file: 'docs/guide/upgrade-and-uninstall.md',
    opening:
      'export KUBECONFIG=$(jq -r .kubeconfig .dev/connection.json)\nexport PATH="$(jq -r .binDir .dev/connection.json):$PATH"\nhelm template',
    why: 'a render and server-side dry runs that leave the APIService out',
  },
  {
    file: 'docs/guide/upgrade-and-uninstall.md',
    opening:
      'export KUBECONFIG=$(jq -r .kubeconfig .dev/connection.json)\nexport PATH="$(jq -r .binDir .dev/connection.json):$PATH"\nkubectl apply --server-side --force-conflicts --dry-run=server',
    why: 'server-side dry runs that leave the APIService out',
  },
  {
    file: 'docs/guide/upgrade-and-uninstall.md',
    opening:
      'export KUBECONFIG=$(jq -r .kubeconfig .dev/connection.json)\nexport PATH="$(jq -r .binDir .dev/connection.json):$PATH"\nkubectl get configmaps,secrets',
    why: 'lists the routing objects and management keys, which every earlier state has',
  },
  { file: 'docs/guide/quickstart.md', opening: 'npm run cli -- validate', why: 'offline validation of files' },
];

interface Block {
  file: string;
  line: number;
  info: string;
  text: string;
  marker: { kind: 'run'; expect?: string } | { kind: 'columns'; rows: boolean } | undefined;
}

function blocks(file: string): Block[] {
  const lines = readFileSync(join(repoRoot, file), 'utf8').split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    const prev = i > 0 ? lines[i - 1]!.trim() : '';
    const m = /^<!-- snippet: (run|columns)(.*?)-->$/.exec(prev);
    const expected = m ? /expect="([^"]*)"/.exec(m[2]!)?.[1] : undefined;
    const marker: Block['marker'] = !m
      ? undefined
      : m[1] === 'run'
        ? { kind: 'run', ...(expected !== undefined ? { expect: expected } : {}) }
        : { kind: 'columns', rows: /\brows\b/.test(m[2]!) };
    out.push({ file, line: i + 1, info: open[1]!, text: lines.slice(i + 1, end).join('\n'), marker });
    i = end;
  }
  return out;
}

const columnsOf = (line: string) => line.trim().split(/\s{2,}/);
/** Values that move with time or with traffic through the gateway. */
const VOLATILE = new Set(['AGE', 'LAST USED', 'UPSTREAM', 'DELIVERED']);

describe('docs snippets against the dev stack', () => {
  const all = DOCS.flatMap(blocks);
  let child: ChildProcess;
  let devDir: string;
  let home: string;
  let connection: DevConnection;
  let env: NodeJS.ProcessEnv;

  const kubectl = async (...args: string[]) =>
    (await run('kubectl', ['--kubeconfig', connection.kubeconfig, ...args], { env, encoding: 'utf8' })).stdout;
  const getJson = async <T>(...args: string[]) => JSON.parse(await kubectl('get', ...args, '-o', 'json')) as T;

  /** What each of the onboarding page's blocks printed, in order. */
  const onboardOutputs: string[] = [];
  /** The onboarding page's marked blocks, one after the other; the first that fails (or lacks its expect) stops it. */
  const runOnboardPage = async (): Promise<void> => {
    const pageBlocks = blocks(ONBOARD).filter((b) => b.marker?.kind === 'run');
    expect(pageBlocks.length).toBeGreaterThanOrEqual(5);
    for (const s of pageBlocks) {
      const script = s.text.replaceAll('.dev/connection.json', join(devDir, 'connection.json'));
      const expected = s.marker?.kind === 'run' ? s.marker.expect : undefined;
      try {
        const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], {
          cwd: repoRoot,
          env,
          encoding: 'utf8',
          timeout: 90_000,
          maxBuffer: 16 << 20,
        });
        onboardOutputs.push(stdout);
        if (expected !== undefined) expect(`${ONBOARD}:${s.line}\n${stdout}`).toContain(expected);
      } catch (err) {
        const e = err as { code?: number; stdout?: string; stderr?: string };
        if (e.code === undefined && e.stdout === undefined) throw err;
        throw new Error(
          `${ONBOARD}:${s.line}: exit ${e.code ?? '?'}\n--- stdout\n${e.stdout ?? ''}\n--- stderr\n${e.stderr ?? ''}`,
        );
      }
    }
  };
  let onboardPage: Promise<void>;

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
    const refused = await until(
      'NoWorkspace',
      async () => ((await ready())?.reason === 'NoWorkspace' ? ready() : undefined),
      30_000,
      100,
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
    const status = await until(
      'a 403 for the key',
      async () => ((await call()).status === 403 ? 403 : undefined),
      30_000,
      100,
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
    await until('Ready=True', async () => ((await ready())?.status === 'True' ? true : undefined), 30_000, 100);
    await until(
      'the gateway to take the key',
      async () => ((await call()).status !== 403 ? true : undefined),
      30_000,
      100,
    );
  };
  let noWorkspace: Promise<void>;

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'byok-docs-home-'));
    ({ child, devDir, connection } = await startDevStack('byok-docs-dev-'));
    env = readerEnv({ devDir, connection }, home);
    onboardPage = runOnboardPage();
    noWorkspace = noWorkspaceCase();
    // Their tests await them and report their failures; this only keeps an early failure from counting as unhandled.
    onboardPage.catch(() => undefined);
    noWorkspace.catch(() => undefined);
  }, 180_000);

  afterAll(async () => {
    await stopDevStack(child);
  }, 30_000);

  test('no snippet redirects output into a file of the working directory (a reader runs them from the repository root)', () => {
    const redirects = all
      .filter((b) => SHELL_INFO.has(b.info))
      .flatMap((b) =>
        [...b.text.matchAll(/(?:^|\s)>>?\s*([\w.-][\w./-]*)(?=\s|$)/gm)].map((m) => `${b.file}:${b.line}: > ${m[1]!}`),
      );
    expect(redirects).toEqual([]);
  });

  test('every shell and console block is marked, or listed with the reason it cannot run here', () => {
    const unmarked = all
      .filter((b) => SHELL_INFO.has(b.info) && !b.marker)
      .map((b) => ({ file: b.file, firstLine: b.text.split('\n')[0]! }));
    const listed = (u: { file: string; firstLine: string }) =>
      UNRUNNABLE.some((x) => x.file === u.file && u.firstLine.startsWith(x.firstLine));
    expect(unmarked.filter((u) => !listed(u))).toEqual([]);
    // And the list holds no stale entries.
    expect(
      UNRUNNABLE.filter((x) => !unmarked.some((u) => u.file === x.file && u.firstLine.startsWith(x.firstLine))),
    ).toEqual([]);
  });

  // Before any snippet changes the sample account: the samples show the stack as `npm run dev` leaves it.
  test("marked kubectl samples have today's columns (and, where marked, today's values)", async () => {
    const samples = all.filter((b) => b.marker?.kind === 'columns');
    const problems: string[] = [];
    let checked = 0;
    for (const s of samples) {
      const lines = s.text.split('\n');
      for (let i = 0; i < lines.length; i++) {
        const cmd = /^\$ (kubectl get [^#]*?)\s*(#.*)?$/.exec(lines[i]!);
        const header = lines[i + 1];
        if (!cmd || !header || !/^[A-Z][A-Z ]+$/.test(header.trim())) continue;
        const args = cmd[1]!.split(/\s+/).slice(1);
        const { stdout } = await run('kubectl', ['--kubeconfig', connection.kubeconfig, ...args], {
          env,
          encoding: 'utf8',
        });
        const actual = stdout.trimEnd().split('\n');
        checked++;
        if (columnsOf(header).join(' | ') !== columnsOf(actual[0]!).join(' | ')) {
          problems.push(
            `${s.file}:${s.line + 1 + i}: ${cmd[1]} prints\n  ${actual[0]}\nbut the sample shows\n  ${header}`,
          );
          continue;
        }
        if (s.marker?.kind !== 'columns' || !s.marker.rows) continue;
        const names = columnsOf(header);
        // Sample rows: up to the next command. Cells are cut at the header's column starts (values may be empty).
        const starts = names.map((n) => header.indexOf(n));
        const cells = (row: string) => starts.map((at, k) => row.slice(at, starts[k + 1] ?? row.length).trim());
        for (const row of lines.slice(i + 2)) {
          if (row.startsWith('$')) break;
          const want = cells(row);
          const actualStarts = columnsOf(actual[0]!).map((n) => actual[0]!.indexOf(n));
          const got = actual
            .slice(1)
            .map((r) => actualStarts.map((at, k) => r.slice(at, actualStarts[k + 1] ?? r.length).trim()))
            .find((r) => r[0] === want[0]);
          if (!got) {
            problems.push(`${s.file}: ${cmd[1]} lists no ${want[0]}`);
            continue;
          }
          names.forEach((n, k) => {
            if (!VOLATILE.has(n) && want[k] !== got[k])
              problems.push(`${s.file}: ${want[0]} ${n} is ${got[k]}, the sample shows ${want[k]}`);
          });
        }
      }
    }
    process.stderr.write(`docs kubectl samples: ${checked} checked\n`);
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThanOrEqual(2);
  }, 60_000);

  test("the problem the APIService docs solve: a plain helm install --dry-run=server stops at the dev stack's APIService", async () => {
    const helm = run(
      'helm',
      [
        'install',
        'byok',
        join(repoRoot, 'charts', 'byok-operator'),
        '-n',
        'byok-system',
        '--dry-run=server',
        '--hide-secret',
        '--kubeconfig',
        connection.kubeconfig,
      ],
      { env, encoding: 'utf8', maxBuffer: 64 << 20 },
    );
    await expect(helm).rejects.toThrow(/APIService "v1\.api\.byok\.gateway\.dev".*exists and cannot be imported/);
  }, 60_000);

  test('marked shell snippets run as printed and exit 0', async () => {
    const snippets = all.filter(
      (b): b is Block & { marker: { kind: 'run'; expect?: string } } => b.marker?.kind === 'run',
    );
    const isAlongside = (b: Block) => ALONGSIDE.some((x) => x.file === b.file && b.text.startsWith(x.opening));
    // The list holds no stale entries: each names exactly one marked snippet.
    expect(
      ALONGSIDE.filter((x) => snippets.filter((b) => b.file === x.file && b.text.startsWith(x.opening)).length !== 1),
    ).toEqual([]);
    /** What went wrong with one snippet, or undefined when it exited 0 and printed what its marker expects. */
    const runOne = async (s: (typeof snippets)[number]): Promise<string | undefined> => {
      const script = s.text.replaceAll('.dev/connection.json', join(devDir, 'connection.json'));
      const started = Date.now();
      try {
        const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], {
          cwd: repoRoot,
          env,
          encoding: 'utf8',
          timeout: 60_000,
          maxBuffer: 16 << 20,
        });
        if (s.marker.expect !== undefined && !stdout.includes(s.marker.expect))
          return `${s.file}:${s.line}: output lacks "${s.marker.expect}":\n${stdout}`;
        return undefined;
      } catch (err) {
        const e = err as { code?: number; stdout?: string; stderr?: string };
        return `${s.file}:${s.line}: exit ${e.code ?? '?'}\n--- stdout\n${e.stdout ?? ''}\n--- stderr\n${e.stderr ?? ''}`;
      } finally {
        process.stderr.write(`docs snippet ${s.file}:${s.line} ran in ${Date.now() - started} ms\n`);
      }
    };
    /** Runs one lane's snippets one after the other, in page order. */
    const lane = async (list: typeof snippets) => {
      const out: (string | undefined)[] = [];
      for (const s of list) out.push(await runOne(s));
      return out;
    };
    const chain = snippets.filter((b) => !isAlongside(b));
    const alongside = snippets.filter(isAlongside);
    const [chainResults, alongsideResults] = await Promise.all([lane(chain), lane(alongside)]);
    const failures = [...chainResults, ...alongsideResults].filter((f): f is string => f !== undefined);
    process.stderr.write(
      `docs snippets: ${snippets.length} run (${alongside.length} alongside), ${failures.length} failed (${DOCS.length} files)\n`,
    );
    expect(failures).toEqual([]);
    expect(chainResults.length + alongsideResults.length).toBe(snippets.length);
    expect(snippets.length).toBeGreaterThanOrEqual(6);
    // The guide's pages are run too, not only the reference pages.
    expect(new Set(snippets.map((b) => b.file).filter((f) => f.startsWith('docs/guide/'))).size).toBeGreaterThanOrEqual(
      5,
    );
  }, 480_000);

  test(`${ONBOARD}: every marked block runs as printed, in order, and exits 0`, async () => {
    await onboardPage;
  }, 300_000);

  test(`${ONBOARD}: what the page promises: only the hash in the cluster, the team credential first, a did-you-mean for gpt-5`, async () => {
    await onboardPage;
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
    for (const out of onboardOutputs) expect(out).not.toContain(key);

    const first = onboardOutputs.find((o) => o.includes('provider_responses'))!;
    // The block waits for the key's Delivered first (kubectl prints "condition met"), then the answer's JSON.
    const answer = JSON.parse(first.slice(first.indexOf('{'))) as { provider_responses: { credential: string }[] };
    // The team's own credential, not the gateway's shared capacity.
    expect(answer.provider_responses[0]!.credential).not.toBe('shared');

    const wrong = JSON.parse(onboardOutputs.find((o) => o.includes('did you mean'))!) as {
      error: { code: number; message: string };
    };
    expect(wrong.error.code).toBe(400);
    expect(wrong.error.message).toMatch(/^model_not_in_catalog: .*; did you mean "openai\/gpt-5"\?$/);
  }, 60_000);

  test(`${ONBOARD}: a key with no usable workspace is Ready=False NoWorkspace and refused 403; a default Workspace made later fixes both`, async () => {
    await noWorkspace;
  }, 120_000);
});
